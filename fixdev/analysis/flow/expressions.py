"""The interpreter's expressions: names, attributes, subscripts, containers, operators and comprehensions."""

from __future__ import annotations

import ast
from fixdev.analysis.flow.index import FUNCTION_DEFS
from fixdev.analysis.flow.lattice import MAX_PARTS_DEPTH
from fixdev.analysis.flow.lattice import DTYPE_VALUE, Device, FOLLOWS_MODULE, HOST, Instance, MOVES_INPUTS, NOTHING, NO_PLACES, PARAM_FREE, Parts, SCALAR_VALUE, SameAs, UNKNOWN, UNKNOWN_PLACES, UNKNOWN_VALUE, Value, What, ZERO_DIM, TENSORISH, apart, container_value, parts_depth, join_all, kinds_of, join
from fixdev.analysis.flow.syntax import chain_of, root_of
from fixdev.analysis.flow.vocabulary import CONFIG_NAMES, DEVICE_OBJECT, DEVICE_STRINGS, ENCODING, ENCODING_ATTRIBUTES, TENSOR_SAME_ATTRIBUTES, TENSOR_SCALAR_ATTRIBUTES
from fixdev.analysis.flow import sinks


def e_constant(run, node: ast.Constant, state: dict) -> Value:
    value = node.value
    if type(value) is str:
        return run.flow.device_string(value) or SCALAR_VALUE
    return SCALAR_VALUE


def e_name(run, node: ast.Name, state: dict) -> Value:
    value = state.get(node.id)
    if value is None:
        if node.id in run.scope.locals:
            return UNKNOWN_VALUE  # not bound yet on any path
        value = run.flow.free_name(run.scope, node.id)
    ref = value.ref
    if ref is not None and type(ref) is not str and run.record and (type(ref) in FUNCTION_DEFS or type(ref) is ast.ClassDef) and ref.name == node.id:
        run.references[node] = ref
    if value.what is What.DEVICE:
        return named_device(run, value, node.id)
    return value


def named_device(run, value: Value, text: str) -> Value:
    """A name bound to a device names it: ``device`` after
    ``device = "cuda" if ... else "cpu"`` is ``Device(device)``, on every path."""
    host, device, _ = kinds_of(value)
    if not device:
        return value
    home = run.flow.scope_home(run.scope, root_of(text))
    places = frozenset((Device(text, home), None) if p is HOST or type(p) is Device else (p, o) for p, o in value.places)
    return value.but(places=places)


def e_attribute(run, node: ast.Attribute, state: dict) -> Value:
    chain = chain_of(node)
    if chain is not None and chain in state:
        value = state[chain]
        return named_device(run, value, chain) if value.what is What.DEVICE else value
    base = run.ev(node.value, state)
    value = attribute(run, base, node.attr, node, chain, state)
    if run.record and type(value.ref) in FUNCTION_DEFS and value.ref.name == node.attr:
        run.references[node] = value.ref
    return value


def attribute(run, base: Value, attr: str, node: ast.AST, chain: str | None, state: dict) -> Value:
    ref = base.ref
    if type(ref) is str:
        return run.flow.module_ref(f"{ref}.{attr}")
    if type(ref) is Instance:
        found = run.flow.classes.instance_attribute(run, base, attr, chain)
        if found is not None:
            return found
    what = base.what
    if attr == "device":
        owner = node.value if type(node) is ast.Attribute else node.args[0] if type(node) is ast.Call and node.args else None
        return device_of(run, base, chain_of(owner) if owner is not None else None)
    if what is What.TENSOR:
        if attr in TENSOR_SAME_ATTRIBUTES:
            return base
        if attr == "dtype":
            return DTYPE_VALUE
        if attr in TENSOR_SCALAR_ATTRIBUTES:
            return SCALAR_VALUE
        return Value(What.UNKNOWN, base.places)  # a model output's .logits, .last_hidden_state
    if what is What.MODULE:
        if attr in ("weight", "bias") and not base.flags & PARAM_FREE:
            return Value(What.TENSOR, base.places, flags=FOLLOWS_MODULE)
        if attr == "module" and base.flags & MOVES_INPUTS:  # DataParallel(model).module
            return base.but(flags=base.flags & ~MOVES_INPUTS)
        if attr == "training":
            return SCALAR_VALUE
        return UNKNOWN_VALUE
    if what is What.ARRAY:
        return SCALAR_VALUE if attr in ("shape", "ndim", "dtype", "size") else base
    if what is What.BATCH and ref == ENCODING and isinstance(base.parts, Parts) and attr not in ENCODING_ATTRIBUTES:
        # enc.input_ids: a BatchEncoding reads its tensors as attributes too
        for key, part in base.parts.items:
            if key == attr:
                return part
        return base.parts.elem if base.parts.elem is not NOTHING else UNKNOWN_VALUE
    if attr in TENSOR_SCALAR_ATTRIBUTES and attr != "grad_fn":
        return SCALAR_VALUE
    return UNKNOWN_VALUE


def device_of(run, base: Value, owner: str | None) -> Value:
    """``x.device``: names where ``x`` lives; ``args.device``: a configured device."""
    home = run.flow.scope_home(run.scope, root_of(owner)) if owner else None
    if base.what in (What.TENSOR, What.MODULE, What.BATCH) or (base.what is What.UNKNOWN and base.places and base.places != UNKNOWN_PLACES):
        places = set()
        for placement, origin in base.places:
            if placement is HOST or type(placement) is Device:
                places.add((placement, origin))
            elif type(placement) is SameAs:
                places.add((placement, origin))
            elif owner is not None:
                places.add((SameAs(owner, home), origin))
            else:
                places.add((UNKNOWN, None))
        # a tensor's (or parameter's) device is a torch.device object; a module's
        # or batch's `.device` is whatever its class defines, maybe a string
        ref = DEVICE_OBJECT if base.what is What.TENSOR or base.flags & FOLLOWS_MODULE else None
        return Value(What.DEVICE, frozenset(places) or UNKNOWN_PLACES, ref=ref)
    if owner is not None and (root_of(owner) in CONFIG_NAMES or (owner == run.scope.self_name and not (run.cls_info and run.cls_info.is_module))):
        return Value(What.DEVICE, frozenset({(Device(f"{owner}.device", home), None)}))
    if owner is not None:
        return Value(What.DEVICE, frozenset({(SameAs(owner, home), None)}))
    return Value(What.DEVICE, UNKNOWN_PLACES)


def e_subscript(run, node: ast.Subscript, state: dict) -> Value:
    return subscript(run, run.ev(node.value, state), node, state)


def subscript(run, container: Value, node: ast.Subscript, state: dict) -> Value:
    index_value = run.ev(node.slice, state)
    what = container.what
    if isinstance(container.parts, Parts):
        index = node.slice
        if type(index) is ast.Slice:
            return container
        key = index.value if type(index) is ast.Constant else None
        if type(key) is int and key < 0:
            ints = [k for k, _ in container.parts.items if type(k) is int]
            if ints and sorted(ints) == list(range(len(ints))):
                key = len(ints) + key
        for k, part in container.parts.items:
            if k == key:
                return part
        elem = container.parts.elem
        return UNKNOWN_VALUE if elem is NOTHING else elem
    if what is What.TENSOR:
        index = node.slice
        if run.record:
            index_meets(run, container, node, index_value, state)
        # t[i] may be 0-dim (t[0] of a 1-dim tensor), which combines legally
        single = type(index) is not ast.Slice and type(index) is not ast.Tuple and index_value.what is What.SCALAR
        return container.but(flags=(container.flags & ~(ZERO_DIM | FOLLOWS_MODULE)) | (ZERO_DIM if single else 0))
    if what is What.ARRAY or what is What.SCALAR:
        return container if what is What.ARRAY else SCALAR_VALUE
    if what is What.UNKNOWN and container.places and container.places != UNKNOWN_PLACES and container.ref is None:
        return Value(What.UNKNOWN, container.places)
    return UNKNOWN_VALUE


def index_meets(run, container: Value, node: ast.Subscript, index_value: Value, state: dict) -> None:
    """``host[device_index]``: reading by index checks that every index
    tensor is on the CPU or on the indexed tensor's device. Legal, so
    silent: a device tensor indexed by host indices, a 0-dim integer index
    (read as a number), and assignments (``host[device_index] = v`` moves
    the indices)."""
    index = node.slice
    if type(index) is ast.Tuple:
        if not isinstance(index_value.parts, Parts) or any(type(e) is ast.Starred for e in index.elts):
            return
        parts = dict(index_value.parts.items)
        elements = [(element, parts.get(i)) for i, element in enumerate(index.elts)]
    else:
        elements = [(index, index_value)]
    for element, value in elements:
        if value is not None and value.what is What.TENSOR and not value.flags & ZERO_DIM:
            if apart(container, value):
                sinks.sink(run, "index", node, node.value, container, element, value, state)
                return
            if sinks.index_relative(run, container, node, element, value):
                return


def e_starred(run, node: ast.Starred, state: dict) -> Value:
    return run.ev(node.value, state)


def e_sequence(run, node: ast.AST, state: dict) -> Value:
    values = [run.ev(element, state) for element in node.elts]
    if any(type(e) is ast.Starred for e in node.elts):
        elem = join_all(values) or NOTHING
        return container_value(values, (), elem)
    trimmed = [v if parts_depth(v) < MAX_PARTS_DEPTH else v.but(parts=None) for v in values]
    elem = join_all(trimmed) or NOTHING
    return container_value(trimmed, tuple(enumerate(trimmed)), elem)


def e_dict(run, node: ast.Dict, state: dict) -> Value:
    items = []
    values = []
    for key, value_node in zip(node.keys, node.values):
        value = run.ev(value_node, state)
        if key is None:  # {**other}
            values.append(value.parts.elem if isinstance(value.parts, Parts) else value)
            continue
        run.ev(key, state)
        if parts_depth(value) >= MAX_PARTS_DEPTH:
            value = value.but(parts=None)
        values.append(value)
        if type(key) is ast.Constant and isinstance(key.value, (str, int)):
            items.append((key.value, value))
    return container_value(values, tuple(items), join_all(values) or NOTHING)


def e_set(run, node: ast.Set, state: dict) -> Value:
    for element in node.elts:
        run.ev(element, state)
    return UNKNOWN_VALUE


def e_comprehension(run, node: ast.AST, state: dict) -> Value:
    inner = dict(state)
    for generator in node.generators:
        run.bind(generator.target, run.element(run.ev(generator.iter, inner)), inner)
        for condition in generator.ifs:
            run.ev(condition, inner)
    if type(node) is ast.DictComp:
        run.ev(node.key, inner)
        element = run.ev(node.value, inner)
    else:
        element = run.ev(node.elt, inner)
    if parts_depth(element) >= MAX_PARTS_DEPTH:
        element = element.but(parts=None)
    what = What.BATCH if element.what in (What.TENSOR, What.BATCH) else What.SCALAR if element.what is What.SCALAR else What.UNKNOWN
    places = element.places if element.what in TENSORISH else NO_PLACES
    return Value(what, places, Parts(element))


def e_unaryop(run, node: ast.UnaryOp, state: dict) -> Value:
    operand = run.ev(node.operand, state)
    if type(node.op) is ast.Not:
        return SCALAR_VALUE
    if operand.what in (What.TENSOR, What.ARRAY, What.SCALAR):
        return operand
    return UNKNOWN_VALUE


def e_binop(run, node: ast.BinOp, state: dict) -> Value:
    left = run.ev(node.left, state)
    right = run.ev(node.right, state)
    return sinks.combine(run, node, [(node.left, left), (node.right, right)], state)


def e_boolop(run, node: ast.BoolOp, state: dict) -> Value:
    return join_all([run.ev(value, state) for value in node.values])


def e_compare(run, node: ast.Compare, state: dict) -> Value:
    operands = [(node.left, run.ev(node.left, state))]
    operands += [(c, run.ev(c, state)) for c in node.comparators]
    if any(type(op) in (ast.Is, ast.IsNot, ast.In, ast.NotIn) for op in node.ops):
        return SCALAR_VALUE
    result = sinks.combine(run, node, operands, state)
    return result if result.what is What.TENSOR else SCALAR_VALUE


def e_ifexp(run, node: ast.IfExp, state: dict) -> Value:
    run.ev(node.test, state)
    run.note_flag(node.test)
    return join(run.ev(node.body, state), run.ev(node.orelse, state))


def e_namedexpr(run, node: ast.NamedExpr, state: dict) -> Value:
    value = run.ev(node.value, state)
    run.bind(node.target, value, state)
    return value


def e_joinedstr(run, node: ast.AST, state: dict) -> Value:
    """``f"cuda:{rank}"`` names a device."""
    first = node.values[0] if node.values else None
    if type(first) is ast.Constant and isinstance(first.value, str) and first.value.split(":")[0] in DEVICE_STRINGS:
        return Value(What.DEVICE, frozenset({(Device(None), None)}))  # named once bound to a name
    return SCALAR_VALUE


def e_lambda(run, node: ast.Lambda, state: dict) -> Value:
    """A lambda: its body runs where a call of it is seen (``calls.call_lambda``)."""
    return Value(What.UNKNOWN, UNKNOWN_PLACES, ref=node)


def e_await(run, node: ast.AST, state: dict) -> Value:
    value = run.ev(node.value, state) if getattr(node, "value", None) is not None else SCALAR_VALUE
    if type(node) is not ast.Await:
        run.generator = True
        run.yields = join(run.yields, value if type(node) is ast.Yield else run.element(value))
    return UNKNOWN_VALUE


def e_slice(run, node: ast.Slice, state: dict) -> Value:
    for part in (node.lower, node.upper, node.step):
        if part is not None:
            run.ev(part, state)
    return SCALAR_VALUE
