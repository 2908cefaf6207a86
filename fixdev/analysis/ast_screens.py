"""What the rules' screens (``Rule.screen``) read on CPython's tree before
libcst parses a file: cheap conditions that, where they hold, the rule's
visit is sure to be silent on (``surely_guarded``), or without which it is
(``rooted_in``). A screen may pass a file the visit finds nothing in, but
must never turn away one it would report."""

from __future__ import annotations

import ast
import re

from fixdev.analysis.file_analysis import CPU_WORD, CUDA_WORD


def rooted_in(func: ast.expr, names: set[str]) -> bool:
    """Whether ``func`` (``torch.cuda.synchronize``, ``nn.Linear``) is a name
    or a chain of attributes on one that ``names`` holds (``*``: a star import
    may bind any). A name no import binds has no qualified name
    (``RuleContext.qualified_names``): with ``names`` the names torch's
    imports bind (``file_analysis.torch_imported_names``), any other callee
    names nothing in torch (``self._stream.synchronize``, ``os.environ.get``)."""
    while type(func) is ast.Attribute:
        func = func.value
    return type(func) is ast.Name and (func.id in names or "*" in names)


def cuda_flag(test: ast.expr) -> bool:
    """``file_analysis.cuda_test(test, True)`` for a test whose words are
    plain: a name or a chain of attributes (``use_cuda``, ``args.cuda``), or
    one called with nothing (``torch.cuda.is_available()``), that says cuda
    or gpu and not cpu or disable. Other tests: False (not known here)."""
    if type(test) is ast.Call:
        if test.args or test.keywords:
            return False
        test = test.func
    words = []
    while type(test) is ast.Attribute:
        words.append(test.attr.lower())
        test = test.value
    if type(test) is not ast.Name:
        return False
    words.append(test.id.lower())
    return not any(CPU_WORD.search(w) for w in words) and any(CUDA_WORD.search(w) for w in words)


def surely_guarded(parents: dict, node: ast.AST, design_word: re.Pattern) -> bool:
    """Part of what ``hard_coded_cuda.guarded`` accepts, on CPython's tree:
    ``node`` is in the body of an ``if`` / ``while`` / ``x if c else y`` whose
    test ``cuda_flag`` reads as CUDA in use, or in a function or class whose
    name ``design_word`` matches (``def test_cuda_...``). True only where
    that check is sure to be true; ``parents``: ``file_analysis.ast_parents``."""
    child, current = node, parents.get(node)
    while current is not None:
        kind = type(current)
        if kind is ast.If or kind is ast.While:
            if any(statement is child for statement in current.body) and cuda_flag(current.test):
                return True
        elif kind is ast.IfExp:
            if current.body is child and cuda_flag(current.test):
                return True
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
            if design_word.search(current.name.lower()):
                return True
        child, current = current, parents.get(current)
    return False


def parameter_of(arguments: ast.arguments, default: ast.expr) -> ast.arg | None:
    """The parameter whose default ``default`` is."""
    positional = [*arguments.posonlyargs, *arguments.args]
    for param, value in zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults):
        if value is default:
            return param
    for param, value in zip(arguments.kwonlyargs, arguments.kw_defaults):
        if value is default:
            return param
    return None


def words(node: ast.AST | None) -> set[str]:
    """The lowercased names and attribute names ``node`` reads (``file_analysis.words_of``'s, on CPython's tree)."""
    found = set()
    for sub in ast.walk(node) if node is not None else ():
        if type(sub) is ast.Name:
            found.add(sub.id.lower())
        elif type(sub) is ast.Attribute:
            found.add(sub.attr.lower())
    return found


def compares_name(func: ast.AST, name: str) -> bool:
    """The function's body compares ``name`` with something (``if device == "cpu":``)."""
    return any(
        type(node) is ast.Compare and any(type(side) is ast.Name and side.id == name for side in (node.left, *node.comparators))
        for statement in func.body
        for node in ast.walk(statement)
    )


def surely_cuda_guarded(parents: dict, node: ast.AST) -> bool:
    """``file_analysis.cuda_guarded`` where ``cuda_flag`` can tell: ``node``
    is in the body of an ``if`` of its function (or of the module) whose test
    says CUDA is in use (``if cuda:``, ``if torch.cuda.is_available():``)."""
    child, current = node, parents.get(node)
    while current is not None:
        kind = type(current)
        if kind is ast.If and any(statement is child for statement in current.body) and cuda_flag(current.test):
            return True
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
            return False
        child, current = current, parents.get(current)
    return False


def may_meet_a_caller(parents: dict, call: ast.Call) -> bool:
    """Whether ``call`` may be what ``availability.meets_a_caller`` reports
    under a CUDA guard: ``T = T.cuda()`` right in an ``if <call>:``, in a function."""
    statement = parents.get(call)
    if type(statement) is not ast.Assign or statement.value is not call or len(statement.targets) != 1:
        return False
    block = parents.get(statement)
    if type(block) is not ast.If or type(block.test) is not ast.Call:
        return False
    current = parents.get(block)
    while current is not None:
        if type(current) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
            return True
        current = parents.get(current)
    return False


def has_a_base(cls: ast.ClassDef, names: set[str]) -> bool:
    """Whether ``cls`` derives from something other than plain ``object``
    (``class Store(object):`` is a class with no base): only such a class
    can be a module class (``FileAnalysis.module_classes``). ``names``: the
    names the file's imports bind (``*`` for a star import, which may bind
    ``object`` too) and its classes, any of which may be another ``object``."""
    return any(not (type(base) is ast.Name and base.id == "object") for base in cls.bases) or (bool(cls.bases) and ("object" in names or "*" in names))
