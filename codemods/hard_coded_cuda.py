"""FDV109 hard-coded-cuda: a device chosen as ``"cuda"`` with no fallback.

Also the home of what ``legacy-tensor-type`` shares with this rule: whether a
line only runs when CUDA is in use (``guarded``), whether it belongs to
multi-GPU code (``distributed``), and how ``torch`` is spelled where a
``torch.cuda.is_available()`` is to be written (``torch_at``).
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

import libcst as cst

from fixdev.engine.ast_reuse import remembered
from fixdev.engine.rule import Edit, Invalid, Rule, child_nodes, dotted
from fixdev.engine.source import line_start

from fixdev.analysis import availability, file_analysis as analysis, placement
from fixdev.analysis.holders import last_name as ast_last_name
from fixdev.analysis.ast_screens import compares_name, may_meet_a_caller, parameter_of, rooted_in, surely_guarded, words as ast_words
from fixdev.analysis.flow import What, ast_walk

if TYPE_CHECKING:
    from fixdev.analysis.file_analysis import FileAnalysis

# torch.cuda functions that raise without CUDA and whose result a statement
# drops: the statement can be guarded.
GUARDABLE_CALLS = frozenset(
    "synchronize set_device reset_peak_memory_stats reset_max_memory_allocated ipc_collect init set_per_process_memory_fraction".split()
)
# torch.cuda functions that raise without CUDA and return something: reported.
QUERIES = frozenset("current_device get_device_name get_device_properties get_device_capability mem_get_info".split())
_CUDA_LITERAL = re.compile(r"cuda(?::\d+)?")
# in a function's or class's name: code written for CUDA (`def test_cuda_...`,
# `class emit_nvtx`, `class autocast`)
_CUDA_DESIGN_WORD = re.compile(r"cuda|gpu|accelerator|nvtx|autocast")
# exception types a `try` may catch "CUDA is missing" as
_CATCHES_MISSING_CUDA = frozenset({"Exception", "BaseException", "RuntimeError", "AssertionError", "AttributeError", "TypeError"})
_EXITS = frozenset({"exit", "_exit", "skip", "skipTest", "SkipTest"})


# -- literals ---------------------------------------------------------------------


def cuda_literal(node: cst.CSTNode) -> str | None:
    """``"cuda"`` or ``"cuda:N"`` when ``node`` is that string literal."""
    if not isinstance(node, cst.SimpleString) or "cuda" not in node.value:
        return None
    value = node.evaluated_value
    return value if isinstance(value, str) and _CUDA_LITERAL.fullmatch(value) else None


def fallback_text(literal: cst.SimpleString, code: str, torch: str) -> str:
    """``"cuda" if torch.cuda.is_available() else "cpu"``, in the literal's quotes."""
    start = len(code) - len(code.lstrip("rRbBuUfF"))
    quote = code[start : start + 3] if code[start : start + 3] in ('"""', "'''") else code[start]
    return f"{code} if {torch}.cuda.is_available() else {quote}cpu{quote}"


# -- where CUDA is known to be in use ----------------------------------------------


def _branch_truth(holder: cst.CSTNode, child: cst.CSTNode) -> bool | None:
    """Whether ``child`` runs when ``holder``'s test is true (True), false
    (False), or either (None)."""
    if isinstance(holder, (cst.If, cst.While)):
        if child is holder.body:
            return True
        if child is holder.orelse:
            return False
    elif isinstance(holder, cst.IfExp):
        if child is holder.body:
            return True
        if child is holder.orelse:
            return False
    return None


def _exits(block: cst.BaseSuite) -> bool:
    """A block that ends by leaving: return, raise, continue, break, or a call
    such as ``sys.exit()`` / ``pytest.skip()``."""
    body = block.body
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    if isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
        return True
    return isinstance(last, cst.Expr) and isinstance(last.value, cst.Call) and analysis.last_name(last.value.func) in _EXITS


def _checked_before(facts: "FileAnalysis", statement: cst.CSTNode, block: cst.CSTNode) -> bool:
    """An earlier statement of ``block`` asserts CUDA, or leaves when it is
    missing (``if not torch.cuda.is_available(): return``). The block's first
    such statement is found once: read up to each finding's statement, a
    module of n findings cost n²."""
    memo = facts.shared.setdefault("hard-coded-cuda first check", {})
    entry = memo.get(id(block))
    if entry is None:
        entry = memo[id(block)] = (block, _first_check(block.body))  # the block kept, so its id is not reused
    first = entry[1]
    if first is None:
        return False
    try:
        return first < facts.index_in(block.body, statement)
    except ValueError:  # not one of the block's statements: every statement is earlier
        return True


def _first_check(body) -> int | None:
    for i, earlier in enumerate(body):
        if isinstance(earlier, cst.SimpleStatementLine):
            if any(isinstance(s, cst.Assert) and analysis.cuda_test(s.test, True) for s in earlier.body):
                return i
        elif isinstance(earlier, cst.If) and analysis.cuda_test(earlier.test, False) and _exits(earlier.body):
            return i
    return None


def _mentions_cuda(node: cst.CSTNode) -> bool:
    return any(analysis.CUDA_WORD.search(w) for w in analysis.words_of(node))


def _catches_missing_cuda(handler: cst.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [cst.Element(handler.type)]
    return any(analysis.last_name(t.value) in _CATCHES_MISSING_CUDA for t in types)


def guarded(facts: "FileAnalysis", node: cst.CSTNode) -> bool:
    """``node`` only runs where CUDA is in use, or is CUDA code by design: under
    a test that shows it (``if``, ``while``, ``x if c else y``, ``c and x``),
    after an ``assert`` of it or an early exit without it, inside a ``try``
    that catches the failure, or in a function or class whose name or
    decorators say cuda or gpu (``def test_cuda``, ``@skipIf(not TEST_CUDA)``).
    Everything ``analysis.cuda_guarded`` (``cuda-call``'s test) accepts is
    accepted here too, so this rule is never louder than that one."""
    if analysis.cuda_guarded(facts, node):
        return True
    child, current = node, facts.parent(node)
    while current is not None:
        truth = _branch_truth(current, child)
        if truth is not None and analysis.cuda_test(current.test, truth):
            return True
        if truth and isinstance(current.test, cst.Name) and _flag_set_for_cuda(facts, current.test.value, current):
            return True
        if isinstance(current, cst.BooleanOperation) and child is current.right:
            if analysis.cuda_test(current.left, isinstance(current.operator, cst.And)):
                return True
        if isinstance(current, cst.Try) and child is current.body and any(_catches_missing_cuda(h) for h in current.handlers):
            return True
        if isinstance(current, (cst.IndentedBlock, cst.Module)) and _checked_before(facts, child, current):
            return True
        if isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            if _CUDA_DESIGN_WORD.search(current.name.value.lower()) or any(_mentions_cuda(d) for d in current.decorators):
                return True
        child, current = current, facts.parent(current)
    return _module_marked_cuda(facts)


def _flag_set_for_cuda(facts: "FileAnalysis", name: str, holder: cst.CSTNode) -> bool:
    """``name`` is a flag the function holding ``holder`` sets to ``True`` only
    under a CUDA test, and otherwise to ``False`` (``need_sync = False``, then
    ``if arg.is_cuda: need_sync = True``): ``if need_sync:`` runs only with
    CUDA."""
    scope = facts.enclosing(holder, cst.FunctionDef) or facts.module
    if isinstance(scope, cst.FunctionDef) and name in placement.parameter_names(scope):
        return False  # the caller may pass True
    sets_true = 0
    stack: list[cst.CSTNode] = list(child_nodes(scope.body) if isinstance(scope, cst.FunctionDef) else scope.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(child_nodes(node))
        if isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)) and dotted(node.target) == name:
            return False
        if isinstance(node, (cst.For, cst.With, cst.ExceptHandler, cst.Global, cst.Nonlocal)) and name in placement.bound_names(node):
            return False  # bound some other way too
        if not isinstance(node, cst.Assign) or not any(dotted(t.target) == name for t in node.targets):
            continue
        if len(node.targets) != 1 or not isinstance(node.value, cst.Name) or node.value.value not in ("True", "False"):
            return False
        if node.value.value == "False":
            continue
        child, current = node, facts.parent(node)
        while current is not None and current is not scope and not (_branch_truth(current, child) is True and analysis.cuda_test(current.test, True)):
            child, current = current, facts.parent(current)
        if current is None or current is scope:
            return False
        sets_true += 1
    return sets_true > 0


def _module_marked_cuda(facts: "FileAnalysis") -> bool:
    """``pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), ...)``."""
    if "cuda_marked_module" not in facts.shared:
        marked = False
        for statement in facts.module.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and any(dotted(t.target) == "pytestmark" for t in small.targets):
                        marked = marked or _mentions_cuda(small.value)
        facts.shared["cuda_marked_module"] = marked
    return facts.shared["cuda_marked_module"]


def distributed(facts: "FileAnalysis", node: cst.CSTNode) -> bool:
    """``node`` is in code written for GPUs on purpose, where a CPU fallback
    has no meaning: the function holding it (or the module's top-level code)
    is multi-GPU code (it calls ``torch.distributed``, picks a GPU by a
    variable, ``torch.cuda.set_device(local_rank)``, or names a second one,
    ``"cuda:1"``), or uses CUDA-only APIs that no guard makes portable
    (``torch.cuda.Event``, ``torch.cuda.current_device()``, CUDA graphs, NVTX;
    ``node`` itself aside); or the file imports a GPU kernel language
    (Triton, CUTLASS, CuPy, PyCUDA, Numba's CUDA, TensorRT)."""
    if _imports_gpu_kernels(facts):
        return True
    scope = facts.enclosing(node, cst.FunctionDef) or facts.module
    memo = facts.shared.setdefault("distributed_scopes", {})
    if scope not in memo:
        memo[scope] = _gpu_evidence(facts, scope)
    multi_gpu, cuda_calls = memo[scope]
    return multi_gpu or any(call is not node for call in cuda_calls)


# torch.cuda functions that work without CUDA, or that a guard makes portable:
# calling them says nothing about whether the code is meant for GPUs only
_PORTABLE = frozenset(
    "is_available device_count empty_cache manual_seed manual_seed_all seed seed_all initial_seed "
    "memory_allocated max_memory_allocated memory_reserved max_memory_reserved is_initialized "
    "is_bf16_supported get_arch_list amp".split()
) | GUARDABLE_CALLS
# (TensorRT: an inference runtime that only runs on NVIDIA GPUs)
_KERNEL_LANGUAGES = frozenset({"triton", "cutlass", "cupy", "pycuda", "cuda", "numba.cuda", "tensorrt"})


def _imports_gpu_kernels(facts: "FileAnalysis") -> bool:
    if "imports_gpu_kernels" not in facts.shared:
        flow = facts.flow()
        if flow.parsed:  # CPython's tree, a statement at a time (the language server keeps each one's answer)
            found = any(remembered("imports gpu kernels", statement, lambda statement=statement: _kernel_imports(statement)) for statement in flow.tree.body)
        else:
            found = False
            for node in facts.index_order():
                if isinstance(node, cst.Import):
                    found = any(_kernel_module(dotted(a.name) or "") for a in node.names)
                elif isinstance(node, cst.ImportFrom) and node.module is not None and not node.relative:
                    found = _kernel_module(dotted(node.module) or "")
                if found:
                    break
        facts.shared["imports_gpu_kernels"] = found
    return facts.shared["imports_gpu_kernels"]


def _kernel_module(name: str) -> bool:
    return name.split(".")[0] in _KERNEL_LANGUAGES or name.startswith("numba.cuda")


def _kernel_imports(statement: ast.stmt) -> bool:
    for node in ast_walk(statement):
        if type(node) is ast.Import and any(_kernel_module(alias.name) for alias in node.names):
            return True
        if type(node) is ast.ImportFrom and node.module is not None and not node.level and _kernel_module(node.module):
            return True
    return False


def _gpu_evidence(facts: "FileAnalysis", scope: cst.CSTNode) -> tuple[bool, list[cst.Call]]:
    """(multi-GPU code, the CUDA-only calls) of a function, or of the
    module's top-level code."""
    cuda_calls: list[cst.Call] = []
    stack = list(child_nodes(scope.body) if isinstance(scope, cst.FunctionDef) else scope.body)
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.ClassDef)) and scope is facts.module:
            continue  # top-level code only
        literal = cuda_literal(current)
        if literal is not None and literal not in ("cuda", "cuda:0"):
            return True, []  # a second GPU named: "cuda:1"
        if isinstance(current, cst.Call):
            names = facts.qnames(current.func)
            if any(n.startswith("torch.distributed.") for n in names) and not _single_process_too(facts, current, names, scope):
                return True, []
            if "torch.cuda.set_device" in names and current.args and not isinstance(current.args[0].value, cst.Integer):
                return True, []
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["torch", "cuda"] and len(parts) > 2 and parts[2] not in _PORTABLE and not parts[2].endswith("Tensor"):
                    # (a legacy torch.cuda.FloatTensor is legacy-tensor-type's to fix, not a design)
                    if not (scope is facts.module and parts[2] in QUERIES):  # a script printing its GPU's name is still a script
                        cuda_calls.append(current)
                elif name.startswith("torch._C._cuda"):
                    cuda_calls.append(current)
        stack.extend(child_nodes(current))
    return False, cuda_calls


# torch.distributed functions that answer whether it is in use: code asking
# runs in a plain single process too
_DISTRIBUTED_QUESTIONS = frozenset(
    "is_available is_initialized is_torchelastic_launched is_nccl_available is_gloo_available is_mpi_available".split()
)


def _single_process_too(facts: "FileAnalysis", call: cst.Call, names: set[str], scope: cst.CSTNode) -> bool:
    """A ``torch.distributed`` call that also runs (or is skipped) in a single
    CPU process: a question (``dist.is_initialized()``), or a call under an
    ``if`` that asks one (``if dist.is_initialized(): dist.barrier()``). Code
    beside it is not multi-GPU code for that."""
    if any(n.split(".")[-1] in _DISTRIBUTED_QUESTIONS for n in names):
        return True
    child, current = call, facts.parent(call)
    while current is not None and current is not scope:
        if isinstance(current, cst.If) and child is current.body and _asks_distributed(facts, current.test):
            return True
        child, current = current, facts.parent(current)
    return False


def _asks_distributed(facts: "FileAnalysis", test: cst.CSTNode) -> bool:
    stack = [test]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call) and any(n.startswith("torch.distributed.") and n.split(".")[-1] in _DISTRIBUTED_QUESTIONS for n in facts.qnames(node.func)):
            return True
        stack.extend(child_nodes(node))
    return False


# -- spelling torch where it is needed -----------------------------------------------


def torch_at(facts: "FileAnalysis", node: cst.CSTNode) -> str | None:
    """The name of the module-level ``import torch`` when it is bound wherever
    ``node`` runs and not shadowed by the function holding it; else None."""
    torch = placement.unconditional_torch(facts)
    if torch is None or not placement.bound_when_run(facts, torch.statement, node):
        return None
    func = facts.enclosing(node, cst.FunctionDef)
    while func is not None:
        if placement.binds(func, torch.alias):
            return None
        func = facts.enclosing(func, cst.FunctionDef)
    return torch.alias


def cuda_device(rule: Rule, node: cst.CSTNode, moved: cst.BaseExpression | None = None) -> tuple[str, list[Edit]] | None:
    """The device to write where code names CUDA outright, and the edits that
    define it; None when no definition can be placed safely.

    In a module's method, its first tensor parameter's device, unless
    ``moved`` (the value ``.to("cuda")`` moves) is made from it
    (``analysis.method_input_device``); else a device
    the program binds wherever ``node`` runs (``placement.existing_device``);
    else ``device = torch.device("cuda" if torch.cuda.is_available() else
    "cpu")``, defined once where ``cuda-call`` defines it
    (``placement.define_device``: the same line, so the engine adds it once).
    Not the device flow's guess of a tensor the line works with
    (``analysis.device_expression``): that tensor may live on the CPU, and
    code that named CUDA must stay on CUDA where there is one."""
    facts = analysis.of(rule)
    tensor_device = analysis.method_input_device(rule, node, moved)
    if tensor_device is not None:
        return tensor_device, []
    existing = placement.existing_device(facts, node)
    if existing is not None:
        return existing, []
    return placement.define_device(rule, facts, node)


def torch_prefix(rule: Rule, expression: cst.BaseExpression) -> str | None:
    """``t`` when ``expression`` is ``t.<attr>`` and ``t`` is torch itself."""
    if isinstance(expression, cst.Attribute) and isinstance(expression.value, cst.Name):
        if rule.qualified_names(expression.value) == {"torch"}:
            return expression.value.value
    return None


def _is_device_name(name: str) -> bool:
    lowered = name.lower()
    return lowered in ("device", "dev") or lowered.endswith("_device")


def _assigned_more_than_once(facts: "FileAnalysis", statement: cst.CSTNode, target: cst.BaseExpression) -> bool:
    """``target`` (a name, or ``self.x``) is assigned by another statement of
    its scope (the function, or the class for ``self.x``): the program chooses
    the device somewhere else too (``if args.cpu: device = "cpu"``)."""
    text = dotted(target)
    if isinstance(target, cst.Attribute):
        scope = facts.enclosing(statement, cst.ClassDef)
        if scope is None:
            return True
        count = 0
        for node in facts.index_order():
            if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and dotted(node.target) == text:
                count += facts.enclosing(node, cst.ClassDef) is scope
        return count > 1
    scope = facts.enclosing(statement, cst.FunctionDef) or facts.module
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    bindings = [s for s in placement.own_statements(body) if text in placement.bound_names(s)]
    return len(bindings) > 1


class HardCodedCuda(Rule):
    """
    ## What it does
    Finds a device chosen as `"cuda"` with no fallback, and calls that need
    CUDA, outside any check that CUDA is there:
    `device = "cuda"`, `device = torch.device("cuda")`, a `device="cuda"`
    parameter default, `add_argument("--device", default="cuda")` or
    `torch.set_default_device("cuda")`, a
    `.to("cuda")` or a torch factory's `device="cuda"`, and
    `torch.cuda.synchronize()` / `torch.cuda.set_device(0)`.
    Where a device is chosen (an assignment, a default, `torch.device(...)`),
    the choice gets a fallback in place:
    `"cuda" if torch.cuda.is_available() else "cpu"`. Where a device is used
    (`.to("cuda")`, `torch.zeros(n, device="cuda")`), it becomes the device
    the code already has in reach, or one defined once, as `cuda-call` does
    (`device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`).
    A `torch.cuda.synchronize()` statement gets `if torch.cuda.is_available():`,
    and a tensor's `x.pin_memory()` becomes
    `x.pin_memory() if torch.cuda.is_available() else x`.

    ## Why is this bad?
    The program cannot run on a machine without CUDA (a laptop, CI, a CPU
    server): the first allocation raises `Torch not compiled with CUDA
    enabled` (or `Found no NVIDIA driver`), though nothing in it needs a GPU
    but the string. `x.pin_memory()` raises `Cannot access accelerator device
    when none is available` on such a machine.

    ## Example
    ```python
    device = torch.device("cuda")
    def make_encoder(width, device="cuda"): ...
    mask = torch.ones(n).to("cuda")
    torch.cuda.synchronize()
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    def make_encoder(width, device="cuda" if torch.cuda.is_available() else "cpu"): ...
    mask = torch.ones(n).to(device)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    ```

    ## Fix safety
    With CUDA the program does what it did. Without it, it now runs on the
    CPU. A `.to("cuda")` that becomes `.to(device)` follows the device the
    code defines (a `device` in reach may be another GPU or the CPU: it is
    the one the program chose); where the moved tensor is later written in
    place it becomes `.to(device, copy=True)`, as `.to("cuda")` always copied
    a CPU tensor (unsafe where that write is out of sight, in a caller: on
    the CPU it would alias the original); not on a batch object (a
    tokenizer's `BatchEncoding`), whose `.to()` takes no `copy=`. In a module others import, a choice
    that runs at import (a module-level device, a parameter default) is
    reported rather than given a fallback there, which would query CUDA on
    import. `"cuda:1"` keeps its index (the fallback is
    written in place). A `torch.device("cuda")` handed to code outside torch
    (`create_loader(device=torch.device("cuda"))`) gets its fallback in
    place. `torch.cuda.empty_cache()`, `manual_seed` and `device_count()`
    work without CUDA and are left alone. `x.pin_memory()` still pins with
    CUDA; without it the tensor stays as it is (pinning only speeds copies).
    The query is written where the pin is, never at module level.

    ## When it stays silent
    For `device="cuda"` given to a call whose name says it takes a device
    *type* (`checkpoint.set_device_type(device="cuda")`): it places nothing.
    For a `device="cuda"` default of a private module function (`_get_pixels`)
    that every use in the file calls with the device given: the default never
    runs. Under a check that CUDA is in use: `if torch.cuda.is_available():`, an
    `args.cuda` / `use_gpu` flag, `x.is_cuda`, `device.type == "cuda"`,
    `device != "cpu"`, `c and x.to("cuda")`, a flag the function sets to
    `True` only under such a test (`if arg.is_cuda: need_sync = True`), after `assert
    torch.cuda.is_available()` or `if not ...: return`, inside a `try` that
    catches the failure, and in functions or classes whose name or decorators
    say cuda, gpu, nvtx or autocast (`def test_cuda_...`,
    `@skipIf(not TEST_CUDA)`). In code written for GPUs on purpose: a
    function that calls `torch.distributed`, picks its GPU by a variable
    (`torch.cuda.set_device(local_rank)`, `synchronize(device=rank)`; not a
    `torch.distributed` call that asks whether it is in use, or that runs
    only under such a question, `if dist.is_initialized(): dist.barrier()`:
    that code runs in one CPU process too), builds
    the device (`f"cuda:{rank}"`) or names a second GPU (`"cuda:1"`); one that
    uses CUDA-only APIs no guard makes portable (`torch.cuda.Event`,
    `torch.cuda.current_device()`, CUDA graphs); a file that imports Triton,
    CUTLASS, CuPy, PyCUDA, Numba's CUDA or TensorRT. A device name assigned more than
    once in its scope (the program chooses elsewhere too); `"cuda"` compared
    with something (`x.device == torch.device("cuda")`), and
    `torch.device("cuda").type`, the label `"cuda"` (`x.device.type ==
    torch.device("cuda").type`: a fallback there would make a CPU device
    compare equal on a machine without CUDA);
    `torch.autocast("cuda")` (which only warns without CUDA);
    `.pin_memory()` of something not shown to be a tensor, inside a
    `pin_memory` method or helper (a batch's own, called by the loader only
    where it can pin) or under a test of a pinning flag (`if pin_memory:`); a
    `device="cuda"` parameter that the function compares (`if device ==
    "cpu":`), checks CUDA for, or only hands to autocast or a grad scaler
    (also a scaler's own `super().__init__(device)`), or
    that also takes a GPU index (`device: int | str | torch.device = "cuda"`); a
    `"cuda"` string handed to a function outside torch (`skipIf(device="cuda")`:
    its meaning is the callee's). Reported without a fix: a choice where
    `torch` is not imported before it runs, a script's top-level question
    only a GPU answers (`torch.cuda.get_device_name()`), and a guardable call
    that is not a statement of its own; and, as `cuda-call` reports the same
    with `.cuda()`, in a library, `T = T.to("cuda")` under `if
    torch.cuda.is_available():` whose `T` then meets a parameter read as an
    array or tensor (a GPU being there is not where the caller's tensor is).
    """

    code = "FDV109"
    name = "hard-coded-cuda"
    group = "cuda-only"
    message = 'Hard-coded "cuda": the program cannot run without CUDA'
    # "cuda" first, searched fast: a torch.cuda function is reached through a
    # name that spells it (`torch.cuda.synchronize`, `from torch.cuda import ...`)
    trigger = r"cuda|pin_memory", r"""["']cuda|\.pin_memory\(\s*\)|\b(?:synchronize|set_device|reset_peak_memory_stats|reset_max_memory_allocated|ipc_collect|cuda\s*\.\s*init|set_per_process_memory_fraction|current_device|get_device_name|get_device_properties|get_device_capability|mem_get_info)\s*\("""

    @classmethod
    def screen(cls, screening) -> bool:
        """A ``"cuda"`` literal where ``visit_SimpleString`` looks (a ``.to()``'s
        or a ``device=``'s, a device-named assignment's or parameter's, a
        torch call's first argument, an ``add_argument``'s ``default=``), or a
        ``torch.cuda`` function that raises without CUDA called with constant
        arguments (``visit_Call``), or ``x.pin_memory()``; a choice or a use of
        a device, a call or a pin that ``guarded`` surely accepts is left out
        (a move ``T = T.to("cuda")`` right in an ``if <call>:`` stays:
        ``availability.meets_a_caller``)."""
        flow = analysis.flow_for(screening)
        parents = analysis.ast_parents(flow)
        torch_names = analysis.torch_imported_names(screening)

        def guarded(node: ast.AST) -> bool:
            return surely_guarded(parents, node, _CUDA_DESIGN_WORD)

        if any(type(call.func) is ast.Attribute and not call.args and not guarded(call) for call in analysis.calls_named(screening, "pin_memory")):
            return True
        for call in analysis.calls_named(screening, *GUARDABLE_CALLS, *QUERIES):
            if rooted_in(call.func, torch_names) and (flow.qualified_name(call.func) or "torch.cuda.").startswith("torch.cuda."):
                if all(type(arg) is ast.Constant for arg in analysis.call_arguments(call)) and not guarded(call):
                    return True
        for node, parent in parents.items():
            if not (type(node) is ast.Constant and type(node.value) is str and _CUDA_LITERAL.fullmatch(node.value)):
                continue
            kind = type(parent)
            if kind is ast.keyword:
                call = parents[parent]
                if type(call) is not ast.Call:
                    continue  # a class statement's keyword (`class A(metaclass=M, device="cuda")`)
                if parent.arg == "device" and "device_type" not in (ast_last_name(call.func) or "").lower():
                    if not guarded(call):
                        return True  # a use (no move: silent where guarded, no caller's value met)
                    continue
                if parent.arg == "default" and ast_last_name(call.func) == "add_argument" and not guarded(node):
                    return True
            elif kind is ast.Call:
                if not parent.args or parent.args[0] is not node:
                    continue
                if type(parent.func) is ast.Attribute and parent.func.attr == "to":
                    if not guarded(parent) or may_meet_a_caller(parents, parent):
                        return True  # a move: where guarded, reported where it meets a caller's value
                    continue
                if rooted_in(parent.func, torch_names):  # torch.device("cuda"), torch.set_default_device("cuda")
                    holder = parents.get(parent)
                    if len(parent.args) == 1 and not parent.keywords and type(holder) in (ast.keyword, ast.Call):
                        # a torch.device in a call (a use's place, or else a choice): silent where that call is guarded
                        outer = parents.get(holder) if type(holder) is ast.keyword else holder
                        if type(outer) is not ast.Call or not guarded(outer):
                            return True
                        continue
                    if not guarded(node):
                        return True
            elif kind is ast.Assign or kind is ast.AnnAssign:
                targets = parent.targets if kind is ast.Assign else [parent.target]
                if len(targets) == 1 and type(targets[0]) in (ast.Name, ast.Attribute) and _is_device_name(ast_last_name(targets[0])) and not guarded(node):
                    return True
            elif kind is ast.arguments:
                param = parameter_of(parent, node)
                if param is None or not _is_device_name(param.arg) or "int" in ast_words(param.annotation):
                    continue
                func = parents.get(parent)
                if type(func) in (ast.FunctionDef, ast.AsyncFunctionDef) and compares_name(func, param.arg):
                    continue  # the function looks at the device it is given (``_handles_devices``)
                if not guarded(node):
                    return True
        return False

    VALID = [
        # the type label "cuda", compared: no device chosen
        "import torch\ndef f(seed_all, device):\n    gpu = device.type == torch.device('cuda').type\n    seed_all(gpu)\n",
        # a device type recorded, nothing placed
        "import torch\nfrom torch.utils import checkpoint\ncheckpoint.set_device_type(device='cuda')\n",
        # a private helper's default that every call overrides never runs
        "import torch\n\n\ndef _pixels(n, device='cuda'):\n    return torch.zeros(n, device=device)\n\n\ndef fill(n, device):\n    return _pixels(n, device=device)\n",
        'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
        'import torch\nif torch.cuda.is_available():\n    x = torch.ones(3).to("cuda")\n    torch.cuda.synchronize()\n',
        'import torch\ndef f(x):\n    if x.is_cuda:\n        torch.cuda.synchronize()\n    return x\n',
        # a batch's own pin_memory, called by the loader only where it can pin
        'import torch\nclass Batch:\n    def __init__(self, x):\n        self.x = torch.as_tensor(x)\n'
        '    def pin_memory(self):\n        self.x = self.x.pin_memory()\n        return self\n',
        'import torch\ndef run(rank):\n    torch.cuda.set_device(rank)\n    return torch.ones(3).to(f"cuda:{rank}")\n',
        'import torch\nif args.cuda:\n    device = torch.device("cuda")\nelse:\n    device = torch.device("cpu")\n',
        'import torch\nsame = x.device == torch.device("cuda")\ntorch.cuda.empty_cache()\n',
        'import torch\nwith torch.autocast("cuda"):\n    y = model(x)\n',
        # the moved value meets only what it was made from
        'import torch\ndef f(w):\n    w = torch.tensor(w)\n    if torch.cuda.is_available():\n        w = w.to("cuda")\n    return w / w.sum()\n',
    ]
    INVALID = [
        # a library's helper: "a GPU exists" is not where the caller's tensor is
        Invalid('import torch\ndef f(out, k):\n    t = torch.arange(k)\n    if torch.cuda.is_available():\n        t = t.to("cuda")\n    return out[:, 0] * t\n', None),
        # a tokenizer's BatchEncoding written in place: its .to() takes no copy=
        Invalid(
            "import torch\ndef prepare(tokenizer, texts):\n    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "    enc = tokenizer(texts, return_tensors='pt').to('cuda')\n    enc['labels'] = enc['input_ids'].clone()\n    return enc\n",
            "import torch\ndef prepare(tokenizer, texts):\n    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "    enc = tokenizer(texts, return_tensors='pt').to(device)\n    enc['labels'] = enc['input_ids'].clone()\n    return enc\n",
        ),
        Invalid(
            'import torch\ndevice = torch.device("cuda")\n',
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch\ndef encoder(width, device='cuda'):\n    return torch.zeros(width, device=device)\n",
            "import torch\ndef encoder(width, device='cuda' if torch.cuda.is_available() else 'cpu'):\n    return torch.zeros(width, device=device)\n",
        ),
        Invalid(
            'import torch\nmask = torch.ones(3).to("cuda")\n',
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nmask = torch.ones(3).to(device)\n',
        ),
        Invalid(
            'import torch\ndef step(model, x):\n    y = model(x)\n    torch.cuda.synchronize()\n    return y\n',
            'import torch\ndef step(model, x):\n    y = model(x)\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    return y\n',
        ),
        # a barrier asked for only where distributed runs: still one CPU process too
        Invalid(
            'import torch\nimport torch.distributed as dist\ndef step(model, x):\n    if dist.is_initialized():\n        dist.barrier()\n'
            '    torch.cuda.synchronize()\n    return model(x)\n',
            'import torch\nimport torch.distributed as dist\ndef step(model, x):\n    if dist.is_initialized():\n        dist.barrier()\n'
            '    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    return model(x)\n',
        ),
        Invalid(
            'import torch\ndef stage(a):\n    x = torch.from_numpy(a)\n    return x.pin_memory()\n',
            'import torch\ndef stage(a):\n    x = torch.from_numpy(a)\n    return x.pin_memory() if torch.cuda.is_available() else x\n',
        ),
        Invalid('device = "cuda"\nimport torch\n', None),
        Invalid("import torch\nprint(torch.cuda.get_device_name(0))\n", None),
    ]

    # -- string literals ----------------------------------------------------------

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        literal = cuda_literal(node)
        if literal is None:
            return
        parent = self.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.parent(parent)
            if not isinstance(call, cst.Call):
                return
            if parent.keyword is None and len(call.args) == 1 and "torch.device" in self.qualified_names(call.func):
                self._torch_device(call, node, literal)
            elif self._use_position(call, parent):
                self._use(call, parent, node, literal)
            elif parent.keyword is not None and parent.keyword.value == "default" and self._device_option(call):
                self._choice(node, call)
            elif parent is call.args[0] and "torch.set_default_device" in self.qualified_names(call.func):
                self._choice(node, call, torch_prefix(self, call.func))
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is node:
            self._assignment(parent, node)
        elif isinstance(parent, cst.Param) and parent.default is node and _is_device_name(parent.name.value):
            self._default(parent, node)

    def _use_position(self, call: cst.Call, arg: cst.Arg) -> bool:
        """``arg`` says where ``call`` puts its result: ``.to(<here>)``,
        ``.to(device=<here>)``, ``f(..., device=<here>)``."""
        if arg.keyword is not None:
            # `checkpoint.set_device_type(device="cuda")` names a device type
            # for a library's bookkeeping: no tensor or module is placed there
            return arg.keyword.value == "device" and "device_type" not in (analysis.last_name(call.func) or "").lower()
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to":
            return arg is call.args[0] and not self.qualified_names(call.func.value)
        return False

    def _device_option(self, call: cst.Call) -> bool:
        """``parser.add_argument("--device", ..., default=...)``."""
        if analysis.last_name(call.func) != "add_argument" or not call.args:
            return False
        first = call.args[0].value
        value = first.evaluated_value if isinstance(first, cst.SimpleString) else None
        return isinstance(value, str) and _is_device_name(value.lstrip("-").replace("-", "_"))

    def _silent(self, node: cst.CSTNode) -> bool:
        facts = analysis.of(self)
        return guarded(facts, node) or distributed(facts, node)

    def _torch_device(self, call: cst.Call, literal_node: cst.SimpleString, literal: str) -> None:
        """``torch.device("cuda")``: a use when it stands where a use would
        (``.to(torch.device("cuda"))``), left alone in a comparison, else a
        choice made in place."""
        holder = self.parent(call)
        if isinstance(holder, cst.Arg) and isinstance(self.parent(holder), cst.Call) and self._use_position(self.parent(holder), holder):
            self._use(self.parent(holder), holder, literal_node, literal, call)
            return
        if isinstance(holder, (cst.Comparison, cst.ComparisonTarget)):
            return
        if isinstance(holder, cst.Attribute) and holder.value is call and holder.attr.value == "type":
            return  # `torch.device("cuda").type` is the label "cuda" (compared with a device's type), no device chosen
        if isinstance(holder, cst.Param) and not _is_device_name(holder.name.value):
            return
        if isinstance(holder, (cst.Assign, cst.AnnAssign)) and holder.value is call:
            self._assignment(holder, literal_node, torch_prefix(self, call.func), named=False)
            return
        self._choice(literal_node, call, torch_prefix(self, call.func))

    def _assignment(self, statement: cst.Assign | cst.AnnAssign, node: cst.SimpleString, torch: str | None = None, named: bool = True) -> None:
        """``device = "cuda"`` (a name that says device, unless the value is
        ``torch.device(...)``), assigned once in its scope."""
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        if len(targets) != 1 or not isinstance(targets[0], (cst.Name, cst.Attribute)):
            return
        name = targets[0].value if isinstance(targets[0], cst.Name) else targets[0].attr.value
        if (named and not _is_device_name(name)) or _assigned_more_than_once(analysis.of(self), statement, targets[0]):
            return
        self._choice(node, statement, torch)

    def _default(self, param: cst.Param, node: cst.SimpleString) -> None:
        func = analysis.of(self).enclosing(param, (cst.FunctionDef, cst.Lambda))
        if isinstance(func, cst.FunctionDef) and (self._names_an_autocast_device(func, param.name.value) or self._handles_devices(func, param.name.value)):
            return
        if param.annotation is not None and "int" in analysis.words_of(param.annotation.annotation):
            return  # `device: int | str | torch.device = "cuda"`: a GPU index or "cuda", torch.cuda's own API
        if isinstance(func, cst.FunctionDef) and self._default_never_used(func, param):
            return
        # a default is evaluated where the def runs, in the scope around it
        self._choice(node, func if func is not None else param, silent_at=param)

    def _default_never_used(self, func: cst.FunctionDef, param: cst.Param) -> bool:
        """A private function of the module (``_get_pixels``) whose every use
        in the file is a call that passes the parameter: the default never
        runs, so it cannot fail (a report would be a false alarm)."""
        name = func.name.value
        if not name.startswith("_") or name.startswith("__") or analysis.of(self).enclosing(func, (cst.FunctionDef, cst.ClassDef)) is not None:
            return False
        params = func.params
        positional = [*params.posonly_params, *params.params]
        index = next((i for i, p in enumerate(positional) if p is param), None)
        calls = uses = 0
        stack: list[cst.CSTNode] = [self.context.module]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name:
                calls += 1
                args = node.args
                if any(a.star for a in args):
                    return False  # *args / **kwargs: whether it is passed is not shown
                given = any(a.keyword is not None and a.keyword.value == param.name.value for a in args)
                given = given or (index is not None and sum(a.keyword is None for a in args) > index)
                if not given:
                    return False
            elif isinstance(node, cst.Name) and node.value == name:
                uses += 1
            stack.extend(child_nodes(node))
        # every mention is a call's name or the definition's own: nothing
        # passes the function elsewhere, where the default might run
        return calls > 0 and uses == calls + 1

    def _handles_devices(self, func: cst.FunctionDef, name: str) -> bool:
        """The function looks at the device it is given (``if device ==
        "cpu":``) or at whether CUDA is there: the default is its design."""
        facts = analysis.of(self)
        holders = {name}  # the parameter, and what it is stored in (`self._device = device`)
        stack: list[cst.CSTNode] = [func.body]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == name:
                holders.update(dotted(t.target) for t in node.targets if dotted(t.target))
            stack.extend(child_nodes(node))
        stack = [func.body]
        while stack:
            node = stack.pop()
            if isinstance(node, cst.Comparison):
                sides = [node.left, *(c.comparator for c in node.comparisons)]
                if any(dotted(s) in holders for s in sides):
                    return True
            if isinstance(node, cst.Call) and "torch.cuda.is_available" in facts.qnames(node.func):
                return True
            stack.extend(child_nodes(node))
        return False

    def _names_an_autocast_device(self, func: cst.FunctionDef, name: str) -> bool:
        """The parameter reaches autocast or a grad scaler
        (``torch.get_autocast_dtype(device)``, ``torch.amp.GradScaler(device)``),
        which only warn without CUDA, and places nothing (no ``.to(device)``,
        no ``device=device``)."""
        amp = placing = False
        facts = analysis.of(self)
        for node in facts.index_order():
            if not (isinstance(node, cst.Name) and node.value == name and isinstance(facts.parent(node), cst.Arg)):
                continue
            arg = facts.parent(node)
            call = facts.parent(arg)
            if not isinstance(call, cst.Call) or facts.enclosing(call, cst.FunctionDef) is not func:
                continue
            names = self.qualified_names(call.func)
            if self._super_init(call, func):
                # `class ShardedGradScaler(GradScaler): super().__init__(device)`
                names = {n for base in facts.enclosing(func, cst.ClassDef).bases for n in self.qualified_names(base.value)}
            if any("autocast" in n or n.startswith(("torch.amp.", "torch.cuda.amp.")) for n in names):
                amp = True
            elif (arg.keyword is not None and arg.keyword.value == "device") or analysis.last_name(call.func) == "to":
                placing = True
        return amp and not placing

    def _super_init(self, call: cst.Call, func: cst.FunctionDef) -> bool:
        """``super().__init__(...)`` in the ``__init__`` of a class."""
        if func.name.value != "__init__" or analysis.of(self).enclosing(func, cst.ClassDef) is None:
            return False
        target = call.func
        return (
            isinstance(target, cst.Attribute)
            and target.attr.value == "__init__"
            and isinstance(target.value, cst.Call)
            and isinstance(target.value.func, cst.Name)
            and target.value.func.value == "super"
        )

    def _choice(self, node: cst.SimpleString, at: cst.CSTNode, torch: str | None = None, silent_at: cst.CSTNode | None = None) -> None:
        """A device is chosen here: give the choice its fallback in place."""
        if self._silent(silent_at or node):
            return
        torch = torch or torch_at(analysis.of(self), at)
        if torch is None:
            self.report(node, 'Hard-coded "cuda": add a CPU fallback (`torch` is not imported where this runs)')
            return
        facts = analysis.of(self)
        if placement.imported_module(facts) and placement.runs_at_import(facts, node):
            # the fallback would ask torch.cuda.is_available() when the module
            # is imported, which "poisons fork" (issue 25): the choice is the user's
            self.report(node, 'Hard-coded "cuda": add a CPU fallback where the device is used (a fallback here would query CUDA whenever the module is imported)')
            return
        fixed = fallback_text(node, self.code_of(node), torch)
        self.report(node, fix=[Edit(*self.span(node), fixed)], fix_message=f"Use `{fixed}`")

    def _use(self, call: cst.Call, arg: cst.Arg, literal_node: cst.SimpleString, literal: str, device_call: cst.Call | None = None) -> None:
        """``.to("cuda")`` / ``torch.zeros(n, device="cuda")``: the device the
        code has in reach, or one defined once (as ``cuda-call`` does). An
        index (``"cuda:1"``) or a callee outside torch keeps the literal, with
        a fallback in place."""
        is_move = isinstance(call.func, cst.Attribute) and call.func.attr.value == "to" and arg.keyword is None
        if self._silent(call):
            met = availability.meets_a_caller(self, call, call.func.value) if is_move and device_call is None else None
            if met is not None:
                self.report(arg.value, availability.message(*met))
            return
        torch_callee = is_move or any(n.startswith("torch.") for n in self.qualified_names(call.func))
        if not torch_callee and device_call is None:
            return  # a string handed to code this file does not show (`skipIf(device="cuda")`): its meaning is the callee's
        if literal != "cuda" or not torch_callee:
            self._choice(literal_node, call, torch_prefix(self, device_call.func) if device_call is not None else None)
            return
        chosen = cuda_device(self, call, call.func.value if is_move else None)
        if chosen is None:
            self.report(arg.value, 'Hard-coded "cuda": no place to define a device that is sure to run before this line')
            return
        device, edits = chosen
        text = device
        if is_move and analysis.keyword(call, "copy") is None and analysis.what_of(self, call.func.value) not in (What.MODULE, What.BATCH) and analysis.written_in_place(self, call):
            # .to("cuda") copies a CPU tensor; .to(device) on the CPU would not (a batch
            # object's .to, a BatchEncoding's, takes no copy=)
            text = f"{device}, copy=True"
        edits.append(self.replace(arg.value, text))
        self.report(arg.value, fix=edits, fix_message=f"Use `{device}`")

    # -- calls that need CUDA ---------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        name = analysis.last_name(node.func)
        if name == "pin_memory" and isinstance(node.func, cst.Attribute) and not node.args:
            self._pin_memory(node)
            return
        if name not in GUARDABLE_CALLS and name not in QUERIES:
            return
        qualified = {q for q in self.qualified_names(node.func) if q.startswith("torch.cuda.")}
        if not qualified:
            return
        if any(not isinstance(a.value, (cst.Integer, cst.SimpleString)) for a in node.args):
            return  # a GPU picked by a variable (`set_device(local_rank)`): multi-GPU code
        if self._silent(node):
            return
        if name in QUERIES:
            func = analysis.of(self).enclosing(node, cst.FunctionDef)
            if func is None or func.name.value == "main":
                # a script asking about its GPU; a library function asking
                # is called where the caller knows there is one
                self.report(node, f"`torch.cuda.{name}()` raises without CUDA; check `torch.cuda.is_available()` first")
            return
        statement = self.parent(node)
        line = self.parent(statement)
        if not (isinstance(statement, cst.Expr) and isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1):
            self.report(node, f"`torch.cuda.{name}()` raises without CUDA; guard it with `torch.cuda.is_available()`")
            return
        if not isinstance(self.parent(line), (cst.IndentedBlock, cst.Module)):
            self.report(node, f"`torch.cuda.{name}()` raises without CUDA; guard it with `torch.cuda.is_available()`")
            return
        prefix = self._cuda_module_text(node.func)
        if prefix is None:
            torch = torch_at(analysis.of(self), node)
            prefix = f"{torch}.cuda" if torch else None
        if prefix is None:
            self.report(node, f"`torch.cuda.{name}()` raises without CUDA; guard it with `torch.cuda.is_available()`")
            return
        text = self.context.text
        start = self.span(statement)[0]
        line_begin = line_start(text, start)
        indent = text[line_begin:start]
        newline = self.context.module.default_newline
        step = self.context.module.default_indent
        guard = f"if {prefix}.is_available():{newline}{indent}{step}"
        self.report(node, fix=[self.insert(start, guard)], fix_message=f"Guard it with `if {prefix}.is_available():`")

    def _pin_memory(self, node: cst.Call) -> None:
        """``x.pin_memory()`` on a tensor raises without an accelerator:
        ``x.pin_memory() if torch.cuda.is_available() else x``, where ``x``
        reads the same twice (a name or a chain of attributes). Silent in a
        ``pin_memory`` method or helper (a batch's own, which the loader calls
        only where it can pin) and where CUDA is known to be in use."""
        facts = analysis.of(self)
        receiver = node.func.value
        if analysis.what_of(self, receiver) is not What.TENSOR or self._silent(node):
            return
        child, current = node, facts.parent(node)
        while current is not None:
            if isinstance(current, cst.FunctionDef) and "pin" in current.name.value.lower():
                return
            if isinstance(current, (cst.If, cst.IfExp, cst.While)) and child is not current.test and "pin" in self.code_of(current.test).lower():
                return  # `if pin_memory:`, a flag the caller sets where it can pin
            child, current = current, facts.parent(current)
        message = "`.pin_memory()` raises without a GPU (no pinned memory allocator on the CPU)"
        torch = torch_at(facts, node)
        if torch is None or dotted(receiver) is None:
            self.report(node, f"{message}; pin only where `torch.cuda.is_available()`")
            return
        text = f"{self.code_of(node)} if {torch}.cuda.is_available() else {self.code_of(receiver)}"
        holder = self.parent(node)
        bare = (isinstance(holder, (cst.Assign, cst.AnnAssign, cst.Return)) and holder.value is node) or (isinstance(holder, cst.Arg) and holder.value is node)
        if not bare:
            text = f"({text})"
        self.report(node, message, fix=[self.replace(node, text)], fix_message=f"Pin only where `{torch}.cuda.is_available()`")

    def _cuda_module_text(self, func: cst.BaseExpression) -> str | None:
        """``torch.cuda`` (as written) for ``torch.cuda.synchronize``."""
        if isinstance(func, cst.Attribute) and "torch.cuda" in self.qualified_names(func.value):
            return self.code_of(func.value)
        return None
