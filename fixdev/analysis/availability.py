"""Moves that follow "a GPU exists" rather than the value they meet.

``if torch.cuda.is_available(): t = t.cuda()`` (or ``t.to("cuda")``) is how
a script puts its tensors where its model went. In a library it is a guess
about the caller: a caller that keeps its model on the CPU on a GPU machine
hands in CPU tensors, and the moved ``t`` meets them on the GPU.
``meets_a_caller`` finds that shape for the rules that are otherwise silent
under a CUDA test (``cuda-call``, ``hard-coded-cuda``)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst

from fixdev.analysis import file_analysis
from fixdev.analysis.flow import What

if TYPE_CHECKING:
    from fixdev.engine.rule import Rule

# Tests that only say a GPU exists, not that the caller's tensors are on it.
AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.backends.mps.is_available"})
# A value moved again where it meets another is where that one is.
MOVED_AGAIN = frozenset({"to", "type_as", "cpu", "cuda", "new_tensor"})


def message(moved: str, caller: str) -> str:
    return (
        f"`{moved}` goes to the GPU whenever one is available, but it meets `{caller}`, which lives wherever the caller put it:"
        f" move it to that value's device where they meet (`.to({caller}.device)`)"
    )


def meets_a_caller(rule: "Rule", node: cst.Call, receiver_node: cst.BaseExpression) -> tuple[str, str] | None:
    """``T = T.cuda()`` (or ``T.to("cuda")``) right under ``if torch.cuda.is_available():``, in a
    library (its callers choose devices), where ``T`` (a local, or
    ``self.X`` of a plain class, set in ``__init__``) later meets a
    parameter of the function it meets in, in an arithmetic operation, a
    comparison or a torch function's arguments: the (moved name, the
    parameter's expression), else None."""
    facts = file_analysis.of(rule)
    statement = rule.parent(node)
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or statement.value is not node:
        return None
    target = statement.targets[0].target
    receiver = rule.code_of(receiver_node)
    if rule.code_of(target) != receiver:
        return None
    line = facts.parent(statement)
    block = facts.parent(facts.parent(line)) if line is not None else None
    if not (isinstance(block, cst.If) and isinstance(block.test, cst.Call) and rule.qualified_names(block.test.func) & AVAILABILITY):
        return None
    # the guard moves tensors only: one that also moves a model places everything on purpose
    for other in block.body.body:
        moved = other.body[0] if isinstance(other, cst.SimpleStatementLine) and len(other.body) == 1 else None
        if not (isinstance(moved, cst.Assign) and isinstance(moved.value, cst.Call) and isinstance(moved.value.func, cst.Attribute)):
            return None
        if file_analysis.what_of(rule, moved.value.func.value) is not What.TENSOR:
            return None
    flow = file_analysis.flow_of(rule)
    if not flow.library_like():
        return None
    start = rule.span(node)[0]
    function = flow.function_at(start)
    if function is None:
        return None
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        cls = next((c for c in flow.index.classes if function in c.body), None)
        if cls is None or flow.index.classes[cls].is_module or function.name != "__init__":
            return None  # a module's own tensors follow the module: FDV103's
        places = [m for m in cls.body if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef) and m is not function]
        is_moved = lambda n: type(n) is ast.Attribute and n.attr == target.attr.value and type(n.value) is ast.Name and n.value.id == "self"  # noqa: E731
    elif isinstance(target, cst.Name):
        places = [function]
        is_moved = lambda n: type(n) is ast.Name and n.id == receiver  # noqa: E731
    else:
        return None
    for method in places:
        # a parameter the moved value was made from, and took the name of, is no caller's value any more
        found = _meets_a_parameter(flow, method, is_moved, after=start if method is function else -1, moved_name=receiver)
        if found is not None:
            return receiver, found
    return None


def _meets_a_parameter(flow, function, is_moved, after: int, moved_name: str) -> str | None:
    """The text of a parameter's expression (``x``, ``out["boxes"]``) that
    meets the moved value in ``function`` (after offset ``after``): the two
    sides of an arithmetic operation or comparison, or two arguments of a
    torch function."""
    args = function.args
    own = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {"self", "cls", moved_name}
    if not own:
        return None

    def holds_moved(node):
        """The moved value itself, not moved again (``m.to(x.device)``)."""
        stack = [node]
        while stack:
            current = stack.pop()
            if type(current) is ast.Call and type(current.func) is ast.Attribute and current.func.attr in MOVED_AGAIN:
                stack.extend(current.args)
                continue
            if is_moved(current):
                return True
            stack.extend(ast.iter_child_nodes(current))
        return False

    def shown(node):
        """``x`` for ``x[i, :]`` (a tensor's index lives where it does); a
        dict's entry stays whole (``out["boxes"]``)."""
        while type(node) is ast.Subscript and not (type(node.slice) is ast.Constant and isinstance(node.slice.value, str)):
            node = node.value
        return ast.unparse(node)

    arrays = _array_like_parameters(function, own)
    for node in ast.walk(function):
        kind = type(node)
        given_to_torch = False
        if kind is ast.BinOp and type(node.op) not in (ast.Mod,):
            sides = [node.left, node.right]
        elif kind is ast.Compare:
            sides = [node.left, *node.comparators]
        elif kind is ast.Call and (flow.qualified_name(node.func) or "").startswith(("torch.", "torchvision.")):
            sides, given_to_torch = list(node.args), True
        else:
            continue
        if after >= 0 and flow.span(node)[0] < after:
            continue
        for side in sides:
            for inner in ast.walk(side):
                root = _root_name(inner)
                if not (root in own and type(inner) in (ast.Name, ast.Subscript)):
                    continue
                if not (given_to_torch and inner is side) and root not in arrays:
                    continue  # maybe a number, which meets a tensor anywhere
                if any(holds_moved(other) for other in sides if other is not side):
                    return shown(inner)
    return None


# What only arrays and tensors have (a number meets a device tensor anywhere).
ARRAY_ATTRIBUTES = frozenset("shape ndim dtype size dim reshape view sum mean softmax unsqueeze squeeze permute float numel device to detach cpu argmax max min".split())


def _root_name(node: ast.expr) -> str | None:
    while type(node) in (ast.Subscript, ast.Attribute):
        node = node.value
    return node.id if type(node) is ast.Name else None


def _array_like_parameters(function, own: set[str]) -> set[str]:
    """Parameters ``function`` reads as arrays or tensors: an attribute only
    those have (``x.shape``, ``x.softmax(...)``), or an index with a slice or
    several axes (``x[:, 0]``)."""
    found = set()
    for node in ast.walk(function):
        if type(node) is ast.Attribute and node.attr in ARRAY_ATTRIBUTES and type(node.value) is ast.Name and node.value.id in own:
            found.add(node.value.id)
        elif type(node) is ast.Subscript and type(node.value) is ast.Name and node.value.id in own:
            index = node.slice
            if type(index) is ast.Slice or (type(index) is ast.Tuple and any(type(e) is ast.Slice for e in index.elts)):
                found.add(node.value.id)
    return found
