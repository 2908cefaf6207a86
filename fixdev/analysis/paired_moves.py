"""Another model's tensors met in place, unmoved, where the class moves them elsewhere.

An exponential moving average, a Polyak update or a weight copy walks two
models' tensors side by side (``for ema_v, model_v in
zip(self.module.state_dict().values(), model.state_dict().values())``) and
updates its own in place (``ema_v.lerp_(model_v, weight=1 - decay)``). Where
the class keeps its copy on a device of its own (``self.module.to(device=
device)``), the other model's tensors must go there first; the class shows it
knows when another loop over the same pairs moves them
(``ema_b.copy_(model_b.to(device=self.device))``). A loop that does not fails
where the devices differ (``lerp_`` does not move its argument), and
``model_v.to(device=self.device)`` is right wherever they live: on the same
device it changes nothing, and with ``self.device`` None it is a no-op.

``paired_moves(flow)`` finds those unmoved arguments: in a class, a loop over
``zip(OWN, OTHER)`` where OWN reads the tensors of one of the instance's
attributes (``self.X.parameters()``, ``.buffers()``, ``.state_dict().values()``
and their ``named_`` forms, directly or through a local name bound to them)
and OTHER the same of a method parameter, whose body calls an in-place
operation of the own tensor with the other unmoved; and, in the same class, a
loop of that shape whose body moves the other tensor with ``.to(...)`` naming
only ``self`` attributes (one such text in the class). ``copy_`` is left
alone: it copies across devices. The rule that reports them is
``unmoved-input``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from fixdev.analysis.flow.syntax import chain_of

# What a module's tensors are read through.
_TENSOR_READERS = frozenset({"parameters", "buffers", "state_dict", "named_parameters", "named_buffers"})
# In-place operations whose tensor arguments must be on the receiver's device.
_IN_PLACE = frozenset({"lerp_", "add_", "sub_", "mul_", "div_", "addcmul_", "addcdiv_", "lerp", "add", "sub", "mul"})


@dataclass(frozen=True)
class PairedMove:
    """``arg`` (a name) goes unmoved into ``call``, an in-place update of the
    class's own tensor; ``device``: the ``.to(...)`` arguments the class's
    other loop moves the same tensors with (``device=self.device``)."""

    call: ast.Call
    arg: ast.Name
    device: str


def paired_moves(flow) -> list[PairedMove]:
    found = flow.cache.get(("paired-moves",))
    if found is None:
        text = flow.text or ""
        hit = "zip(" in text and ".to(" in text and "self." in text
        found = flow.cache[("paired-moves",)] = _find(flow.tree) if hit else []
    return found


def _find(tree: ast.Module) -> list[PairedMove]:
    found = []
    for cls in (n for n in tree.body if type(n) is ast.ClassDef):
        moved, unmoved = set(), []
        for method in (n for n in cls.body if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)):
            positional = [a.arg for a in (*method.args.posonlyargs, *method.args.args)]
            if len(positional) < 2:
                continue
            own_name, others = positional[0], set(positional[1:])
            for loop in (n for n in ast.walk(method) if type(n) is ast.For):
                pair = _pair(method, loop, own_name, others)
                if pair is None:
                    continue
                mine, theirs = pair
                for call in (n for n in ast.walk(loop) if type(n) is ast.Call and type(n.func) is ast.Attribute):
                    if _moves(call, theirs):
                        moved.add(_device_text(call, own_name))
                    elif call.args and chain_of(call.func.value) == mine and call.func.attr in _IN_PLACE:
                        given = call.args[0]
                        if type(given) is ast.Name and given.id == theirs:
                            unmoved.append((call, given))
        if len(moved) == 1 and None not in moved:
            device = moved.pop()
            found += [PairedMove(call, arg, device) for call, arg in unmoved]
    return sorted(found, key=lambda m: (m.arg.lineno, m.arg.col_offset))


def _pair(method: ast.AST, loop: ast.For, own: str, others: set) -> tuple[str, str] | None:
    """``for a, b in zip(OWN, OTHER)``: the names ``a`` (the class's tensor)
    and ``b`` (the other model's)."""
    target, it = loop.target, loop.iter
    if not (type(target) is ast.Tuple and len(target.elts) == 2 and all(type(e) is ast.Name for e in target.elts)):
        return None
    if not (type(it) is ast.Call and type(it.func) is ast.Name and it.func.id == "zip" and len(it.args) == 2 and not it.keywords):
        return None
    first, second = (_tensors_of(method, a) for a in it.args)
    if first is None or second is None or first[1] != second[1]:
        return None  # parameters beside buffers: not the same tensors
    if first[0] == own and second[0] in others:
        return target.elts[0].id, target.elts[1].id
    return None


def _tensors_of(method: ast.AST, node: ast.expr, depth: int = 0) -> tuple[str, str] | None:
    """(the root name, the reader) of ``self.X.parameters()``, ``tuple(...)``
    of it, ``model.state_dict().values()``, or a local name bound once to one."""
    if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id in ("tuple", "list") and len(node.args) == 1:
        return _tensors_of(method, node.args[0], depth)
    values = type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "values" and not node.args
    if values:
        node = node.func.value  # model.state_dict().values()
    if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _TENSOR_READERS and not node.args:
        if (node.func.attr == "state_dict") is not values:
            return None  # a state dict's keys, or .values() of something else
        chain = chain_of(node.func.value)
        return (chain.split(".")[0], node.func.attr) if chain is not None else None
    if type(node) is ast.Name and depth < 2:
        bound = [n for n in ast.walk(method) if type(n) is ast.Assign and any(type(t) is ast.Name and t.id == node.id for t in n.targets)]
        if len(bound) == 1 and len(bound[0].targets) == 1:
            return _tensors_of(method, bound[0].value, depth + 1)
    return None


def _moves(node: ast.expr, name: str) -> bool:
    return (
        type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "to"
        and type(node.func.value) is ast.Name and node.func.value.id == name
    )


def _device_text(move: ast.Call, own: str) -> str | None:
    """The move's arguments as written, when every name they read is ``self``
    (an attribute of the instance, bound in every method)."""
    arguments = [*move.args, *move.keywords]
    if not arguments:
        return None
    names = {n.id for a in arguments for n in ast.walk(a) if type(n) is ast.Name}
    if names != {own} or any(type(n) is ast.Call for a in arguments for n in ast.walk(a)):
        return None
    return ", ".join(ast.unparse(a) for a in arguments)
