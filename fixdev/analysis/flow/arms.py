"""Which arm of a CUDA test code runs in: a meeting in the CPU arm of
``if use_cuda:`` of values that only that test's CUDA arm moves is no meeting.

The interpreter joins both arms of an ``if`` and does not correlate tests, so
after ``if use_cuda: model.cuda()`` the model "may" be on a device everywhere,
also in the ``else:`` of a later ``if use_cuda:``, where the code feeds it host
tensors on purpose (issue 25). The test is the same expression, as
``ast.unparse`` prints it, that reads a name saying CUDA or a GPU
(``use_cuda``, ``args.cuda``, ``torch.cuda.is_available()``); its CPU arm is the
``else:`` of ``if T:`` or the body of ``if not T:``. Nothing here knows that a
flag was not reassigned in between: a test that reads the same text is taken
to mean the same (the common ``use_cuda = torch.cuda.is_available()`` once).
"""

from __future__ import annotations

import ast
import re

_CUDA_WORD = re.compile(r"cuda|gpu", re.IGNORECASE)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def cpu_arm_tests(parents: dict, node: ast.AST) -> set[str]:
    """The CUDA tests (as text) whose CPU arm holds ``node``, up to its
    function."""
    found = set()
    child, block = node, parents.get(node)
    while block is not None and type(block) not in _FUNCTIONS:
        if type(block) is ast.If:
            test, negated = _unnegated(block.test)
            if _says_cuda(test) and (child in block.orelse if not negated else child in block.body):
                found.add(ast.unparse(test))
        child, block = block, parents.get(block)
    return found


def in_cuda_arm(parents: dict, node: ast.AST, tests: set[str]) -> bool:
    """``node`` runs only in the CUDA arm of one of ``tests``: the body of
    ``if T:`` or the ``else:`` of ``if not T:``, in any function."""
    child, block = node, parents.get(node)
    while block is not None:
        if type(block) is ast.If:
            test, negated = _unnegated(block.test)
            if ast.unparse(test) in tests and (child in block.body if not negated else child in block.orelse):
                return True
        if type(block) is ast.IfExp:
            test, negated = _unnegated(block.test)
            if ast.unparse(test) in tests and child is (block.body if not negated else block.orelse):
                return True
        child, block = block, parents.get(block)
    return False


def _unnegated(test: ast.expr) -> tuple[ast.expr, bool]:
    negated = False
    while type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        test, negated = test.operand, not negated
    return test, negated


def _says_cuda(test: ast.expr) -> bool:
    """A name, attribute or call whose words say CUDA (``use_cuda``,
    ``args.gpu``, ``torch.cuda.is_available()``); not a comparison or a
    combination, whose arms say less."""
    if type(test) not in (ast.Name, ast.Attribute, ast.Call):
        return False
    words = [n.id for n in ast.walk(test) if type(n) is ast.Name] + [n.attr for n in ast.walk(test) if type(n) is ast.Attribute]
    return any(_CUDA_WORD.search(word) for word in words) and not any(re.search(r"cpu|no_cuda|no_gpu|disable", w, re.IGNORECASE) for w in words)
