"""Where a value meets a device it does not live on: ``Sink``, and how the interpreter records one when operands combine."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from fixdev.analysis.flow import entries, evidence
from fixdev.analysis.flow.lattice import HOST, UNKNOWN, Device, PENDING, SCALAR_VALUE, SameAs, UNKNOWN_PLACES, UNKNOWN_VALUE, Value, What, ZERO_DIM, TENSORISH, apart, capped, kinds_of, position_of, settled_origins


# ---------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sink:
    """Where a value meets a device it does not live on.

    ``kind``: ``"module-input"`` (a host value passed to a module on a device),
    ``"module-on-host"`` (a module never moved fed a device tensor),
    ``"operand"`` (a host value combined with a device tensor by an operator,
    comparison, ``torch.*`` function or tensor method), ``"numpy"`` (a value that
    may live on a device reaches ``.numpy()``, ``np.array`` or another NumPy
    function), ``"numpy-relative"`` (a tensor whose place the code does not
    show reaches one, in a file that meets devices: ``.cpu()`` is right
    wherever it lives), ``"index"`` (a
    host tensor read by an index tensor on a device: ``other`` is that index),
    ``"relative"`` (a host tensor combined with a tensor the code shows is one
    but not where it lives, a parameter or ``self`` attribute, in a file that
    meets devices: ``device`` is that tensor's ``.device``, right wherever it
    lives; kept apart from ``"operand"``, which is sure to fail),
    ``"unplaced"`` (a tensor the code shows is one, bound once from a call or
    an iterator the analysis does not see into, reaching a module or tensor
    on a device: moving it there is right wherever it lives; ``origins`` is
    its binding).
    ``node``: the call, operation or subscript. ``value``: the expression on
    the wrong side (on the host; for ``"numpy"``, the one that may be on a
    device). ``origins``: where that value
    was made or bound (a factory call, a loader loop's target, a ``from_numpy``
    call, a parameter, the model's constructor call): where a fix goes.
    ``other``: the module, operand or input on the device. ``device``: source
    text naming the device to move ``value`` to, valid at ``node``; None when
    nothing in reach names it (and for ``"numpy"``).
    """

    kind: str
    node: ast.AST
    value: ast.expr
    origins: tuple
    other: ast.expr | None
    device: str | None




def combine(run, node: ast.AST, operands: list[tuple[ast.AST, Value]], state: dict) -> Value:
    """An operation on tensors: a finding where they live apart; the result
    lives on the device side (where it would live once the code runs)."""
    tensors = [(n, v) for n, v in operands if v.what in TENSORISH and v.places and type(v.ref) is not str]
    if not tensors or all(v is UNKNOWN_VALUE for _, v in tensors):
        if any(v.what is What.ARRAY for _, v in operands):
            return next(v for _, v in operands if v.what is What.ARRAY)
        if all(v.what is What.SCALAR for _, v in operands):
            return SCALAR_VALUE
        return UNKNOWN_VALUE
    if run.record and len(tensors) > 1:
        for host_node, host in tensors:
            for device_node, device in tensors:
                if device_node is not host_node and meet(run, "operand", node, host_node, host, device_node, device, state):
                    break
    significant = [v for _, v in tensors if not (v.flags & ZERO_DIM and kinds_of(v) == (True, False, False))] or [v for _, v in tensors]
    on_device = [v for v in significant if kinds_of(v) == (False, True, False)]
    places = frozenset()
    for value in on_device or significant:
        places |= value.places
    what = What.TENSOR if any(v.what is What.TENSOR for _, v in tensors) else What.UNKNOWN
    zero_dim = ZERO_DIM if all(v.flags & ZERO_DIM for _, v in tensors) and all(v.what in (What.TENSOR, What.SCALAR) for _, v in operands) else 0
    return Value(what, capped(places), flags=zero_dim)


def meet(run, kind: str, node: ast.AST, host_node: ast.AST, host: Value, device_node: ast.AST, device: Value, state: dict) -> bool:
    """Whether ``host`` meeting ``device`` here is a finding (then it is
    kept). Where ``host`` is one of this function's parameters as callers
    pass it (``SameAs(x)``) and ``device`` is on a device, the meeting is
    kept in the function's summary instead: a call passing a host value
    for that parameter makes it a finding."""
    if apart(host, device):
        sink(run, kind, node, host_node, host, device_node, device, state)
        return True
    if run.record and device.what is What.TENSOR and host.what in TENSORISH:
        relative = evidence.relative_device(run, host, device, state, device_node, node)
        if relative is not None:
            # a tensor whose place is not shown: its own device is right wherever it lives
            key = (node, host_node)
            if key not in run.sinks:
                run.sinks[key] = Sink("relative", node, host_node, settled_origins(host.places, host_node), device_node, relative)
            return True
    if host.places and kinds_of(device) == (False, True, False):
        function = run.scope.node
        params = {p.text for p, _ in host.places if type(p) is SameAs and p.home is function}
        if len(params) == 1 and all(type(p) is SameAs for p, _ in host.places):
            run.meetings.append((params.pop(), kind, node, host_node, device_node, device))
    if run.record and host.what in (What.UNKNOWN, What.TENSOR) and host.places == UNKNOWN_PLACES and kinds_of(device) == (False, True, False) and device.what in (What.TENSOR, What.MODULE):
        # a tensor from a call or an iterator the code does not show, met on a device
        root = evidence.tensor_root(host_node)
        binding = evidence.unplaced_binding(run, root) if root is not None else None
        key = (node, host_node)
        if binding is not None and key not in run.sinks:
            run.sinks[key] = Sink("unplaced", node, host_node, (binding,), device_node, run.flow.device_text(run.scope, device, device_node))
            return True
    if run.record and run.cls_info is not None and not run.cls_info.is_module and host.places:
        entries.entry(run, kind, node, host_node, host, device_node, device)
    elif run.record and run.cls_info is None and host.places and kind == "module-input":
        entries.function_entry(run, kind, node, host_node, host, device_node, device)
    return False


def numpy_read(run, node: ast.AST, value_node: ast.AST, value: Value, state: dict, kinds=TENSORISH) -> None:
    """``value`` is read as a NumPy array here (``t.numpy()``, ``np.isnan(t)``):
    a ``"numpy"`` sink where it may live on a device (and is one of
    ``kinds``); a ``"numpy-relative"`` one where it is a tensor the code does
    not show lives on the host (a parameter, a tensor made from values not
    known) and the file meets devices."""
    if value.what in kinds and kinds_of(value)[1]:
        sink(run, "numpy", node, value_node, value, None, None, state)
    elif value.what is What.TENSOR and value.places and all(type(p) is SameAs or p is UNKNOWN for p, _ in value.places):
        # on the host on no path (a host tensor mixed with options, `F.interpolate(x, mode=m)`, is one)
        # a parameter or attribute read so must be shown a tensor by more than this read
        if _kind_tested(run, value_node):
            return  # `x.clone() if isinstance(x, Tensor) else np.copy(x)`: an array here, whatever the callers pass
        if all(_shown_a_tensor(run, p) for p, _ in value.places if type(p) is SameAs) and run.flow.meets_devices():
            key = (node, value_node)
            if key not in run.sinks:
                run.sinks[key] = Sink("numpy-relative", node, value_node, (), None, None)


def _kind_tested(run, value_node: ast.AST) -> bool:
    """The name ``value_node`` reads (``x``, ``x[..., :2]``, ``x.float()``) is one
    whose kind its function tests (``isinstance(x, torch.Tensor)``): the code
    takes it for a tensor on one path and an array or a list on another, so
    what it is at this read is not shown, even where every caller in the run
    passes a tensor (other files may pass arrays); unless the read is in the
    arm of such a test where it is a tensor (``evidence.in_tensor_arm``)."""
    root = evidence.tensor_root(value_node)
    if root is None or run.scope.kind != "function" or root.id not in run.flow.kind_tested(run.scope):
        return False
    return not evidence.in_tensor_arm(run.flow, value_node, root.id, run.scope.node)


def _shown_a_tensor(run, placement: SameAs) -> bool:
    """What the value is does not rest on the read alone: the parameter or
    ``self`` attribute ``placement`` names is not one whose only sign of being
    a tensor is a read as an array (``def f(t): return t.numpy()``); it is
    annotated ``Tensor``, used as only a tensor is, or a module or a value
    whose tensor the code made (``model(x)``, ``torch.exp(t)``)."""
    home, text = placement.home, placement.text
    flow = run.flow
    scope = flow.index.scopes.get(home) if home is not None else None
    if scope is None:
        return False
    if scope.kind == "function":
        if text not in flow.evidenced_tensors(scope) or text in flow.evidenced_tensors(scope, reads=False):
            return True
        args = home.args
        return any(a.arg == text and flow.annotation_what(a.annotation, scope) is What.TENSOR for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
    if scope.kind == "class" and text.startswith("self."):
        return text[5:] not in flow.evidenced_attributes(home) or text[5:] in flow.evidenced_attributes(home, reads=False)
    return False


def index_relative(run, table: Value, node: ast.Subscript, index_node: ast.AST, index: Value) -> bool:
    """``table[index]`` (``index`` a tensor, not 0-dim) is an
    ``"index-relative"`` sink: ``table`` lives on the host and ``index`` is a
    tensor that may live elsewhere (a parameter's, one made from values not
    known), in a file that meets devices; or ``table`` is ``self.X`` of a
    module, on the host on some path (a known origin) and where the module
    lives on the others (a parameter or buffer under a flag that is not the
    device), and ``index`` is on the host on no path (on a device, or where a
    method's input is, which a module's methods take for its own device)."""
    if table.what is not What.TENSOR or table.flags & ZERO_DIM:
        return False
    t_host, t_device, t_other = kinds_of(table)
    i_host, i_device, i_other = kinds_of(index)
    if not t_host or not any(o is not None and o is not PENDING for p, o in table.places if p is HOST):
        return False
    if not t_device and not t_other:  # on the host on every path
        if not i_other or i_device or not run.flow.meets_devices():
            return False
        if _own_attribute(run, node.value):
            return False  # a module's plain tensor: constant-buffer makes it a buffer, which moves with the module
    elif i_host or not (i_device or i_other) or not _where_its_module_lives(run, table, node.value):
        return False  # an index on the host on some path indexes either table
    key = (node, node.value)
    if key not in run.sinks:
        run.sinks[key] = Sink("index-relative", node, node.value, settled_origins(table.places, node.value), index_node, None)
    return True


def may_index_by_tensor(node: ast.Subscript) -> bool:
    """Whether ``node``'s index may be a tensor that is not 0-dim, which only
    ``index_meets`` asks: not a constant, a slice, a negated number (``x[-1]``)
    or a tuple of those (``x[:, 0]``, ``x[..., None]``)."""
    return not _plain_index(node.slice)


def _plain_index(index: ast.AST) -> bool:
    kind = type(index)
    if kind is ast.Constant or kind is ast.Slice:
        return True
    if kind is ast.UnaryOp:
        return type(index.operand) is ast.Constant
    return kind is ast.Tuple and all(_plain_index(element) for element in index.elts)


def _own_attribute(run, node: ast.AST) -> bool:
    """``node`` is ``self.X`` in a method of an ``nn.Module`` class."""
    info = run.cls_info
    return info is not None and info.is_module and type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == run.scope.self_name


def _where_its_module_lives(run, table: Value, table_node: ast.AST) -> bool:
    """``table_node`` is ``self.X`` in a method of an ``nn.Module`` class and
    every placement of ``table`` but the host is one of the module's own."""
    scope = run.scope
    if not _own_attribute(run, table_node):
        return False
    # the text is the module's own (`self.device`, `self.fc.weight.device`);
    # its home may be a base class that set the attribute
    own = {p.text for p, _ in run.flow.classes.self_places(scope.cls) if type(p) is Device and p.text is not None}
    return bool(own) and all(p is HOST or (type(p) is Device and p.text in own and type(p.home) is ast.ClassDef) for p, _ in table.places)


def sink(run, kind: str, node: ast.AST, value_node: ast.AST, value: Value, other_node: ast.AST | None, other: Value | None, state: dict) -> None:
    if kind == "numpy":
        origins = tuple(sorted({o for p, o in value.places if type(p) is Device and o is not None and o is not PENDING}, key=position_of))
        device = None
    else:
        origins = settled_origins(value.places, value_node)
        device = run.flow.device_text(run.scope, other, other_node)
    key = (node, value_node)
    if key not in run.sinks:
        run.sinks[key] = Sink(kind, node, value_node, origins, other_node, device)
