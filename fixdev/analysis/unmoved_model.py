"""A model the code never moves, fed inputs the code moves to a device.

``x = x.to(device); out = model(x)`` where nothing in the file moves
``model`` (no ``.to``/``.cuda`` on anything but tensors, no wrapper that
places models) fails on a GPU: ``Input type (torch.cuda.FloatTensor) and
weight type (torch.FloatTensor) should be the same``. Moving the model where
its inputs are sent is right wherever they go: on the CPU it changes
nothing. ``unmoved_models(flow)`` finds these meetings, on CPython's tree
with the device flow saying what each value is; the rule that reports them
(``unregistered-submodule``) writes the move.

Two shapes, each with its own evidence that nothing else moves the model:

- the model's whole history is in the file (built here, or returned by the
  file's functions, or a parameter whose every caller is in the file): the
  flow gives it no place that a caller chooses (no ``SameAs`` of a
  parameter), and the file moves nothing but tensors;
- a plain class's attribute set from a parameter (``self.model = model``, a
  trainer given its model) while the class sends the inputs to a device it
  chooses itself (a module-level name such as an imported ``DEVICE``, not a
  parameter its caller passes): the move at the store is a no-op where the
  caller moved the model already, and the fix where it did not; or one the
  class builds there (``self.policy = Policy()``) while it sends the inputs
  to its own ``self.device``, set before in ``__init__``.

A third shape is a loss, not a model: a torch.nn loss given a class weight
(``nn.CrossEntropyLoss(weight=w)``, ``nn.BCEWithLogitsLoss(pos_weight=w)``)
registers it as a buffer, so the loss holds a tensor where ``w`` was made.
Where the code makes ``w`` on the host (a factory without ``device=``,
``torch.from_numpy``), never moves the loss, and calls it with tensors on a
device (``criterion(model(x), y)`` with the model and batch moved), the call
fails; ``.to(device)`` on the loss where it is built moves its buffers and
nothing else (``unmoved_losses``). Silent where the weight is made on the
device or moved first, comes from a caller (its place is not shown), or the
loss is moved on some path or handed to a call that may place it.

Silent where a caller chooses the device (``def evaluate(model, loader,
device)``: the caller moves the model with the device it passes), where the
device is the model's own (``next(model.parameters()).device``), inside an
``nn.Module``'s methods (its sub-modules move with it), for parameter-free
layers, and where the model is passed to a call the analysis does not follow
that may place it (a callee or argument that names a device, a wrapper).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

from fixdev.analysis.flow.syntax import chain_of
import libcst as cst

from fixdev.analysis import file_analysis, placement
from fixdev.analysis.flow.vocabulary import WEIGHTED_LOSSES
from fixdev.analysis.flow import HOST, MOVES_INPUTS, PARAM_FREE, UNKNOWN, Device, SameAs, What, ast_walk

# Text that says something else places, shards or copies models in the file.
PLACERS = re.compile(
    r"device_map|DistributedDataParallel|FullyShardedDataParallel|fully_shard|\bDDP\b|DataParallel|accelerat|Accelerator"
    r"|deepspeed|lightning|Fabric|\.prepare\(|ModelEma|AveragedModel|set_default_device|dispatch_model|\.to_empty\("
)
# Calls that place whatever they are given: a model passed to one may come back moved.
_PLACING_WORDS = re.compile(r"(?i)device|cuda|gpu|prepare|parallel|wrap|shard|dispatch|move|place|setup|distribut|compile|ema|fit\b|trainer|engine|launch")
_MOVES = frozenset({"to", "cuda", "xpu", "mps"})
# An argument that hands the maker a device: what it builds lives there.
_GIVEN_A_DEVICE = re.compile(r"(?i)device|cuda|gpu|map_location")


@dataclass(frozen=True)
class UnmovedModel:
    """``call`` feeds ``model`` (its callee, reached as ``chain``) inputs moved
    to ``device`` (their move's text); ``store``: for a class attribute, the
    one ``self.X = value`` of ``__init__`` where the move goes (else None:
    before ``call``'s statement); ``scope``: the function (or module) holding
    ``call``."""

    call: ast.Call
    model: ast.expr
    chain: str
    device: str
    store: ast.Assign | None
    scope: ast.AST
    placers: bool  # the file names a wrapper that places models: report only


def unmoved_models(flow) -> list[UnmovedModel]:
    """Every such meeting in the file, made once."""
    found = flow.cache.get(("unmoved-models",))
    if found is None:
        found = flow.cache[("unmoved-models",)] = _find(flow)
    return found


def _find(flow) -> list[UnmovedModel]:
    """From the calls each scope's run evaluated (``sinks()`` made them all):
    no walk of the tree, which costs more than the question."""
    text = flow.text or ""
    if ".to(" not in text and ".cuda(" not in text:
        return []
    flow.sinks()
    runs = [(scope, run) for scope in flow.index.scopes.values() if scope.kind != "class" for run in [flow.cached_main(scope)] if run is not None]
    moves = [(n, run) for _, run in runs for n in run.values if type(n) is ast.Call and type(n.func) is ast.Attribute and n.func.attr in _MOVES]
    if not moves:
        return []
    # what the file moves is data: no module, no move as a statement of a
    # value not shown to be a tensor (a module moves in place)
    moved = set()
    for c, run in moves:
        receiver = run.values.get(c.func.value)
        what = receiver.what if receiver is not None else What.UNKNOWN
        if what is What.MODULE or (what is not What.TENSOR and chain_of(c.func.value) in run.discarded):
            return []
        if what is not What.TENSOR:
            moved.add(_last(c.func.value))
    found, seen = [], set()
    for scope, run in runs:
        for call in list(run.values):
            if type(call) is not ast.Call:
                continue
            chain = _model_chain(call.func)
            if chain is None or chain in seen or _last(call.func) in moved:
                continue
            model = run.values.get(call.func)
            if model is None or model.what is not What.MODULE:
                continue
            met = _meeting(flow, scope, call, chain)
            if met is not None:
                seen.add(chain)
                found.append(UnmovedModel(call, call.func, chain, met[0], met[1], scope.node, False))
    if found and PLACERS.search(text) is not None:
        found = [dataclasses.replace(m, placers=True) for m in found]
    return sorted(found, key=lambda m: (m.call.lineno, m.call.col_offset))


def unmoved_losses(flow) -> list[UnmovedModel]:
    """Every loss given a host weight, never moved, fed device tensors (see
    the module's doc); ``store`` is the statement that builds it."""
    found = flow.cache.get(("unmoved-losses",))
    if found is None:
        text = flow.text or ""
        weighted = "Loss" in text and (".to(" in text or ".cuda(" in text)
        found = flow.cache[("unmoved-losses",)] = _find_losses(flow) if weighted else []
    return found


def _find_losses(flow) -> list[UnmovedModel]:
    found, seen = [], set()
    parents = flow.ast_parents()
    for sink in flow.sinks():
        if sink.kind != "module-on-host" or type(sink.node) is not ast.Call:
            continue
        call = sink.node
        chain, loss = _model_chain(call.func), flow.value(call.func)
        if chain is None or chain in seen or type(loss.ref) is not tuple or loss.ref[1].rsplit(".", 1)[-1] not in WEIGHTED_LOSSES:
            continue
        makers = {o for p, o in loss.places if p is HOST}
        if len(makers) != 1 or len(loss.places) != 1 or type(next(iter(makers))) is not ast.Call:
            continue  # moved on some path, or built in several places
        maker = makers.pop()
        positional = maker.args[:1] if loss.ref[1].rsplit(".", 1)[-1] != "MultiMarginLoss" else []
        weights = [k.value for k in maker.keywords if k.arg in ("weight", "pos_weight")] + positional
        if not weights or not all(_made_on_host(flow, w) for w in weights):
            continue
        store = parents.get(maker)
        if not (type(store) is ast.Assign and store.value is maker and len(store.targets) == 1 and chain_of(store.targets[0]) == chain):
            continue
        if not _only_called(flow, parents, chain, store):
            continue  # put in a list, handed on, moved somewhere: what else moves it is not shown
        scope = _scope_holding(flow, parents, call)
        device = _move_text(flow, call) or sink.device
        if device is None or scope is None or _passed_to_placer(flow, chain):
            continue
        if scope.self_name and chain.startswith(f"{scope.self_name}."):
            info = flow.index.classes.get(scope.cls)
            if info is None or info.is_module or store is not _store(flow, scope.cls, chain.split(".", 1)[1]):
                continue
            if device.startswith(f"{scope.self_name}.") and not _set_before(flow, scope, device, store):
                continue
        seen.add(chain)
        found.append(UnmovedModel(call, call.func, chain, device, store, scope.node, False))
    return sorted(found, key=lambda m: (m.call.lineno, m.call.col_offset))


def is_weighted_loss(flow, node: ast.expr) -> bool:
    """``node`` holds a torch.nn loss that takes a class weight
    (``nn.CrossEntropyLoss(weight=w)``): a loss, not a model, whose one
    tensor is that weight (a buffer where ``w`` was made)."""
    ref = flow.value(node).ref
    return type(ref) is tuple and type(ref[1]) is str and ref[1].rsplit(".", 1)[-1] in WEIGHTED_LOSSES


def _only_called(flow, parents: dict, chain: str, store: ast.Assign) -> bool:
    """Every use of the loss's name in the file (but its one store) calls it."""
    last = chain.rsplit(".", 1)[-1]
    for node in ast_walk(flow.tree):
        named = (type(node) is ast.Name and node.id == last) or (type(node) is ast.Attribute and node.attr == last)
        if not named or node is store.targets[0]:
            continue
        parent = parents.get(node)
        if not (type(parent) is ast.Call and parent.func is node) or chain_of(node) != chain:
            return False
    return True


def _move_text(flow, call: ast.Call) -> str | None:
    """The one device argument, as written, of the moves that made the call's
    inputs on a device (``y.to(self.device)``: ``self.device``)."""
    texts = set()
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        for p, origin in flow.value(arg).places:
            if type(p) is Device and _is_move(origin) and origin.func.attr == "to":
                given = origin.args[0] if origin.args else next((k.value for k in origin.keywords if k.arg == "device"), None)
                texts.add(ast.unparse(given) if given is not None else None)
    return texts.pop() if len(texts) == 1 else None


def _made_on_host(flow, weight: ast.expr) -> bool:
    """The weight is a tensor the code makes on the host on every path."""
    value = flow.value(weight)
    return value.what is What.TENSOR and bool(value.places) and all(p is HOST for p, _ in value.places)


def _scope_holding(flow, parents: dict, node: ast.AST):
    while node is not None and type(node) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module):
        node = parents.get(node)
    return flow.index.scopes.get(node) if node is not None else None


def move_before(rule, flow, met: UnmovedModel) -> tuple:
    """The fix ``rule`` makes for a model never moved: ``model =
    model.to(device)`` before the statement holding the call, or before the
    outermost loop holding it in its function, where both names are bound
    and the loop does not rebind the model."""
    parents, facts = flow.ast_parents(), file_analysis.of(rule)
    statement, chain = met.call, []
    while statement is not None and statement is not met.scope:
        if isinstance(statement, ast.stmt) and (not chain or isinstance(statement, (ast.For, ast.AsyncFor, ast.While))):
            chain.append(statement)
        statement = parents.get(statement)
    for candidate in reversed(chain):
        if candidate is not chain[0] and any(isinstance(n, ast.Name) and n.id == met.chain and isinstance(n.ctx, ast.Store) for n in ast_walk(candidate)):
            continue
        anchor = facts.statement_at(flow.span(candidate)[0])
        block = facts.parent(anchor) if anchor is not None else None
        if not isinstance(block, (cst.Module, cst.IndentedBlock)) or not placement.expression_bound_at(facts, f"{met.device}, {met.chain}", anchor):
            continue
        line = f"{met.chain} = {met.chain}.to({met.device})"
        return (placement.lines_before(rule, block, facts.index_in(block.body, anchor), [line]),)
    return ()


def _last(node: ast.AST) -> str | None:
    """The last name of a chain (``model`` of ``self.model``)."""
    return node.id if type(node) is ast.Name else node.attr if type(node) is ast.Attribute else None


def _model_chain(func: ast.AST) -> str | None:
    """``model`` or ``self.model``: the callees a move can name."""
    if type(func) is ast.Name:
        return func.id
    if type(func) is ast.Attribute and type(func.value) is ast.Name:
        return f"{func.value.id}.{func.attr}"
    return None


def _meeting(flow, scope, call: ast.Call, chain: str):
    model = flow.value(call.func)
    if model.what is not What.MODULE or model.flags & (PARAM_FREE | MOVES_INPUTS) or not model.places:
        return None
    if any(type(p) is Device for p, _ in model.places):
        return None
    device = _moved_inputs(flow, call)
    if device is None or _mentions(device, chain.rsplit(".", 1)[-1]) or "parameters(" in device:
        return None
    if _passed_to_placer(flow, chain) or _loaded(flow, chain):
        return None
    if chain.startswith(f"{scope.self_name}.") if scope.self_name else False:
        info = flow.index.classes.get(scope.cls)
        if info is None or info.is_module:
            return None  # a module's sub-modules move with it
        store = _store(flow, scope.cls, chain.split(".", 1)[1])
        if store is None:
            return None
        built = all(p is HOST and o is not None and any(n is o for n in ast_walk(store.value)) for p, o in model.places)
        if not (_chosen_here(flow, device, scope) or (built and _set_before(flow, scope, device, store))):
            return None
        return device, store
    if any(type(p) is SameAs for p, _ in model.places):
        return None  # a parameter whose callers are not all seen: they place it
    if not all(p is HOST or p is UNKNOWN for p, _ in model.places):
        return None
    return device, None


def _moved_inputs(flow, call: ast.Call) -> str | None:
    """The one device text the call's tensor inputs were moved to by the
    code (their every place a move's result), if any input is."""
    texts = set()
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if type(arg) is ast.Starred:
            continue
        value = flow.value(arg)
        if value.what not in (What.TENSOR, What.UNKNOWN) or not value.places:
            continue
        if not all(type(p) in (Device, SameAs) and p.text and _is_move(o) for p, o in value.places):
            if any(p is HOST for p, _ in value.places):
                return None  # an input on the host on some path: not the model's only side
            continue
        texts |= {p.text for p, _ in value.places}
    return texts.pop() if len(texts) == 1 else None


def _is_move(origin) -> bool:
    return type(origin) is ast.Call and type(origin.func) is ast.Attribute and origin.func.attr in ("to", "cuda") and bool(origin.args or origin.keywords)


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def _passed_to_placer(flow, chain: str) -> bool:
    """The model is given to a call that may place it: one whose callee or
    other arguments name a device or a wrapper (``accelerator.prepare(model)``,
    ``to_device(model, dev)``), other than the file's own functions."""
    last = chain.rsplit(".", 1)[-1]
    defined = {n.name for n in ast_walk(flow.tree) if type(n) in (ast.FunctionDef, ast.AsyncFunctionDef)}
    for node in ast_walk(flow.tree):
        if type(node) is not ast.Call or _model_chain(node.func) in defined:
            continue  # the file's own functions: the flow follows them
        args = [*node.args, *(k.value for k in node.keywords)]
        if not any(_model_chain(a) is not None and _model_chain(a).rsplit(".", 1)[-1] == last for a in args):
            continue
        text = ast.unparse(node.func) + " " + " ".join(ast.unparse(a) for a in args) + " " + " ".join(k.arg or "" for k in node.keywords)
        if _PLACING_WORDS.search(text):
            return True
    return False


def _loaded(flow, chain: str) -> bool:
    """A name like the model's is bound to a loaded object (``model =
    torch.load(f, map_location=device)``), or made by a call given a device
    (``model = attempt_load(weights, device=device)``): it lives where the
    checkpoint, ``map_location`` or that call says."""
    last = chain.rsplit(".", 1)[-1]
    for node in ast_walk(flow.tree):
        if type(node) is ast.Assign and any(_model_chain(t) is not None and _model_chain(t).rsplit(".", 1)[-1] == last for t in node.targets):
            for c in ast_walk(node.value):
                if type(c) is not ast.Call:
                    continue
                if type(c.func) is ast.Attribute and c.func.attr == "load" or type(c.func) is ast.Name and c.func.id == "load":
                    return True
                given = " ".join([*(ast.unparse(a) for a in c.args), *(f"{k.arg} {ast.unparse(k.value)}" for k in c.keywords)])
                if _GIVEN_A_DEVICE.search(given):
                    return True
    return False


def _store(flow, cls: ast.ClassDef, attr: str) -> ast.Assign | None:
    """The one ``self.attr = value`` of the class, in its ``__init__``."""
    stores = [
        n
        for n in ast_walk(cls)
        if type(n) in (ast.Assign, ast.AugAssign, ast.AnnAssign)
        for t in (n.targets if type(n) is ast.Assign else [n.target])
        if type(t) is ast.Attribute and t.attr == attr and type(t.value) is ast.Name
    ]
    init = flow.index.classes[cls].methods.get("__init__")
    if len(stores) != 1 or type(stores[0]) is not ast.Assign or len(stores[0].targets) != 1 or init is None:
        return None
    return stores[0] if any(n is stores[0] for n in ast_walk(init)) else None


def _set_before(flow, scope, device: str, store: ast.Assign) -> bool:
    """``device`` is ``self.X``, set once in the class, by a statement of
    ``__init__``'s own body that comes before ``store``."""
    prefix = f"{scope.self_name}."
    attr = device[len(prefix):] if device.startswith(prefix) else ""
    if not attr.isidentifier():
        return False
    init = flow.index.classes[scope.cls].methods.get("__init__")
    sets = [
        n for n in ast_walk(scope.cls) if type(n) is ast.Assign
        for t in n.targets if type(t) is ast.Attribute and t.attr == attr and type(t.value) is ast.Name
    ]
    return len(sets) == 1 and init is not None and sets[0] in init.body and store in init.body and init.body.index(sets[0]) < init.body.index(store)


def _chosen_here(flow, device: str, scope) -> bool:
    """The device is one the code chooses, not its caller: every name it
    reads is bound at module level (``DEVICE``, imported or computed there)
    and is no parameter of the method."""
    try:
        names = {n.id for n in ast_walk(ast.parse(device, mode="eval")) if type(n) is ast.Name}
    except SyntaxError:
        return False
    if not names:
        return False
    module = flow.index.scopes.get(flow.tree)
    args = scope.node.args
    params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    return module is not None and all(name in module.locals and name not in params for name in names)
