"""An argument left behind by its sibling's move.

``model.generate(input_ids=ids.to(device), attention_mask=mask)`` where
``ids`` and ``mask`` are read from the same container (``ids =
inputs["input_ids"]``, ``mask = inputs.get("attention_mask")``): the code
shows the container's tensors are not where the callee works (it moves one
of them to ``device``), and the other goes in unmoved. ``mask.to(device)`` is
right wherever they live: where the container is on the device already it
changes nothing. ``sibling_moves(flow)`` finds these arguments on CPython's
tree; ``unmoved-input`` reports and moves them.

What shows the sibling is a tensor the callee wants on its device: the
keyword it is passed as, one of the tensor arguments of transformers' models
(``attention_mask``, ``token_type_ids`` …). A container of a tokenizer's
tensors also holds strings and ids (``inputs["prompt"]``), which have no
``.to``; and a tensor shown to be one may be wanted where it is (the
``lengths`` of a packed sequence must stay on the CPU): neither moves. A sibling that may be ``None`` (bound to ``None`` on
some path, or read with ``.get(key)``) moves only when it is not.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from fixdev.analysis.flow import ast_walk

# Keyword arguments of transformers' models (`forward`, `generate`) that take tensors.
TENSOR_KEYWORDS = frozenset(
    "input_ids attention_mask token_type_ids position_ids pixel_values pixel_mask labels decoder_input_ids "
    "decoder_attention_mask inputs_embeds head_mask encoder_attention_mask".split()
)


@dataclass(frozen=True)
class SiblingMove:
    """``arg`` (a name, read from the container ``container``) goes into
    ``call`` unmoved beside a sibling moved to ``device``; ``maybe_none``:
    it may be ``None`` there."""

    call: ast.Call
    arg: ast.Name
    device: str
    container: str
    maybe_none: bool


def sibling_moves(flow) -> list[SiblingMove]:
    found = flow.cache.get(("sibling-moves",))
    if found is None:
        found = flow.cache[("sibling-moves",)] = _find(flow)
    return found


def _find(flow) -> list[SiblingMove]:
    """From the calls each scope's run evaluated (``sinks()`` made them all)."""
    if ".to(" not in (flow.text or ""):
        return []
    flow.sinks()
    found = []
    for scope in flow.index.scopes.values():
        run = flow.cached_main(scope) if scope.kind != "class" else None
        for call in list(run.values) if run is not None else ():
            if type(call) is not ast.Call or not call.keywords:
                continue
            given = [(None, a) for a in call.args] + [(k.arg, k.value) for k in call.keywords if k.arg is not None]
            moves = [(a.func.value, _device(a)) for _, a in given if _is_move(a)]
            devices = {d for _, d in moves}
            if not moves or len(devices) != 1 or None in devices:
                continue
            found.extend(_siblings(scope.node, call, given, moves, devices.pop()))
    return sorted(found, key=lambda m: (m.arg.lineno, m.arg.col_offset))


def _siblings(scope: ast.AST, call: ast.Call, given: list, moves: list, device: str) -> list[SiblingMove]:
    containers = {_container(scope, m.id) for m, _ in moves if type(m) is ast.Name}
    containers = {c for c in containers if c is not None}
    if len(containers) != 1:
        return []
    ((container, _),) = containers
    found = []
    for keyword, arg in given:
        if type(arg) is not ast.Name or keyword not in TENSOR_KEYWORDS:
            continue  # a tensor the callee may want where it is (`lengths` of a packed sequence stays on the CPU)
        source = _container(scope, arg.id)
        if source is not None and source[0] == container and not _moved_in(scope, arg.id):
            found.append(SiblingMove(call, arg, device, container, source[1]))
    return found


def _is_move(node: ast.AST) -> bool:
    return type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "to" and type(node.func.value) is ast.Name and _device(node) is not None


def _device(move: ast.Call) -> str | None:
    """The device text of ``x.to(d)`` / ``x.to(device=d)``: a name or
    attribute chain that says ``device`` (not a dtype)."""
    arg = move.args[0] if move.args else next((k.value for k in move.keywords if k.arg == "device"), None)
    if arg is None or type(arg) not in (ast.Name, ast.Attribute):
        return None
    text = ast.unparse(arg)
    return text if "device" in text.lower() else None


def _container(scope: ast.AST, name: str) -> tuple[str, bool] | None:
    """``(C, maybe_none)`` when every binding of ``name`` in ``scope`` reads
    it from the one container name ``C`` (``C["k"]``, ``C.get("k")``) or
    sets it to ``None``."""
    sources, maybe_none = set(), False
    for node in ast_walk(scope):
        kind = type(node)
        if kind in (ast.With, ast.AsyncWith):
            bound = [item.optional_vars for item in node.items if item.optional_vars is not None]
        elif kind in (ast.For, ast.AsyncFor, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.comprehension):
            bound = [node.target]
        else:
            bound = []
        if any(type(t) is ast.Name and t.id == name for b in bound for t in ast_walk(b)):
            return None  # bound otherwise than by a plain assignment
        if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef) and node is not scope and any(a.arg == name for a in node.args.args):
            continue
        if type(node) is not ast.Assign:
            continue
        stores = [t for t in node.targets for n in ast_walk(t) if type(n) is ast.Name and n.id == name]
        if not stores:
            continue
        if len(node.targets) != 1 or type(node.targets[0]) is not ast.Name:
            return None
        value = node.value
        if type(value) is ast.Constant and value.value is None:
            maybe_none = True
        elif type(value) is ast.Subscript and type(value.value) is ast.Name and type(value.slice) is ast.Constant and type(value.slice.value) is str:
            sources.add(value.value.id)
        elif (
            type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr == "get" and type(value.func.value) is ast.Name
            and value.args and type(value.args[0]) is ast.Constant and type(value.args[0].value) is str
        ):
            sources.add(value.func.value.id)
            default = value.args[1] if len(value.args) > 1 else None
            maybe_none = maybe_none or default is None or (type(default) is ast.Constant and default.value is None)
        else:
            return None
    args = scope.args if type(scope) in (ast.FunctionDef, ast.AsyncFunctionDef) else None
    if args is not None and any(a.arg == name for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)):
        return None
    return (sources.pop(), maybe_none) if len(sources) == 1 else None


def _moved_in(scope: ast.AST, name: str) -> bool:
    """The code moves ``name`` somewhere in the scope: it handles its place."""
    return any(
        type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr in ("to", "cuda") and type(n.func.value) is ast.Name and n.func.value.id == name
        for n in ast_walk(scope)
    )
