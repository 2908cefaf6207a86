"""Code that runs only with CUDA because a decorator says so.

A test function or class decorated to skip without a GPU
(``@skip_if_no_gpu``, ``@requires_cuda``, ``@onlyCUDA``,
``@unittest.skipIf(not torch.cuda.is_available(), ...)``,
``@pytest.mark.skipif(not torch.cuda.is_available(), ...)``,
``@unittest.skipUnless(TEST_CUDA, ...)``) never runs on a machine without
one: CUDA-only code there (``x.cuda()``) is the test's purpose, not a bug.
A decorator whose name only mentions CUDA (``@skip_if_cuda``, which skips
*with* it) does not count.
"""

from __future__ import annotations

import re

import libcst as cst

from fixdev.analysis.file_analysis import cuda_test, last_name, words_of

# Names that say "skip unless there is a GPU" / "needs one" (lowercased, words joined by "_").
_CUDA_ONLY_NAME = re.compile(
    r"skip\w*(?:no|without|unless|missing)_?(?:cuda|gpu)"
    r"|requires?_?(?:a_?)?(?:cuda|gpu)|needs?_?(?:a_?)?(?:cuda|gpu)"
    r"|only_?(?:cuda|gpu)|(?:cuda|gpu)s?_?(?:only|required|needed)"
    r"|(?:cuda|gpu)_?(?:unavailable|not_available|missing)"
)


def decorated_cuda_only(facts, node: cst.CSTNode) -> bool:
    """``node`` is inside a function or class (at any depth) whose
    decorators say it runs only with CUDA."""
    current = facts.parent(node)
    while current is not None:
        if isinstance(current, (cst.FunctionDef, cst.ClassDef)) and any(_says_cuda_only(d.decorator) for d in current.decorators):
            return True
        current = facts.parent(current)
    return False


def _says_cuda_only(decorator: cst.BaseExpression) -> bool:
    if isinstance(decorator, cst.Call):
        name = (last_name(decorator.func) or "").lower()
        first = next((a.value for a in decorator.args if a.keyword is None), None)
        if name == "skipif":
            return first is not None and cuda_test(first, False)  # runs where the condition is false
        if name == "skipunless":
            return first is not None and cuda_test(first, True)
        decorator = decorator.func  # @requires_cuda(), @pytest.mark.needs_gpu(...)
    return _CUDA_ONLY_NAME.search("_".join(words_of(decorator))) is not None
