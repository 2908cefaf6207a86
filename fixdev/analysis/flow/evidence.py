"""What shows a value is a tensor where nothing shows where it lives, and
whether a file's code meets devices at all: the two facts a device-relative
fix (``device=x.device``) needs, since that fix is right wherever ``x`` lives.

Both are read from the syntax, once per function or per file, and only when
the interpreter asks (a function's parameters are made; a host tensor meets a
tensor whose place is not known)."""

from __future__ import annotations

import ast

from fixdev.analysis.flow.lattice import HOST, UNKNOWN, UNKNOWN_PLACES, Device, SameAs, Value, What, ZERO_DIM
from fixdev.engine.ast_reuse import remembered
from fixdev.analysis.flow.syntax import ast_statements, ast_walk, chain_of
from fixdev.analysis.flow.vocabulary import (
    DATA_FACTORIES,
    LIKE_FACTORIES,
    NOT_OPERATION_PREFIXES,
    NOT_OPERATIONS,
    NUMBER_FIRST_OPERATIONS,
    TENSOR_FACTORIES,
    TENSOR_METHODS,
    TENSOR_ONLY_ATTRIBUTES,
    TENSOR_ONLY_METHODS,
    DEVICE_NAME_PATTERN,
    MODULE_EVIDENCE,
    is_torch_module_class,
)

# Methods that read a tensor as something else, which show it is one only
# where the read itself is not the question (FDV108 asks about `.numpy()`).
ARRAY_READS = frozenset({"numpy"})
# Attributes of a tensor that are a view of it, where it lives.
SAME_PLACE_VIEWS = frozenset({"T", "mT", "H", "mH", "data"})
# torch.* that take a sequence of tensors first (`torch.cat(xs)`).
SEQUENCE_FIRST = frozenset("cat concat concatenate stack hstack vstack dstack column_stack row_stack meshgrid broadcast_tensors block_diag cartesian_prod".split())
# torch.* whose first argument need not be a tensor: they make one from data
# or sizes, or take a number there (`torch.pow(2.0, t)`).
_NOT_TENSOR_FIRST = TENSOR_FACTORIES | DATA_FACTORIES | LIKE_FACTORIES | NOT_OPERATIONS | NUMBER_FIRST_OPERATIONS


def tensor_parameters(flow, scope) -> tuple[frozenset, frozenset, frozenset, frozenset]:
    """What a function's code shows are tensors, whatever its callers pass:
    (its parameters, those shown so by more than a read as an array
    (``x.numpy()``), its local names bound once and shown so by more than a
    read, the names whose kind it tests). A parameter is a tensor when the code calls a method only
    tensors have on it (not one NumPy arrays or modules share: ``x.size(0)``,
    ``x.dim()``, ``x.unsqueeze(1)``, ``x.permute(...)``, not
    ``x.view``/``x.reshape``/``x.T``/``x.shape``), reads an attribute only
    tensors have (``x.is_cuda``), or passes it (or a slice of it,
    ``x[:, :-1]``) first to a ``torch`` operation, which rejects anything but a
    tensor there (``torch.cat([x, y])``, ``torch.unsqueeze(x, 1)``,
    ``F.relu(x)``). Only uses before the function first binds the name again
    count: a later one may be of the new value (``x = torch.as_tensor(x)``).
    A local name bound once counts wherever the function's own code uses it so.
    A name the function tests the kind of (``isinstance(x, torch.Tensor)``,
    ``torch.is_tensor(x)``) is shown nothing by its uses: it may be a tensor
    in one branch and a list or a number in another."""
    args = scope.node.args
    events = _events_of(flow, scope)
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {scope.self_name}
    first_use: dict[str, tuple] = {}
    first_strict: dict[str, tuple] = {}
    first_store: dict[str, tuple] = {}
    used_locals: set[str] = set()
    tested: set[str] = set()  # isinstance(x, ...): the code takes x for more than a tensor
    counts = scope.counts
    never = (1 << 30, 0)
    for event in events:
        tag = event[0]
        if tag is _STORE:  # (a binding's position: an assignment's end, else the name's own)
            name = event[1]
            if name in names and event[2] < first_store.get(name, never):
                first_store[name] = event[2]
            continue
        if tag is _TESTED:
            tested.add(event[1])
            continue
        if tag is _TAKES:  # the first arguments of a call, where the callee is a torch operation
            if not _takes_tensors(flow, event[1], scope):
                continue
            uses = event[2]
        else:
            uses = event[1]
        for used, read, at in uses:
            if at is None:
                continue  # not a name
            name = used.id
            if name in names:
                if at < first_use.get(name, never):
                    first_use[name] = at
                if not read and at < first_strict.get(name, never):
                    first_strict[name] = at
            elif not read and counts.get(name) == 1 and name not in scope.declared:
                if flow.index.scope_at(at) is scope:  # not a nested function's name
                    used_locals.add(name)
    params = frozenset(name for name, at in first_use.items() if at < first_store.get(name, never) and name not in tested)
    strict = frozenset(name for name, at in first_strict.items() if at < first_store.get(name, never) and name not in tested)
    return params, strict, frozenset(used_locals - tested), frozenset(tested)


def rebound_tensors(flow, scope) -> dict:
    """Names a function binds for the last time by an assignment at the top
    level of its body (``x = as_batch(x)``, ``x, n = batch``: a parameter or a local, bound
    before perhaps, never after, in no branch or loop): name -> (the
    target's position, the statement's end, whether its uses after that
    statement show a tensor as ``tensor_parameters`` reads them:
    ``x.size(1)``, ``F.conv2d(x, k)``). Anywhere after that statement the
    name holds that one value, wherever the helper put it. A name whose kind
    the function tests, or that it declares global or nonlocal, is left out.
    Read once per function, kept with the file's flow."""
    key = ("rebound tensors", scope.node)
    found = flow.cache.get(key)
    if found is None:
        found = flow.cache[key] = _rebound(flow, scope) if scope.kind == "function" else {}
    return found


def _rebound(flow, scope) -> dict:
    last: dict[str, tuple] = {}
    for statement in scope.node.body:
        kind = type(statement)
        target = statement.targets[0] if kind is ast.Assign and len(statement.targets) == 1 else statement.target if kind is ast.AnnAssign and statement.value is not None else None
        # `x = f(x)`, or names unpacked there (`feats, lengths = batch`)
        for name in (target,) if type(target) is ast.Name else target.elts if type(target) in (ast.Tuple, ast.List) else ():
            if type(name) is ast.Name:
                last[name.id] = ((name.lineno, name.col_offset), (statement.end_lineno, statement.end_col_offset))
    if not last:
        return {}
    latest: dict[str, tuple] = {}
    tested: set[str] = set()
    shown: set[str] = set()
    for event in _events_of(flow, scope):
        tag = event[0]
        if tag is _STORE:
            name = event[1]
            if name in last and event[2] > latest.get(name, (0, 0)):
                latest[name] = event[2]
            continue
        if tag is _TESTED:
            tested.add(event[1])
            continue
        if tag is _TAKES:
            if not _takes_tensors(flow, event[1], scope):
                continue
            uses = event[2]
        else:
            uses = event[1]
        for used, read, at in uses:
            if at is not None and not read and used.id in last and at > last[used.id][1] and flow.index.scope_at(at) is scope:
                shown.add(used.id)
    return {name: (*where, name in shown) for name, where in last.items() if name not in tested and name not in scope.declared and latest.get(name) == where[1]}


# What ``_events_of`` records of a function's code, in the order ``ast_walk`` meets it:
_STORE = "store"  # (_STORE, name, position): a name bound (an assignment's end, else the name's own position)
_TESTED = "tested"  # (_TESTED, name): its kind tested (``_tests_kind``)
_USES = "uses"  # (_USES, uses): what a tensor's own method or attribute is read from
_TAKES = "takes"  # (_TAKES, callee, uses): a call's first arguments, tensors where the callee is a torch operation (``_takes_tensors``)
# each use: (node, read as an array only, (line, column) of a name, None for ``x.attr``)


def _events_of(flow, scope) -> list:
    """What the syntax of a function (nested functions too) shows of
    tensors (``_STORE`` … ``_TAKES``): read once per function for both
    ``tensor_parameters`` and ``tensor_attributes``, which walked its code
    each, kept with the file's flow and, in the language server, across
    versions by the ``def``."""
    key = ("evidence events", scope.node)
    found = flow.cache.get(key)
    if found is None:
        found = flow.cache[key] = remembered("evidence events", scope.node, lambda: _record_events(scope.node))
    return found


def _record_events(function: ast.AST) -> list:
    events: list = []
    assigned: set[int] = set()  # names an assignment binds: after its value is read (x = torch.cat((x, y)))
    for node in ast_walk(function):
        kind = type(node)
        if kind is ast.Name:
            if type(node.ctx) is not ast.Load and id(node) not in assigned:
                events.append((_STORE, node.id, (node.lineno, node.col_offset)))
        elif kind is ast.Call:
            args = node.args
            if args and type(args[0]) is ast.Name and _tests_kind(node.func):
                events.append((_TESTED, args[0].id))
            own, taken = _uses_in(node)
            uses = _named_uses(own)
            if uses:
                events.append((_USES, uses))
            uses = _named_uses(taken)
            if uses:
                events.append((_TAKES, node.func, uses))
        elif kind is ast.Attribute:
            if node.attr in TENSOR_ONLY_ATTRIBUTES:
                uses = _named_uses(((node.value, False),))
                if uses:
                    events.append((_USES, uses))
        elif kind is ast.Assign or kind is ast.AugAssign or kind is ast.AnnAssign:
            end = (node.end_lineno, node.end_col_offset)
            for target in node.targets if kind is ast.Assign else (node.target,):
                for sub in ast_walk(target):
                    if type(sub) is ast.Name and type(sub.ctx) is ast.Store:
                        assigned.add(id(sub))
                        events.append((_STORE, sub.id, end))
    return events


def _named_uses(uses) -> tuple:
    """``(node, read, position)`` of the uses that are a name (``x``) or
    an attribute of one (``self.x``), the only ones the evidence reads."""
    found = []
    for used, read in uses:
        kind = type(used)
        if kind is ast.Name:
            found.append((used, read, (used.lineno, used.col_offset)))
        elif kind is ast.Attribute and type(used.value) is ast.Name:
            found.append((used, read, None))
    return tuple(found)


def _tests_kind(func: ast.AST) -> bool:
    """``isinstance``, ``type``, ``hasattr``, ``torch.is_tensor``: a test of what a value is."""
    name = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else None
    return name in ("isinstance", "type", "hasattr", "is_tensor")


def in_tensor_arm(flow, node: ast.AST, name: str, function: ast.AST, kinds: frozenset = frozenset({"Tensor"})) -> bool:
    """``node`` runs, inside ``function``, only where a test of ``name``'s kind
    says it is a tensor: the body of ``if isinstance(name, torch.Tensor):``
    (also ``torch.is_tensor(name)``, a tuple of types naming ``Tensor``, one
    side of an ``and``, the conditional expression's arm), or the ``else`` of
    such a test negated. ``kinds``: the type names that count (``list`` and
    ``tuple``: the arm where ``name`` holds a sequence)."""
    parents = flow.ast_parents()
    child, block = node, parents.get(node)
    while block is not None and block is not function:
        kind = type(block)
        if kind is ast.If or kind is ast.IfExp:
            inside = child in block.body if kind is ast.If else child is block.body
            other = child in block.orelse if kind is ast.If else child is block.orelse
            if (inside or other) and _says_tensor(block.test, name, inside, kinds):
                return True
        child, block = block, parents.get(block)
    return False


def _says_tensor(test: ast.expr, name: str, truth: bool, kinds: frozenset = frozenset({"Tensor"})) -> bool:
    """``test`` evaluating to ``truth`` shows ``name`` holds a tensor."""
    while type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        test, truth = test.operand, not truth
    if type(test) is ast.BoolOp:
        # every side of a true `and` holds; a false `or` makes every side false
        if (type(test.op) is ast.And) is truth:
            return any(_says_tensor(value, name, truth, kinds) for value in test.values)
        return False
    if not truth or type(test) is not ast.Call or not test.args or type(test.args[0]) is not ast.Name or test.args[0].id != name:
        return False
    func = test.func
    called = func.id if type(func) is ast.Name else func.attr if type(func) is ast.Attribute else None
    if called == "is_tensor":
        return "Tensor" in kinds
    if called != "isinstance" or len(test.args) != 2:
        return False
    tested = test.args[1].elts if type(test.args[1]) is ast.Tuple else [test.args[1]]
    # `isinstance(x, (torch.Tensor, np.ndarray))` says nothing: every kind must be one of `kinds`
    return all((k.id if type(k) is ast.Name else k.attr if type(k) is ast.Attribute else None) in kinds for k in tested)


def tensor_attributes(flow, cls: ast.ClassDef) -> tuple[frozenset, frozenset]:
    """The attributes ``self.X`` some method of ``cls`` shows are tensors, as
    ``tensor_parameters`` reads them (``self.A.size(1)``, ``torch.cat([self.buf, x])``):
    (all of them, those shown so by more than a read as an array)."""
    info = flow.index.classes.get(cls)
    found = set()
    strict = set()
    for method in info.methods.values() if info is not None else ():
        scope = flow.index.scopes[method]
        self_name = scope.self_name
        if not self_name:
            continue
        for event in _events_of(flow, scope):
            tag = event[0]
            if tag is _USES:
                uses = event[1]
            elif tag is _TAKES and _takes_tensors(flow, event[1], scope):
                uses = event[2]
            else:
                continue
            for used, read, at in uses:
                if at is None and used.value.id == self_name:
                    found.add(used.attr)
                    if not read:
                        strict.add(used.attr)
    return frozenset(found), frozenset(strict)


def shows_tensor(flow, scope, roots: list, name: str) -> bool:
    """Whether the code under ``roots`` (in ``scope``) uses the local ``name``
    as only a tensor is used (``_tensor_uses``): a loop's batch that is one
    tensor, not a list or dict of them."""
    for root in roots:
        for node in ast_walk(root):
            for used, _read in _tensor_uses(flow, node, scope):
                if type(used) is ast.Name and used.id == name:
                    return True
    return False


def unplaced_binding(run, name: ast.Name) -> ast.Name | None:
    """Where a local ``name`` that may live anywhere is bound, when it is
    bound once in its function (or the module's own statements), as a
    ``for`` target or by an assignment of a call's (or an item's) result,
    and that code shows it is a tensor (``shows_tensor``): the target
    ``Name``, else None. Parameters, and what is made from them, are their
    callers' to place; what ``self``'s own calls give is where the object
    works (``self.encoder(x)``), as far as the analysis can tell; and in an
    ``nn.Module``'s methods every tensor is one of those."""
    scope = run.scope
    if scope.kind not in ("function", "module") or scope.counts.get(name.id) != 1 or (scope.kind == "function" and name.id in _parameter_names(scope.node)):
        return None
    if run.cls_info is not None and run.cls_info.is_module:
        return None  # an nn.Module's methods work on their inputs and their own results
    found = run.flow.cache.get(("unplaced", scope.node, name.id), False)
    if found is False:
        found = None
        constructed = False  # torch.tensor(obs) of data from a call not seen into: a tensor, made by torch
        params = _parameter_names(scope.node) if scope.kind == "function" else set()
        for statement in ast_statements(scope.node.body, enter=lambda s: type(s) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = type(statement)
            if kind in (ast.For, ast.AsyncFor):
                targets, made = [statement.target], statement.iter
            elif kind is ast.Assign and len(statement.targets) == 1 and type(statement.value) in (ast.Call, ast.Subscript, ast.Await):
                targets, made = statement.targets, statement.value
                data = _constructed_from(run, scope, made)
                if data is not None and type(statement.targets[0]) is ast.Name and statement.targets[0].id == name.id:
                    constructed = True
                if scope.self_name and _root_name(made) == scope.self_name:
                    continue  # self.encoder(x): the object's own work, where the object is
                if scope.self_name and type(made) is ast.Call and type(made.func) is ast.Name and _own_child(run, scope, made.func.id):
                    continue  # block(x), block one of self.blocks: the object's own work too
                called = run.values.get(made.func) if type(made) is ast.Call else None
                if called is not None and called.what is What.MODULE and _fed_moved(run, made):
                    continue  # a model fed inputs on a device fails first (one never moved: unregistered-submodule's)
                if type(made) is ast.Call and not _takes_tensors(run.flow, made.func, scope) and not any(type(n) in _COMPREHENSIONS for n in ast_walk(made)):
                    made = made.func  # load_image(path): made anew by the callee, whatever its arguments
            else:
                continue
            if any(type(n) is ast.Name and n.id in params for n in ast_walk(made)):
                continue  # made from a parameter (torch.cat([y for _, y in batches])): where the caller put it
            for target in targets:
                for sub in ast_walk(target):
                    if type(sub) is ast.Name and sub.id == name.id and type(sub.ctx) is ast.Store:
                        found = sub
        own = [s for s in scope.node.body if type(s) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)]
        if found is not None and not constructed and not shows_tensor(run.flow, scope, own, name.id):
            found = None
        run.flow.cache[("unplaced", scope.node, name.id)] = found
    return found


# Calls that hand a loop the items of what they are given, item for item (zip and
# enumerate by position), and a container module's own views of its children.
_ITEMWISE = frozenset({"enumerate", "reversed", "list", "tuple", "zip"})
_CHILD_VIEWS = frozenset({"children", "modules", "values"})


def _own_child(run, scope, name: str) -> bool:
    """The local ``name`` is bound once in ``scope``, to one of ``self``'s
    own modules: a loop over one the flow knows is a module (``for block in
    self.blocks:``, ``enumerate(self.blocks)``, ``zip(self.layers,
    self.norms)``, ``self.heads.values()``), or ``layer = self.layers[i]``.
    What calling it gives is where the object works, as ``self.block(x)``."""
    if scope.counts.get(name) != 1:
        return False
    for statement in ast_statements(scope.node.body, enter=lambda s: type(s) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        kind = type(statement)
        if kind in (ast.For, ast.AsyncFor):
            source = _looped_source(statement.target, statement.iter, name)
        elif kind is ast.Assign and len(statement.targets) == 1 and type(statement.targets[0]) is ast.Name and statement.targets[0].id == name:
            source = statement.value.value if type(statement.value) is ast.Subscript else statement.value
        else:
            continue
        if source is None:
            continue
        if type(source) is ast.Call and type(source.func) is ast.Attribute and source.func.attr in _CHILD_VIEWS and not source.args:
            source = source.func.value
        value = run.values.get(source)
        return type(source) is ast.Attribute and _root_name(source) == scope.self_name and value is not None and value.what is What.MODULE
    return False


def _looped_source(target: ast.AST, iterable: ast.AST, name: str) -> ast.AST | None:
    """What a ``for`` loop's ``name`` is an item of: ``self.blocks`` in ``for
    block in self.blocks`` and ``for i, block in enumerate(self.blocks)``,
    the matching argument of ``zip``; None when not shown."""
    if type(target) is ast.Name:
        if target.id != name:
            return None
        while type(iterable) is ast.Call and type(iterable.func) is ast.Name and iterable.func.id in ("reversed", "list", "tuple") and len(iterable.args) == 1:
            iterable = iterable.args[0]
        return iterable
    if type(target) is not ast.Tuple or type(iterable) is not ast.Call or type(iterable.func) is not ast.Name or iterable.keywords:
        return None
    func = iterable.func.id
    if func == "enumerate" and len(target.elts) == 2 and len(iterable.args) == 1:
        return _looped_source(target.elts[1], iterable.args[0], name)
    if func == "zip" and len(target.elts) == len(iterable.args):
        for element, argument in zip(target.elts, iterable.args):
            if type(element) is ast.Name and element.id == name:
                return argument
    return None


def _fed_moved(run, call: ast.Call) -> bool:
    """Some input of ``call`` lives on a device on every path."""
    for arg in (*call.args, *(k.value for k in call.keywords)):
        value = run.values.get(arg)
        if value is not None and value.places and all(type(p) is Device for p, _ in value.places):
            return True
    return False


# torch's constructors from data: a tensor where the data is (a tensor's own
# device) or on the host (a list, an array, a number).
DATA_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.asarray"})


def _constructed_from(run, scope, value: ast.AST) -> ast.AST | None:
    """The data of ``torch.tensor(obs, ...)`` (or ``torch.as_tensor``, with
    tensor methods after it: ``.float().unsqueeze(0)``) when nothing shows
    ``obs`` is a tensor (an environment's ``step``/``reset``, a reader's
    result: an array or a list) and no device is given: the result is then a
    tensor, on the host or where that data may already be."""
    while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in TENSOR_METHODS:
        value = value.func.value
    if type(value) is not ast.Call or not value.args or any(k.arg == "device" for k in value.keywords) or type(value.args[0]) is ast.Starred:
        return None
    if run.flow.index.static_name(value.func, scope) not in DATA_CONSTRUCTORS:
        return None
    data = value.args[0]
    known = run.values.get(data)
    if known is None or known.what is not What.UNKNOWN or known.places != UNKNOWN_PLACES:
        return None  # a tensor (its own device), a parameter's (the caller's), a value the analysis follows
    return data


def tensor_root(node: ast.AST) -> ast.Name | None:
    """``y`` of ``y``, ``y.unsqueeze(1)``, ``y[:, 0]`` or ``y.float().view(-1)``:
    the name a tensor's own methods and slices are read from."""
    while True:
        kind = type(node)
        if kind is ast.Name:
            return node
        if kind is ast.Subscript:
            node = node.value
        elif kind is ast.Call and type(node.func) is ast.Attribute and node.func.attr in TENSOR_METHODS:
            node = node.func.value
        else:
            return None


_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)


def _root_name(node: ast.AST) -> str | None:
    while type(node) in (ast.Call, ast.Attribute, ast.Subscript, ast.Await):
        node = node.func if type(node) is ast.Call else node.value
    return node.id if type(node) is ast.Name else None


def _parameter_names(function: ast.AST) -> set:
    args = function.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None}


def _tensor_uses(flow, node: ast.AST, scope) -> list:
    """The expressions ``node`` shows are tensors, each with whether it is
    only read as an array there (``x.numpy()``): the receiver of a method or
    attribute only tensors have, the first arguments of a torch operation
    (the elements of a list or tuple written there, for those that take a
    sequence: ``torch.cat(xs)`` shows nothing of ``xs``)."""
    kind = type(node)
    if kind is ast.Attribute:
        return [(node.value, False)] if node.attr in TENSOR_ONLY_ATTRIBUTES else []
    if kind is not ast.Call:
        return []
    own, taken = _uses_in(node)
    return own + taken if taken and _takes_tensors(flow, node.func, scope) else own


def _uses_in(call: ast.Call) -> tuple[list, list]:
    """What a call's syntax shows of tensors, each ``(expression, read as an
    array only)``: the receiver of a method only tensors have, and the first
    arguments it gives (tensors where the callee is a torch operation,
    ``_takes_tensors``, which the caller asks). The one reading of both
    ``_tensor_uses`` and the events ``tensor_parameters`` reads."""
    func = call.func
    kind = type(func)
    if kind is not ast.Attribute and kind is not ast.Name:
        return [], []
    # `torch.exp(x)` gives `torch` here, which is no parameter or attribute
    own = [(func.value, func.attr in ARRAY_READS)] if kind is ast.Attribute and func.attr in TENSOR_ONLY_METHODS else []
    taken = [(e, False) for e in map(_unsliced, _first_arguments(call)) if e is not None] if call.args else []
    return own, taken


def _first_arguments(node: ast.Call) -> list | tuple:
    """The arguments of a call with arguments a torch operation takes for
    tensors: the first, the elements of a list or tuple written there, the
    operands after an equation; none for those that take a sequence."""
    first = node.args[0]
    if type(first) is ast.Constant and type(first.value) is str:
        return node.args[1:]  # torch.einsum("ij,jk->ik", a, b): the operands follow the equation
    if type(first) in (ast.List, ast.Tuple):
        return first.elts
    if type(node.func) is ast.Attribute and node.func.attr in SEQUENCE_FIRST:
        return ()
    return (first,)


def _unsliced(node: ast.AST) -> ast.AST | None:
    """``x`` (a name or ``self.x``) of ``x``, of ``x.float()`` or of ``x[:, :-1]`` (a slice in
    more than one dimension is an array's, and an array torch rejects: a
    tensor's); None for other expressions."""
    while type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in TENSOR_METHODS:
        # torch.cat((x.repeat(n, 1), y)): what x.repeat gives is a tensor, and a
        # NumPy array's (or a module's) would give no tensor either
        node = node.func.value
    if type(node) is ast.Subscript and type(node.slice) is ast.Tuple:
        if any(type(e) is ast.Slice or (type(e) is ast.Constant and e.value is Ellipsis) for e in node.slice.elts):
            node = node.value
    if type(node) is ast.Name or (type(node) is ast.Attribute and type(node.value) is ast.Name):
        return node
    return None


def _takes_tensors(flow, func: ast.AST, scope) -> bool:
    name = flow.index.static_name(func, scope)
    if name is None or not name.startswith("torch.") or name in _NOT_TENSOR_FIRST or name.startswith(NOT_OPERATION_PREFIXES):
        return False
    if name.startswith("torch.nn.") and not name.startswith("torch.nn.functional."):
        return False  # a layer's constructor, not an operation
    return not is_torch_module_class(name) and "._" not in name


def torch_results(flow, scope) -> frozenset:
    """Local names of a function bound once, by an assignment of a ``torch``
    operation's result (``cov = torch.einsum(...)``): tensors, made by torch."""
    found = set()
    for statement in ast_statements(scope.node.body, enter=lambda s: type(s) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        if type(statement) is ast.Assign and len(statement.targets) == 1 and type(statement.targets[0]) is ast.Name:
            name, value = statement.targets[0].id, statement.value
            if scope.counts.get(name) == 1 and type(value) is ast.Call and _takes_tensors(flow, value.func, scope):
                found.add(name)
    return frozenset(found)


def relative_device(run, host: Value, other: Value, state: dict, other_node: ast.AST | None = None, node: ast.AST | None = None) -> str | None:
    """For a host tensor (a factory's, say) meeting ``other``, a tensor whose
    place the code does not show: the text of ``other``'s device, valid where
    ``other`` is met (``_placed_relative``); else, whatever ``other``'s places,
    the device of the name it is read from (``_read_relative``). Else None."""
    found = _placed_relative(run, host, other, state, other_node, node)
    if found is None and host.what is What.TENSOR and not host.flags & ZERO_DIM and other.what is What.TENSOR:
        found = _read_relative(run, host, other, other_node, node)
    return found


def _read_relative(run, host: Value, other: Value, other_node: ast.AST | None, node: ast.AST | None) -> str | None:
    """A host tensor meets ``other``, a tensor on some path not on the host,
    read from a name that holds one value there: the host tensor is made
    inside the expression that reads the name (``torch.cat([torch.zeros(1),
    lut[:-1]])``), or after the name's last binding, at the top of the body,
    whose value the code after it shows is a tensor (``x = as_batch(x)``,
    then ``x.size(1)``; ``rebound_tensors``). The name's ``.device``, in a
    file that meets devices."""
    placements = {p for p, _ in other.places}
    if not any(p is HOST for p, _ in host.places) or any(p is UNKNOWN or type(p) is Device for p, _ in host.places):
        return None
    if not placements or all(p is HOST for p in placements) or other_node is None:
        return None
    # `x[torch.isin(x[:, -1], torch.tensor(ids))]`, `torch.cat([torch.zeros(1), lut[:-1]])`:
    # the host tensor is made inside the expression that meets `x`, so `x`
    # still holds that tensor there, wherever it lives
    name = _indexed_name(other_node)
    if name is not None and any(_shown_placed(run, p) for p in placements) and _made_within(host, node) and not _assigned_within(name, node) and run.flow.meets_devices():
        return f"{name}.device"
    # `x = as_batch(x)` at the top of the body, `x.size(1)` after it: a host
    # tensor made after that statement meets the one value `x` holds there
    while type(other_node) is ast.Attribute and other_node.attr in SAME_PLACE_VIEWS:
        other_node = other_node.value  # `x.mT` lives where `x` does
    root = tensor_root(other_node)
    where = rebound_tensors(run.flow, run.scope).get(root.id) if root is not None else None
    if where is not None and _made_after(host, where[1]) and run.flow.meets_devices():
        return f"{root.id}.device"
    return None


def _shown_placed(run, placement) -> bool:
    """``placement`` may be a device's that the code shows a tensor has: not
    known (a tensor from a call not seen into), a device's, or wherever a
    parameter or ``self`` attribute the code shows is a tensor lives (not a
    number's the caller passes, ``(total + step) // step``)."""
    if placement is UNKNOWN or type(placement) is Device:
        return True
    if type(placement) is not SameAs:
        return False
    scope = run.scope
    if placement.home is scope.node:
        return placement.text in run.flow.evidenced_tensors(scope)
    if placement.home is not None and placement.home is scope.cls and scope.self_name == "self" and placement.text.startswith("self."):
        return placement.text[5:] in run.flow.evidenced_attributes(scope.cls)
    return False


def _placed_relative(run, host: Value, other: Value, state: dict, other_node: ast.AST | None = None, node: ast.AST | None = None) -> str | None:
    """For a host tensor (a factory's, say) meeting ``other``, a tensor whose
    place the code does not show: the text of ``other``'s device, valid where
    ``other`` is met (``x.device``), when ``other`` is wherever one
    parameter or ``self`` attribute is and that name still holds it here, or
    is a local name bound once to a torch operation's result; and the file
    meets devices. Else None."""
    if host.what is not What.TENSOR or host.flags & ZERO_DIM or other.what is not What.TENSOR:
        return None
    placements = {p for p, _ in other.places}
    host_only = any(p is HOST for p, _ in host.places) and not any(p is UNKNOWN or type(p) is Device for p, _ in host.places)
    if len(placements) != 1:
        return None
    placement = placements.pop()
    if placement is UNKNOWN and host_only:
        # `cov = torch.einsum(...)`, then `cov + torch.eye(n)`: right after cov is made (FDV102 checks)
        if type(other_node) is ast.Name and other_node.id in run.flow.torch_results(run.scope) and run.flow.meets_devices():
            return f"{other_node.id}.device"
        return None
    if type(placement) is not SameAs:
        return None
    # the host side: made on the host, perhaps mixed with values the code does
    # not show (``2 * np.pi * sigma ** torch.arange(m)``), never with one on a
    # device or with the tensor it meets (then its own device is no news)
    if not any(p is HOST for p, _ in host.places) or any(type(p) is Device or p == placement for p, _ in host.places):
        return None
    text = placement.text
    scope = run.scope
    if placement.home is scope.node:
        if text not in run.flow.evidenced_tensors(scope):
            return None
    elif placement.home is not None and placement.home is scope.cls and scope.self_name == "self" and text.startswith("self."):
        if text[5:] not in run.flow.evidenced_attributes(scope.cls):
            return None
    else:
        return None  # named from another scope: not a name here
    held = state.get(text)
    if held is None and "." not in text:
        return None
    if held is not None and {p for p, _ in held.places} != {placement}:
        return None  # bound again since: the name no longer holds what was met
    if not run.flow.meets_devices():
        return None
    return f"{text}.device"


def meets_devices(flow) -> bool:
    """Whether the file's code may run with tensors on a device: it names or
    moves to one (``.to(``, ``.cuda(``, ``device``), or it is a library whose
    callers choose devices: a module of a package, a file the run's other
    files import, or one whose top level only defines things (a script runs
    statements). A script that does neither runs on the CPU only, where a
    device-relative fix would be noise."""
    if any(flow.mentions_device(statement) for statement in flow.tree.body):  # (by statement: kept across versions)
        return True
    return library_like(flow)


def library_like(flow) -> bool:
    """Whether the file is a library whose callers choose devices: a module
    of a package, a file the run's other files import, or one whose top
    level only defines things (a script runs statements)."""
    project = flow.project
    if project is not None and getattr(project, "is_library", None) is not None and project.is_library():
        return True
    return not any(_runs_something(statement) for statement in flow.tree.body)


def _runs_something(statement: ast.stmt) -> bool:
    """A top-level statement a script runs: a call, a loop, a ``with``, a
    ``__main__`` block (definitions, imports, constants and docstrings are what
    a module imported for its names holds)."""
    kind = type(statement)
    if kind in (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith):
        return True
    if kind is ast.Expr:
        return type(statement.value) is ast.Call
    if kind is ast.If:
        test = statement.test
        if type(test) is ast.Compare and type(test.left) is ast.Name and test.left.id == "__name__":
            return True
        return any(_runs_something(s) for s in (*statement.body, *statement.orelse))
    if kind is ast.Try:
        return any(_runs_something(s) for s in statement.body)
    return False


def _indexed_name(node: ast.AST | None) -> str | None:
    """``x`` of ``x`` or ``x[...]`` (an index of a tensor lives where it does)."""
    while type(node) is ast.Subscript:
        node = node.value
    return node.id if type(node) is ast.Name else None


def _made_within(host: Value, node: ast.AST | None) -> bool:
    """Every place ``host`` is made is inside ``node``'s span."""
    if node is None or not hasattr(node, "end_lineno"):
        return False
    start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
    origins = [o for p, o in host.places if p is HOST]
    return bool(origins) and all(
        hasattr(o, "end_lineno") and start <= (o.lineno, o.col_offset) and (o.end_lineno, o.end_col_offset) <= end for o in origins
    )


def _made_after(host: Value, position: tuple) -> bool:
    """Every place ``host`` is made lies after ``position``."""
    origins = [o for p, o in host.places if p is HOST]
    return bool(origins) and all(hasattr(o, "lineno") and (o.lineno, o.col_offset) > position for o in origins)


def _assigned_within(name: str, node: ast.AST) -> bool:
    """``node`` binds ``name`` itself (``(x := ...)``, a comprehension's target)."""
    return any(type(sub) is ast.Name and sub.id == name and type(sub.ctx) is not ast.Load for sub in ast_walk(node))


def module_evidence(root: ast.AST) -> frozenset:
    """The receivers of calls of methods only modules have, under ``root``."""
    found = set()
    for node in ast_walk(root):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in MODULE_EVIDENCE:
            receiver = chain_of(node.func.value)
            if receiver is not None:
                found.add(receiver)
    return frozenset(found)


def mentions_device(root: ast.AST) -> bool:
    """Whether a class, function or lambda moves tensors or names a device."""
    for sub in ast_walk(root):
        if type(sub) is ast.Attribute and sub.attr in ("to", "cuda", "device"):
            return True
        if type(sub) is ast.Name and DEVICE_NAME_PATTERN.fullmatch(sub.id):
            return True
    return False
