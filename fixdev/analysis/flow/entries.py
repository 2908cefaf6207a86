"""Inputs a plain class's method takes and moves itself: a parameter of a
loss, a metric or a trainer (a class that is no ``nn.Module`` and keeps its
own device, ``self.device = next(model.parameters()).device``) that meets a
tensor or module living on that device, in the method or in a method it
passes the parameter on to (``self.build_targets(p, targets)``).

``targets.to(self.device)`` at the start of the method that takes it from
outside is right wherever both live: on the device it changes nothing, on
the host it fixes the meeting. The interpreter records each such meeting
(``entry``, from ``sinks.meet``), passes it on to the caller when the
parameter is the caller's (``pass_on``, from a summary's use), and
``entry_moves`` keeps those no caller in the file passes on."""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

from fixdev.analysis.flow.lattice import Device, SameAs, Value, What


def entry(run, kind: str, node: ast.AST, host_node: ast.AST, host: Value, device_node: ast.AST, device: Value) -> None:
    """A parameter of a plain class's method (a loss, a metric, a trainer)
    meeting a tensor or module that lives on the class's own device
    (``self.device``, wherever that is): kept as ``Entry``, for a move at the
    method's start (``facts.entry_moves``)."""
    text = own_device(run, device)
    if text is None:
        return
    function = run.scope.node
    params = {p.text for p, _ in host.places if type(p) is SameAs and p.home is function}
    if len(params) != 1 or not all(type(p) is SameAs for p, _ in host.places):
        return
    name = params.pop()
    if name == run.scope.self_name:
        return
    shown = name in run.flow.evidenced_tensors(run.scope)
    run.entries.append(Entry(name, kind, node, host_node, device_node, text, shown, function, function, host_node_arg(run, name)))


def function_entry(run, kind: str, node: ast.AST, host_node: ast.AST, host: Value, device_node: ast.AST, device: Value) -> None:
    """A parameter of a plain function (no method) shown to be a tensor,
    meeting a model or tensor the function itself puts on a device (``model
    = Net().to(device)`` there, or a module-level model moved): ``x.to(device)``
    at the function's start is right wherever ``x`` lives. Only for a
    function nothing else in the file names (a caller in the file is seen
    through the function's summary, and moves or passes what it gives)."""
    function = run.scope.node
    if run.scope.cls is not None or type(function) not in (ast.FunctionDef, ast.AsyncFunctionDef) or run.scope.parent is None or run.scope.parent.kind != "module":
        return
    if device.what not in (What.TENSOR, What.MODULE) or len(device.places) != 1:
        return
    ((placement, _),) = device.places
    if type(placement) is not Device or placement.text is None or not (placement.home is function or placement.home is None or placement.home is run.flow.tree):
        return
    text = run.flow.device_text(run.scope, device, device_node)
    if text != placement.text:
        return
    params = {p.text for p, _ in host.places if type(p) is SameAs and p.home is function}
    if len(params) != 1 or not all(type(p) is SameAs for p, _ in host.places):
        return
    name = params.pop()
    arg = host_node_arg(run, name)
    annotated = arg is not None and run.flow.annotation_what(arg.annotation, run.scope) is What.TENSOR
    if not (annotated or name in run.flow.evidenced_tensors(run.scope, reads=False)) or _named_elsewhere(run.flow, function.name):
        return
    run.entries.append(Entry(name, kind, node, host_node, device_node, text, True, function, function, arg))


def _named_elsewhere(flow, name: str) -> bool:
    key = ("named-elsewhere", name)
    found = flow.cache.get(key)
    if found is None:
        found = flow.cache[key] = len(re.findall(rf"\b{re.escape(name)}\b", flow.text or "")) != 1
    return found


def host_node_arg(run, name: str) -> ast.arg | None:
    args = run.scope.node.args
    return next((a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg == name), None)


def own_device(run, value: Value) -> str | None:
    """``self.device`` when ``value`` (a tensor or module) lives exactly where
    an attribute of ``self`` that holds a device says, in a method of that class."""
    if value.what not in (What.TENSOR, What.MODULE) or len(value.places) != 1:
        return None
    ((placement, _),) = value.places
    if type(placement) not in (Device, SameAs) or placement.text is None or placement.home is not run.scope.cls:
        return None
    prefix = f"{run.scope.self_name}."
    attr = placement.text[len(prefix):] if placement.text.startswith(prefix) else ""
    if not attr.isidentifier():
        return None
    held = run.flow.classes.attributes(run.scope.cls).get(attr)
    return placement.text if held is not None and held.what is What.DEVICE else None


@dataclass(frozen=True)
class Entry:
    """A method's parameter meeting the class's own device (see ``entry``).
    ``name``: the parameter, of ``function`` (the method that takes it);
    ``use``: the expression that meets ``other`` at ``node``, in ``origin``
    (the method where the meeting is: ``function`` itself, or a method it
    passes the parameter on to); ``device``: the text naming the device
    (``self.device``); ``shown``: the code of ``origin`` shows the
    parameter there is a tensor."""

    name: str
    kind: str
    node: ast.AST
    use: ast.AST
    other: ast.AST
    device: str
    shown: bool
    function: ast.AST
    origin: ast.AST
    origin_arg: ast.arg | None  # the parameter as ``origin`` takes it



def pass_on(flow, run, scope, call: ast.Call, summary, mapping: dict) -> None:
    """``self.helper(targets)`` in a method of the class (or a subclass):
    the caller's parameter meets the class's device inside the helper, or
    the caller gives what is on that device already; either way the helper
    need not move it."""
    cls = run.scope.cls
    if cls is None or not (cls is scope.cls or scope.cls in flow.classes.ancestors(cls)) or not _on_self(call, run.scope):
        return
    mine, theirs = f"{run.scope.self_name}.", f"{scope.self_name}."
    for met in summary.entries:
        given = mapping.get(met.name)
        if given is None or not met.device.startswith(theirs):
            continue
        device = mine + met.device[len(theirs):]
        params = {p.text for p, _ in given.places if type(p) is SameAs and p.home is run.scope.node}
        if len(params) == 1 and all(type(p) is SameAs for p, _ in given.places):
            run.entries.append(dataclasses.replace(met, name=params.pop(), device=device, function=run.scope.node))
            run.passed_on.add((scope.node, met.name))
        elif given.places and all(type(p) in (Device, SameAs) and p.text == device for p, _ in given.places):
            run.passed_on.add((scope.node, met.name))  # moved there already (targets.to(self.device))


def _on_self(call: ast.Call, scope) -> bool:
    func = call.func
    return type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == scope.self_name


def entry_moves(flow) -> list:
    """The ``Entry`` of each method parameter to move at the method's start:
    met (there or in a helper) on the class's own device, shown to be a
    tensor (there or in that helper), and not passed on to it by a caller in
    the file (that caller's own entry moves it). Each
    function's summary keeps them; every run of the file is made first."""
    flow.sinks()
    passed = set()
    runs = []
    for scope in flow.index.scopes.values():
        if scope.kind != "function":
            continue
        for run in (flow.symbolic(scope), flow.cached_main(scope)):
            if run is not None:
                passed |= run.passed_on
        run = flow.symbolic(scope)
        if run is not None and run.entries:
            runs.append((scope, run))
    found = []
    for scope, run in runs:
        shown = flow.evidenced_tensors(scope)
        for met in run.entries:
            if (scope.node, met.name) not in passed and met.function is scope.node and (met.shown or met.name in shown):
                found.append(met)
    return found
