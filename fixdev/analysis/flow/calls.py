"""The interpreter's calls: torch functions and factories, builtins, loaders, the file's own functions and classes, modules, and methods of modules, tensors and batches."""

from __future__ import annotations

import ast
from fixdev.analysis.flow.index import FUNCTION_DEFS
from fixdev.analysis.flow.lattice import MAX_INLINE_DEPTH
from fixdev.analysis.flow.lattice import ARRAY_VALUE, Device, FOLLOWS_MODULE, HOST, Instance, MOVES_INPUTS, NOTHING, NO_PLACES, PARAM_FREE, PENDING, Parts, SCALAR_VALUE, UNKNOWN_PLACES, UNKNOWN_VALUE, Value, What, ZERO_DIM, TENSORISH, apart, capped, container_value, host_loader, join_all, kinds_of, spread_inputs, join
from fixdev.analysis.flow.syntax import chain_of, is_constant_number, root_of
from fixdev.analysis.flow.lattice import position_of
from fixdev.analysis.flow.vocabulary import TENSOR_ONLY_METHODS, COMBINING_METHODS, DATA_LOADERS, DEVICE_OBJECT, DTYPES, ENCODING, TOKENIZER_TENSOR_METHODS, FIRST_ARGUMENT_ONLY, LEGACY_HOST_TYPES, LIKE_FACTORIES, MODULE_CONTAINERS, MODULE_EVIDENCE, MODULE_SELF_METHODS, MODULE_WRAPPERS, MOVES, NN_PARAMETERS, NON_TENSOR_RESULTS, NOT_OPERATIONS, NUMPY_ARRAY_READERS, NUMPY_NOT_READING, NOT_OPERATION_PREFIXES, OPTIMIZER, PARAM_FREE_LAYERS, PASS_THROUGH_CALLS, REDUCTIONS, TENSOR_DATASETS, TENSOR_FACTORIES, TENSOR_METHODS, WEIGHTED_LOSSES, DEVICE_NAME_PATTERN, SCALAR_BUILTINS, is_model_builder, is_optimizer_class, is_torch_module_class
from fixdev.analysis.flow import evidence, expressions, sinks


def e_call(run, node: ast.Call, state: dict) -> Value:
    value = _call(run, node, state)
    if value is UNKNOWN_VALUE and node.keywords:
        return encoded(run, node)
    return value


def encoded(run, node: ast.Call) -> Value:
    """``tokenizer(texts, return_tensors="pt")`` (a tokenizer, processor or
    feature extractor the analysis cannot see): a ``BatchEncoding`` of host
    tensors (ref ``ENCODING``); ``tokenizer.encode(..., return_tensors="pt")``
    and ``apply_chat_template`` without ``return_dict=True``: one host tensor.
    Unknown under a default device, which the tokenizer's tensors follow."""
    pt = as_dict = False
    for keyword in node.keywords:
        if keyword.arg == "return_tensors":
            value = keyword.value
            if type(value) is not ast.Constant or value.value != "pt":
                return UNKNOWN_VALUE
            pt = True
        elif keyword.arg == "return_dict":
            as_dict = type(keyword.value) is ast.Constant and keyword.value.value is True
    if not pt or run._default_device or run.index.default_device_set:
        return UNKNOWN_VALUE
    tensor = Value(What.TENSOR, frozenset({(HOST, node)}))
    func = node.func
    if type(func) is ast.Attribute and func.attr in TOKENIZER_TENSOR_METHODS and not (func.attr == "apply_chat_template" and as_dict):
        return tensor
    return Value(What.BATCH, frozenset({(HOST, node)}), Parts(tensor), ENCODING)


def _call(run, node: ast.Call, state: dict) -> Value:
    func = node.func
    if type(func) is ast.Attribute:
        receiver = run.ev(func.value, state)
        if type(receiver.ref) is str:
            name = f"{receiver.ref}.{func.attr}"
            if run.record:
                run.remember(func, run.flow.module_ref(name))
            return call_named(run, name, node, state)
        if receiver.what is What.MODULE and func.attr == "forward":
            return call_module(run, receiver, func.value, node, state)
        chain = chain_of(func)
        member = state.get(chain) if chain is not None else None
        if member is None and type(receiver.ref) is Instance:
            member = run.flow.classes.instance_attribute(run, receiver, func.attr, chain)
        if member is not None and moved_and_called(run, member, chain):
            member = called_module(member, chain, node)
        if member is not None and (member.what is What.MODULE or isinstance(member.ref, (ast.FunctionDef, ast.AsyncFunctionDef))):
            if run.record:
                run.remember(func, member)
            if isinstance(member.ref, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return call_function(run, member.ref, node, state, receiver)
            return call_module(run, member, func, node, state)
        return method(run, receiver, func.attr, func.value, node, state)
    callee = run.ev(func, state)
    ref = callee.ref
    if type(ref) is str:
        return call_named(run, ref, node, state)
    if type(ref) is ast.Lambda:
        return call_lambda(run, ref, node, state)
    if type(ref) in FUNCTION_DEFS:
        return call_function(run, ref, node, state, None)
    if type(ref) is ast.ClassDef:
        return construct(run, ref, node, state)
    if callee.what is What.MODULE:
        return call_module(run, callee, func, node, state)
    if moved_and_called(run, callee, chain_of(func)):
        return call_module(run, called_module(callee, chain_of(func), node), func, node, state)
    positional, keywords = run.arguments(node, state)
    forget_modules(run, positional, keywords, state)
    return UNKNOWN_VALUE


def called_module(value: Value, chain: str, node: ast.Call) -> Value:
    """``value`` as the module ``moved_and_called`` shows it is: a device
    named through it (``self.model.device``, which a plain ``nn.Module`` does
    not have) is named through its parameters."""
    through = f"{chain}.device"
    places = frozenset(
        (Device(f"next({chain}.parameters()).device", p.home), o) if type(p) is Device and p.text == through else (p, o)
        for p, o in value.places
    )
    return Value(What.MODULE, places, frozenset({node}))


def moved_and_called(run, value: Value, chain: str | None) -> bool:
    """``model(x)`` where ``model`` is a caller's object moved to a device
    (``model = model.to(device)`` of a parameter, ``self.model =
    model.to(device)`` in ``__init__``): a tensor is not callable, so what
    moves with ``.to`` and is called is a module, on that device on every
    path. Objects made here by calls the analysis does not see (a pipeline's
    ``from_pretrained(...).to("cuda")``) are not taken for modules."""
    if value.what is not What.UNKNOWN or value.ref is not None or chain is None or not value.places or value.places == UNKNOWN_PLACES:
        return False
    if kinds_of(value) != (False, True, False):
        return False
    return run.flow.classes.moved_parameter(run.scope, chain)


def call_lambda(run, lam: ast.Lambda, node: ast.Call, state: dict) -> Value:
    """``f(a, b)`` of ``f = lambda x, y: ...`` bound in this scope: its body,
    with its parameters bound to the arguments, reading the other names as
    they are where the call runs (a closure reads them then)."""
    positional, keywords = run.arguments(node, state)
    args = lam.args
    names = [a.arg for a in (*args.posonlyargs, *args.args)]
    if lam in run.lambdas or any(type(a) is ast.Starred for a in node.args) or None in keywords or len(positional) > len(names) and args.vararg is None:
        return UNKNOWN_VALUE
    if run.index.scope_at(position_of(lam)).node is not run.scope.node:
        return UNKNOWN_VALUE  # made in another scope: its names are not this run's
    inner = run.copy(state)
    defaults = dict(zip(names[len(names) - len(args.defaults):], args.defaults))
    for i, name in enumerate(names):
        inner[name] = positional[i] if i < len(positional) else keywords.get(name) or (run.ev(defaults[name], state) if name in defaults else UNKNOWN_VALUE)
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        inner[arg.arg] = keywords.get(arg.arg) or (run.ev(default, state) if default is not None else UNKNOWN_VALUE)
    for arg in (args.vararg, args.kwarg):
        if arg is not None:
            inner[arg.arg] = UNKNOWN_VALUE
    run.lambdas.add(lam)
    try:
        return run.ev(lam.body, inner)
    finally:
        run.lambdas.discard(lam)


def call_named(run, name: str, node: ast.Call, state: dict) -> Value:
    positional, keywords = run.arguments(node, state)
    first = positional[0] if positional else None
    if name.startswith("torch."):
        return torch_call(run, name, node, positional, keywords, state)
    if name.startswith("builtins."):
        return builtin_call(run, name[9:], node, positional, keywords, state)
    if name.startswith("numpy."):
        if first is not None and node.args and type(node.args[0]) is not ast.Starred and run.record:
            if name in NUMPY_ARRAY_READERS:  # np.array([a, b]) too: a container reported without a fix
                sinks.numpy_read(run, node, node.args[0], first, state)
            elif name.count(".") == 1 and name[6:] not in NUMPY_NOT_READING:  # np.isnan(t), np.where(t > 0)
                sinks.numpy_read(run, node, node.args[0], first, state, (What.TENSOR,))
        return ARRAY_VALUE
    if name in DATA_LOADERS:
        return loader(run, node, positional, keywords)
    if name in PASS_THROUGH_CALLS:
        return first if first is not None else UNKNOWN_VALUE
    if is_model_builder(name, node):
        if "device_map" in keywords:
            return Value(What.MODULE, UNKNOWN_PLACES, frozenset({node}), ("instance", name))
        return Value(What.MODULE, frozenset({(HOST, node)}), frozenset({node}), ("instance", name))
    if name.startswith("einops.") and positional:
        return sinks.combine(run, node, list(zip(node.args, positional)), state)
    forget_modules(run, positional, keywords, state)
    project = run.flow.project
    if project is not None and run.summaries:
        # another file's function: what it returns whatever it is given (codemods.project)
        returned = project.call(name, node)
        if returned is not None:
            return returned
    return UNKNOWN_VALUE


def torch_call(run, name: str, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
    first = positional[0] if positional else None
    if name in TENSOR_FACTORIES:
        return factory(run, name, node, first, keywords)
    if name in LIKE_FACTORIES:
        if "device" in keywords:
            return run.placed(node, keywords["device"])
        return Value(What.TENSOR, first.places if first is not None and first.what in TENSORISH else UNKNOWN_PLACES)
    if name == "torch.device":
        return device_constructor(run, node, positional, keywords)
    if name == "torch.accelerator.current_accelerator":  # a device, or None on a machine without one
        return Value(What.DEVICE, frozenset({(Device(run.flow.source_of(node), run.flow.scope_home(run.scope, root_of(run.flow.source_of(node)))), None)}))
    if name.startswith("torch.cuda.") and name.endswith("Tensor") and name.rsplit(".", 1)[-1][:1].isupper():
        return Value(What.TENSOR, frozenset({(Device(None), node)}))
    if name == "torch.autograd.grad":
        # grad_outputs must be where the outputs are; the gradients live where the inputs do
        met = [(arg, value) for i, (arg, value) in enumerate(zip(node.args, positional)) if i in (0, 2)]
        met += [(k.value, keywords[k.arg]) for k in node.keywords if k.arg in ("outputs", "grad_outputs")]
        operands = []
        for arg, value in met:
            if type(arg) in (ast.List, ast.Tuple) and isinstance(value.parts, Parts):
                operands += [(element, part) for element, (_, part) in zip(arg.elts, value.parts.items)]
            else:
                operands.append((arg, value))
        sinks.combine(run, node, operands, state)
        inputs = positional[1] if len(positional) > 1 else keywords.get("inputs", UNKNOWN_VALUE)
        each = run.element(inputs) if isinstance(inputs.parts, Parts) else inputs
        places = each.places if each.what in TENSORISH and each.places else UNKNOWN_PLACES
        return Value(What.BATCH, places, Parts(Value(What.TENSOR, places)))
    if name in NN_PARAMETERS:
        base = first if first is not None and first.what in TENSORISH else UNKNOWN_VALUE
        return Value(What.TENSOR, base.places, flags=FOLLOWS_MODULE)
    if name in MODULE_WRAPPERS:
        inner = first if first is not None else UNKNOWN_VALUE
        return Value(What.MODULE, inner.places, inner.parts if isinstance(inner.parts, frozenset) else frozenset({node}), ("instance", name), MOVES_INPUTS)
    if name in TENSOR_DATASETS:
        places = frozenset()
        for value in positional:
            places |= value.places
        return Value(What.UNKNOWN, places, ref=("instance", name))
    if name in DATA_LOADERS:
        return loader(run, node, positional, keywords)
    if name in PASS_THROUGH_CALLS or (name == "torch.compile" and first is not None and first.what is What.MODULE):
        return first if first is not None else UNKNOWN_VALUE
    if is_torch_module_class(name):
        leaf = name.rsplit(".", 1)[-1]
        free = leaf in PARAM_FREE_LAYERS and not (leaf in WEIGHTED_LOSSES and (positional or "weight" in keywords or "pos_weight" in keywords))
        if leaf in MODULE_CONTAINERS:
            return module_container(run, name, node, positional)
        if "device" in keywords and not free:  # nn.Linear(4, 4, device=device)
            places = run.target_places(keywords["device"], node)
            return Value(What.MODULE, places if places is not None else UNKNOWN_PLACES, frozenset({node}), ("instance", name))
        places = frozenset({(HOST, node)})
        if leaf in WEIGHTED_LOSSES and not free:  # its weight is its buffer: it lives where that does
            given = [keywords[k] for k in ("weight", "pos_weight") if k in keywords] + positional[: leaf != "MultiMarginLoss"]
            places = frozenset((p, node) for v in given for p, _ in (v.places if v.what is What.TENSOR and v.places else UNKNOWN_PLACES))
        return Value(What.MODULE, places, frozenset({node}), ("instance", name), PARAM_FREE if free else 0)
    if is_optimizer_class(name):
        return Value(What.UNKNOWN, NO_PLACES, frozenset({node}), OPTIMIZER)
    if name in NOT_OPERATIONS or name.startswith(NOT_OPERATION_PREFIXES) or "._" in name or name.startswith("torch.nn.") and not name.startswith("torch.nn.functional.") or "Storage" in name:
        # (a storage, torch.ByteStorage.from_buffer(b), is not a tensor)
        if name.startswith(("torch.is_", "torch.cuda.is_", "torch.backends.")) or name in ("torch.numel", "torch.typename"):
            return SCALAR_VALUE
        return UNKNOWN_VALUE
    # an operation: its tensor arguments (and the tensors in list arguments) meet
    operands = []
    for arg, value in zip(node.args, positional):
        if type(arg) in (ast.List, ast.Tuple) and isinstance(value.parts, Parts):
            operands += [(element, element_value) for element, (_, element_value) in zip(arg.elts, value.parts.items)]
        elif isinstance(value.parts, Parts) and value.what is not What.LOADER and type(arg) is not ast.Starred:
            operands.append((arg, value.parts.elem if value.parts.elem is not NOTHING else value))
        else:
            operands.append((arg, value))
    for keyword in node.keywords:
        if keyword.arg not in ("dim", "out", "dtype", "keepdim") and keyword.arg is not None:
            operands.append((keyword.value, keywords[keyword.arg]))
    if name in FIRST_ARGUMENT_ONLY:
        operands = operands[:1]
    result = sinks.combine(run, node, operands, state)
    if result.what is not What.TENSOR:  # torch's operations return tensors
        result = Value(What.TENSOR, result.places if result.places else UNKNOWN_PLACES, flags=result.flags)
    if name.rsplit(".", 1)[-1] in REDUCTIONS and len(node.args) == 1 and not node.keywords and result.what is What.TENSOR:
        result = result.but(flags=result.flags | ZERO_DIM)
    elif result.flags & ZERO_DIM:
        result = result.but(flags=result.flags & ~ZERO_DIM)
    return result


def module_container(run, name: str, node: ast.Call, positional: list[Value]) -> Value:
    """``nn.Sequential(a, b)``, ``nn.ModuleList([a, b])``: where the modules it holds are."""
    children = []
    for arg, value in zip(node.args, positional):
        if type(arg) is ast.Starred or (type(arg) in (ast.List, ast.Tuple, ast.ListComp) and isinstance(value.parts, Parts)):
            children.append(run.element(value))
        else:
            children.append(value)
    flags = PARAM_FREE if children and all(c.what is What.MODULE and c.flags & PARAM_FREE for c in children) else 0
    if not children:
        return Value(What.MODULE, frozenset({(HOST, node)}), frozenset({node}), ("instance", name), 0)
    if not all(c.what is What.MODULE for c in children):
        return Value(What.MODULE, UNKNOWN_PLACES, frozenset({node}), ("instance", name), flags)
    places = frozenset((p, o) for c in children for p, o in c.places)
    return Value(What.MODULE, capped(places), frozenset({node}), ("instance", name), flags)


def factory(run, name: str, node: ast.Call, first: Value | None, keywords: dict) -> Value:
    if "device" in keywords:
        return run.placed(node, keywords["device"], name == "torch.scalar_tensor" or (name == "torch.tensor" and node.args and is_constant_number(node.args[0])))
    if run._default_device or run.index.default_device_set:
        return Value(What.TENSOR, UNKNOWN_PLACES)
    zero_dim = ZERO_DIM if name == "torch.scalar_tensor" or (name in ("torch.tensor", "torch.as_tensor") and node.args and maybe_number(node.args[0], first)) else 0
    if name in ("torch.tensor", "torch.as_tensor", "torch.asarray") and first is not None and first.what is What.UNKNOWN and type(node.args[0]) is ast.Name:
        if evidence.in_tensor_arm(run.flow, node, node.args[0].id, run.scope.node, SEQUENCES):
            # `elif isinstance(target, list): torch.tensor(target)`: a list's numbers, copied to the host
            return Value(What.TENSOR, frozenset({(HOST, node)}))
    if name in ("torch.tensor", "torch.as_tensor", "torch.asarray") and first is not None and not zero_dim:
        if first.what is What.TENSOR or (first.what is What.BATCH and name != "torch.tensor"):
            return Value(What.TENSOR, first.places)
        if first.what is What.UNKNOWN:
            literal = type(node.args[0]) in (ast.List, ast.Tuple) and all(v.what is What.SCALAR for _, v in (first.parts.items if isinstance(first.parts, Parts) else ()))
            # a list, tuple or comprehension (not a tensor): its numbers are copied to the host
            listed = isinstance(first.parts, Parts) and first.ref is None
            if not literal and not listed:
                return Value(What.TENSOR, UNKNOWN_PLACES)
    return Value(What.TENSOR, frozenset({(HOST, node)}), flags=zero_dim)


SEQUENCES = frozenset({"list", "tuple"})  # what `isinstance(x, list)` says `x` holds: not a tensor, not a number


def maybe_number(arg: ast.AST, value: Value | None) -> bool:
    """``torch.tensor(3.0)``, ``torch.tensor(step)``: data that may be a single number."""
    if is_constant_number(arg):
        return True
    return value is not None and value.what is What.SCALAR and value.parts is None and type(arg) not in (ast.List, ast.Tuple, ast.ListComp, ast.Constant)


def device_constructor(run, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
    arg = positional[0] if positional else keywords.get("type")
    if arg is None:
        return Value(What.DEVICE, UNKNOWN_PLACES, ref=DEVICE_OBJECT)
    if arg.what is What.DEVICE:
        if all(p is HOST for p, _ in arg.places):
            return Value(What.DEVICE, frozenset({(HOST, None)}), ref=DEVICE_OBJECT)
        places = frozenset((Device(run.flow.source_of(node), run.flow.scope_home(run.scope, "torch")) if type(p) is Device and p.text and p.text.startswith('"') else p, o) for p, o in arg.places)
        return Value(What.DEVICE, places, ref=DEVICE_OBJECT)
    return Value(What.DEVICE, frozenset({(Device(run.flow.source_of(node), run.flow.scope_home(run.scope, root_of(run.flow.source_of(node)))), None)}), ref=DEVICE_OBJECT)


def builtin_call(run, name: str, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
    first = positional[0] if positional else None
    if name == "next" and first is not None:
        element = run.element(first)
        return join(element, positional[1]) if len(positional) > 1 else element
    if name == "iter" and first is not None:
        return first
    if name == "enumerate" and first is not None:
        return Value(What.UNKNOWN, NO_PLACES, Parts(container_value([SCALAR_VALUE, run.element(first)], ((0, SCALAR_VALUE), (1, run.element(first))), UNKNOWN_VALUE)))
    if name == "zip":
        elements = [run.element(v) for v in positional]
        return Value(What.UNKNOWN, NO_PLACES, Parts(container_value(elements, tuple(enumerate(elements)), join_all(elements) or NOTHING)))
    if name in ("list", "tuple", "sorted", "reversed") and first is not None:
        element = run.element(first)
        if element is UNKNOWN_VALUE:
            return UNKNOWN_VALUE
        return container_value([element], (), element) if name in ("sorted", "reversed") or first.what is not What.BATCH else first
    if name == "range":
        return Value(What.SCALAR, NO_PLACES, Parts(SCALAR_VALUE))
    if name == "getattr" and len(node.args) >= 2 and type(node.args[1]) is ast.Constant and isinstance(node.args[1].value, str):
        return expressions.attribute(run, first, node.args[1].value, node, None, state)
    if name == "abs" and first is not None and first.what is What.TENSOR:
        return first
    if name in SCALAR_BUILTINS:
        return SCALAR_VALUE
    return UNKNOWN_VALUE


def loader(run, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
    """A DataLoader: its batches live on the host, unless its dataset or
    collate_fn is seen to hold or move device tensors."""
    dataset = positional[0] if positional else keywords.get("dataset")
    collate = keywords.get("collate_fn") if "collate_fn" in keywords else (positional[4] if len(positional) > 4 else None)
    on_host = True
    if collate is not None and collate is not SCALAR_VALUE:
        ref = collate.ref
        on_host = type(ref) in FUNCTION_DEFS and not run.flow.mentions_device(ref)
    if dataset is not None and on_host:
        if type(dataset.ref) is Instance:
            on_host = not run.flow.mentions_device(dataset.ref.cls)
        elif type(dataset.ref) is tuple and dataset.ref[1] in TENSOR_DATASETS:
            on_host = all(p is HOST for p, _ in dataset.places)
    if not on_host:
        return Value(What.LOADER, NO_PLACES, Parts(UNKNOWN_VALUE))
    if collate is not None and collate is not SCALAR_VALUE:
        # the file's collate_fn: its batch is what it returns (tuple(zip(*batch)): tuples, not tensors)
        made = run.flow.returned(collate.ref)
        return Value(What.LOADER, NO_PLACES, Parts(collated(made, False) if made is not None else UNKNOWN_VALUE))
    if dataset is not None and type(dataset.ref) is Instance:
        getitem = run.flow.classes.method_of(dataset.ref.cls, "__getitem__")
        item = run.flow.returned(getitem) if getitem is not None else None
        if item is not None:
            return Value(What.LOADER, NO_PLACES, Parts(collated(item, True)))
    return host_loader()


def e_subscript(run, node: ast.Subscript, state: dict) -> Value:
    container = run.ev(node.value, state)
    if type(container.ref) is Instance and container.ref.cls is not None and container.what is not What.MODULE and type(node.slice) is not ast.Slice:
        item = dataset_item(run, container.ref.cls)
        if item is not None:
            return item
    return expressions.subscript(run, container, node, state)


def dataset_item(run, cls: ast.ClassDef) -> Value | None:
    """``ds[i]`` of an instance of the file's class with ``__getitem__``
    (a dataset read by hand, not through a loader): what ``__getitem__``
    returns, its host tensors (``torch.from_numpy``) kept on the host and the
    rest not known; None where the class moves or names a device itself."""
    getitem = run.flow.classes.method_of(cls, "__getitem__")
    if getitem is None or run.flow.mentions_device(cls):
        return None
    item = run.flow.returned(getitem)
    if item is None:
        return None
    return host_item(item)


def iterated_instance(run, cls: ast.ClassDef) -> Value:
    """What ``for x in obj`` gives for an instance of the file's class whose
    ``__iter__`` is a generator (a batch iterator written by hand), or returns
    ``self`` beside a ``__next__``, or that has none and is read by index
    (``dataset_item``): what its ``yield``s (or ``__next__``'s returns)
    give, their host tensors (``torch.randn`` there) on the host and the
    rest not known (what the constructor was given lives where its
    caller put it), as ``dataset_item`` reads ``__getitem__``; not known where
    the class moves or names a device itself."""
    method = run.flow.classes.method_of(cls, "__iter__")
    if method is None and _iterated_by_index(run.flow, cls):
        # no `__iter__`: Python reads obj[0], obj[1], ... (a map-style Dataset iterated by hand)
        return dataset_item(run, cls) or UNKNOWN_VALUE
    if method is None or run.flow.mentions_device(cls):
        return UNKNOWN_VALUE
    summary = run.flow.symbolic(run.index.scopes[method])
    if summary is None:
        return UNKNOWN_VALUE
    if summary.generator:
        return host_item(summary.yields) if summary.yields is not None else UNKNOWN_VALUE
    following = run.flow.classes.method_of(cls, "__next__")
    if following is None or not _returns_only(method, run.index.scopes[method].self_name):
        return UNKNOWN_VALUE
    item = run.flow.returned(following)  # an iterator of its own: `__iter__` returns self, `__next__` each batch
    return host_item(item) if item is not None else UNKNOWN_VALUE


# Bases that give a class no `__iter__` of their own: iterating an instance reads its `__getitem__`.
_NO_ITER_BASES = frozenset({"object", "builtins.object", "torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})


def _iterated_by_index(flow, cls: ast.ClassDef, depth: int = 0) -> bool:
    """Whether ``cls`` and its bases leave iteration to ``__getitem__``: every
    base is known and is one of the file's classes of that kind, ``object``
    or torch's map-style ``Dataset`` (a ``dict`` or ``list`` subclass gives
    its keys or items, an imported base may define ``__iter__``)."""
    info = flow.index.classes.get(cls)
    if info is None or depth > 8 or len(info.node.bases) != len(info.bases) + len(info.local_bases):
        return False
    return all(base in _NO_ITER_BASES for base in info.bases) and all(_iterated_by_index(flow, base, depth + 1) for base in info.local_bases)


def _returns_only(method: ast.AST, self_name: str | None) -> bool:
    """``def __iter__(self): ... return self``: every return gives the instance."""
    returns = [s for s in ast.walk(method) if type(s) is ast.Return]
    return self_name is not None and bool(returns) and all(type(r.value) is ast.Name and r.value.id == self_name for r in returns)


def generated(elements: Value) -> Value:
    """A call of a generator function of this file (``for x, y in
    batches(data):``), given ``elements``, what its ``yield``s give there:
    an iterable whose elements are the parts of those that live on the host
    on every path, as a dataset's items (``host_item``: bound by the loop,
    which is where a move goes); the rest not known. A generator that moves
    what it yields gives nothing to move."""
    return Value(What.UNKNOWN, UNKNOWN_PLACES, Parts(host_item(elements)))


def host_item(item: Value, depth: int = 0) -> Value:
    """What a dataset item holds that is on the host on every path (a
    tensor ``torch.from_numpy`` made), tuple and dict parts one by one; the
    rest (a tensor that may be where a constructor argument is) not known."""
    if item.what is What.TENSOR:
        return Value(What.TENSOR, frozenset({(HOST, PENDING)})) if kinds_of(item) == (True, False, False) else UNKNOWN_VALUE
    if isinstance(item.parts, Parts) and item.parts.items and depth < 2 and item.what is not What.LOADER:
        items = tuple((key, host_item(part, depth + 1)) for key, part in item.parts.items)
        parts = [part for _, part in items]
        what = What.BATCH if all(p.what in (What.TENSOR, What.BATCH) for p in parts) else What.UNKNOWN
        return Value(what, frozenset({(HOST, PENDING)}), Parts(join_all(parts), items))
    return UNKNOWN_VALUE


def collated(item: Value, default: bool, depth: int = 0) -> Value:
    """A loader's batch made from what ``item`` is: a dataset item through the
    default collate (``default``: tensors, arrays and numbers are stacked into
    tensors, a tuple or dict keeps its parts, an item the code does not show
    is taken as a tensor), or a collate function's result as it is (only its
    host tensors are tensors of the batch). Parts that may be strings or
    numbers are not known."""
    tensor = Value(What.TENSOR, frozenset({(HOST, PENDING)}))
    if item.what is What.TENSOR and not kinds_of(item)[1] or (default and item.what is What.ARRAY):
        return tensor  # made from the items the loader gives, on the host
    if isinstance(item.parts, Parts) and item.parts.items and depth < 2 and item.what is not What.LOADER:
        items = tuple((key, collated(part, default, depth + 1)) for key, part in item.parts.items)
        parts = [part for _, part in items]
        what = What.BATCH if all(p.what in (What.TENSOR, What.BATCH) for p in parts) else What.UNKNOWN
        return Value(what, frozenset({(HOST, PENDING)}), Parts(join_all(parts), items))
    if default and item.what is What.UNKNOWN and item.parts is None and type(item.ref) is not Instance:
        return tensor  # a transform's result, say: taken as a tensor, as any dataset's item is
    return UNKNOWN_VALUE


def construct(run, cls: ast.ClassDef, node: ast.Call, state: dict) -> Value:
    positional, keywords = run.arguments(node, state)
    info = run.index.classes.get(cls)
    if run.record:
        init = info.methods.get("__init__") if info is not None else None
        run.called.add(node.func)
        if init is not None:
            run.note_call(node, positional, keywords, init, True)
    if info is not None and info.is_module:
        flags = PARAM_FREE if info.param_free else 0
        given = any(v.what is What.MODULE for v in (*positional, *keywords.values()))
        init = info.methods.get("__init__")
        if not given and init is not None and info.kept_parameters:
            bound = run.flow.bind_call(run.index.scopes[init], node, (positional, keywords), True)
            given = any(bound.get(name, UNKNOWN_VALUE).what is What.UNKNOWN for name in info.kept_parameters)
        if given or not (info.owns or info.param_free):
            # it may hold modules it is given, wherever they are
            return Value(What.MODULE, UNKNOWN_PLACES, frozenset({node}), Instance(cls), flags)
        return Value(What.MODULE, frozenset({(HOST, node)}), frozenset({node}), Instance(cls), flags)
    return Value(What.UNKNOWN, NO_PLACES, None, Instance(cls))


def call_function(run, function: ast.AST, node: ast.Call, state: dict, receiver: Value | None) -> Value:
    positional, keywords = run.arguments(node, state)
    if run.record:
        run.note_call(node, positional, keywords, function, receiver is not None)
    if not run.summaries:
        return UNKNOWN_VALUE
    if run.in_init and receiver is not None and receiver.ref == Instance(run.scope.cls) and run.depth < MAX_INLINE_DEPTH:
        inlined = run.flow.inline(run, function, node, positional, keywords, state)
        if inlined is not None:
            return inlined
    return run.flow.apply_summary(run, function, node, positional, keywords, receiver, state)


def call_module(run, module: Value, func: ast.AST, node: ast.Call, state: dict) -> Value:
    positional, keywords = run.arguments(node, state)
    inputs = list(zip(node.args, positional)) + [(k.value, keywords[k.arg]) for k in node.keywords]
    if module.flags & PARAM_FREE:
        if type(module.ref) is tuple and module.ref[1] in FIRST_ARGUMENT_ONLY:
            inputs = inputs[:1]
        if not inputs:
            return UNKNOWN_VALUE
        result = sinks.combine(run, node, inputs, state)
        return result if result.places else UNKNOWN_VALUE
    if run.record and not module.flags & MOVES_INPUTS:
        required = run.flow.inputs_on_device(run, module, node, positional, keywords)
        if required is not None:
            # a module of this file: only the inputs its forward() uses with its own parameters
            inputs = [(arg, value) for i, (arg, value) in enumerate(inputs) if i in required]
        for arg, value in spread_inputs(inputs):
            if sinks.meet(run, "module-input", node, arg, value, func, module, state):
                continue
            if apart(module, value):
                sinks.sink(run, "module-on-host", node, func, module, arg, value, state)
                break
    if kinds_of(module) == (True, False, False) and any(kinds_of(v)[1] for _, v in inputs):
        # a module on the host fed a device tensor fails here; what it would return is not known
        return Value(What.TENSOR, UNKNOWN_PLACES)
    places = frozenset((p, node if o is None else o) for p, o in module.places)
    return Value(What.TENSOR, places or UNKNOWN_PLACES)


def discarded_move(run, node: ast.Call, state: dict) -> None:
    """``m.to(d)`` as a statement: a module moves in place; on a value the
    code does not show to be a module, a discarded move says it is one only
    where other calls show it (``m.eval()``)."""
    receiver_node = node.func.value
    chain = chain_of(receiver_node)
    value = run.ev(node, state)
    if chain is None or chain not in state and type(receiver_node) is not ast.Name:
        return
    receiver = run.load_target(receiver_node, state) if type(receiver_node) in (ast.Name, ast.Attribute) else UNKNOWN_VALUE
    if receiver.what is What.UNKNOWN and receiver.ref is None:
        if run.flow.module_evidence(run.scope, chain) or run.flow.classes.called_parameter(run.scope, chain):
            state[chain] = Value(What.MODULE, value.places, frozenset({node}))
        else:
            # moves a module in place, does nothing to a tensor: a caller passing a module sees it moved
            run.discarded[chain] = value.places


def method(run, receiver: Value, name: str, receiver_node: ast.AST, node: ast.Call, state: dict) -> Value:
    positional, keywords = run.arguments(node, state)
    what = receiver.what
    chain = chain_of(receiver_node)
    if what is What.UNKNOWN and chain is not None and name in MODULE_EVIDENCE and receiver.ref is None:
        receiver = Value(What.MODULE, receiver.places if receiver.places else UNKNOWN_PLACES, frozenset({node}))
        state[chain] = receiver
        what = What.MODULE
    if what is What.MODULE:
        return module_method(run, receiver, name, receiver_node, node, positional, keywords, state)
    if name in ("append", "extend", "insert") and chain is not None and positional and (isinstance(receiver.parts, Parts) or what is What.SCALAR):
        # xs = []; xs.append(t): a list of what is appended
        added = positional[-1] if name != "extend" else run.element(positional[-1])
        parts = receiver.parts if isinstance(receiver.parts, Parts) else Parts(NOTHING)
        elem = added if parts.elem is NOTHING else join(parts.elem, added)
        state[chain] = container_value([elem], (), elem)
        return SCALAR_VALUE
    if type(receiver.ref) is Instance and not (receiver.ref.cls and what is What.MODULE):
        return own_method(run, receiver, name, node, positional, keywords, state)
    if what is What.TENSOR or (what is What.UNKNOWN and receiver.places and receiver.places != UNKNOWN_PLACES and receiver.ref is None):
        return tensor_method(run, receiver, name, receiver_node, node, positional, keywords, state)
    if what is What.BATCH:
        return batch_method(run, receiver, name, node, positional, keywords)
    if what is What.ARRAY:
        return SCALAR_VALUE if name in ("tolist", "item", "sum", "mean", "max", "min") and not node.args else receiver
    if what is What.UNKNOWN:
        if name in MOVES:
            moved = move_target(run, receiver, name, node, positional, keywords)
            return Value(What.UNKNOWN, moved) if moved is not None else UNKNOWN_VALUE
        if name in TENSOR_METHODS and name not in MODULE_SELF_METHODS and name not in ("cpu", "type"):
            # a method NumPy arrays share (`x.max()`, `x.transpose(1, 0)`) shows nothing of what x is
            return Value(What.TENSOR, UNKNOWN_PLACES) if name in TENSOR_ONLY_METHODS else UNKNOWN_VALUE
        if name in NON_TENSOR_RESULTS:
            return SCALAR_VALUE
        forget_modules(run, positional, keywords, state)
        return UNKNOWN_VALUE
    if what is What.LOADER or what is What.DEVICE:
        return UNKNOWN_VALUE
    if what is What.SCALAR:
        return SCALAR_VALUE if name not in ("items", "values", "get", "pop") else UNKNOWN_VALUE
    return UNKNOWN_VALUE


def forget_modules(run, positional: list[Value], keywords: dict, state: dict) -> None:
    """A module passed to a call the analysis does not follow may come back
    moved (``accelerator.prepare(model)``, ``load_checkpoint(model, ...)``)."""
    for value in (*positional, *keywords.values()):
        if value.what is What.MODULE and isinstance(value.parts, frozenset) and value.places != UNKNOWN_PLACES:
            move_in_place(run, value, value.but(places=UNKNOWN_PLACES), None, state)


def move_target(run, receiver: Value, name: str, node: ast.Call, positional: list[Value], keywords: dict) -> frozenset | None:
    """Where ``.to(...)`` / ``.cuda()`` / ``.cpu()`` put the receiver; None for
    ``.to(dtype)``, which does not move it."""
    if name == "cpu":
        return frozenset({(HOST, node)})
    if name == "cuda":
        device = positional[0] if positional else keywords.get("device")
        if device is not None and device.what is What.DEVICE:
            return frozenset((p, node) for p, _ in device.places)
        return frozenset({(Device(None), node)})
    device = keywords.get("device")
    if device is None and node.args:
        arg = node.args[0]
        device = positional[0]
        if type(arg) is ast.Constant and type(arg.value) is int:
            return frozenset({(Device(None), node)})
        if device.what is What.UNKNOWN and (device.ref is None or type(device.ref) is str and device.ref not in DTYPES):
            # `.to(DEVICE)` with DEVICE imported or unknown: its name says what it is
            chain = chain_of(arg)
            if chain is not None and DEVICE_NAME_PATTERN.fullmatch(chain.rsplit(".", 1)[-1]):
                return frozenset({(Device(chain, run.flow.scope_home(run.scope, root_of(chain))), node)})
            if chain is not None and "dtype" in chain.rsplit(".", 1)[-1].lower():
                return None
    if device is None:
        return None  # .to(dtype=...), .to(memory_format=...)
    return run.target_places(device, node)


def module_method(run, module: Value, name: str, receiver_node: ast.AST, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
    if name in MOVES:
        moved = move_target(run, module, name, node, positional, keywords)
        if moved is None:
            return module
        result = module.but(places=moved)
        move_in_place(run, module, result, receiver_node, state)
        return result
    if name in MODULE_SELF_METHODS:
        return module
    chain = chain_of(receiver_node)
    if name in ("register_buffer", "register_parameter", "add_module") and chain is not None and node.args and type(node.args[0]) is ast.Constant and isinstance(node.args[0].value, str):
        given = positional[1] if len(positional) > 1 else keywords.get("tensor", keywords.get("param", keywords.get("module")))
        if given is None or given is SCALAR_VALUE:
            value = SCALAR_VALUE  # register_buffer("x", None)
        else:
            value = Value(What.MODULE if name == "add_module" else What.TENSOR, module.places, flags=FOLLOWS_MODULE)
        state[f"{chain}.{node.args[0].value}"] = value
        run._dotted_roots.add(root_of(chain))
        return SCALAR_VALUE
    if name in ("parameters", "buffers"):
        return Value(What.BATCH, module.places, Parts(Value(What.TENSOR, module.places, flags=FOLLOWS_MODULE)))
    if name in ("named_parameters", "named_buffers", "state_dict"):
        tensor = Value(What.TENSOR, module.places, flags=FOLLOWS_MODULE)
        pair = container_value([SCALAR_VALUE, tensor], ((0, SCALAR_VALUE), (1, tensor)), UNKNOWN_VALUE)
        return Value(What.BATCH if name == "state_dict" else What.UNKNOWN, module.places, Parts(tensor if name == "state_dict" else pair))
    if name == "forward" or name == "generate" and (type(module.ref) is not Instance or run.flow.classes.method_of(module.ref.cls, name) is None):
        # model.forward(x); a language model's generate() runs its forward on what it is given
        return call_module(run, module, receiver_node, node, state)
    if type(module.ref) is Instance:
        return own_method(run, module, name, node, positional, keywords, state)
    return UNKNOWN_VALUE


def own_method(run, receiver: Value, name: str, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
    """``obj.name(...)`` for an instance of a class of this file: the call is
    noted, inlined from ``__init__`` on its own instance, else its summary."""
    function = run.flow.classes.method_of(receiver.ref.cls, name)
    if function is None:
        return UNKNOWN_VALUE
    if run.record:
        run.note_call(node, positional, keywords, function, True)
    if not run.summaries:
        return UNKNOWN_VALUE
    if run.in_init and receiver.ref == Instance(run.scope.cls) and run.depth < MAX_INLINE_DEPTH:
        inlined = run.flow.inline(run, function, node, positional, keywords, state)
        if inlined is not None:
            return inlined
    return run.flow.apply_summary(run, function, node, positional, keywords, receiver, state)


def move_in_place(run, module: Value, moved: Value, receiver_node: ast.AST, state: dict) -> None:
    """Modules move in place: every name holding the same object moves,
    and so do their submodules (``model.fc``: forgotten, to be read again
    through the moved model)."""
    identity = module.parts if isinstance(module.parts, frozenset) else frozenset()
    chain = chain_of(receiver_node) if receiver_node is not None else None
    moved_keys = []
    if chain is not None and (chain in state or type(receiver_node) is ast.Name):
        if not (run.scope.self_name and chain == run.scope.self_name):
            state[chain] = moved
            moved_keys.append(chain)
    if identity:
        for key, value in list(state.items()):
            if value.what is What.MODULE and isinstance(value.parts, frozenset) and value.parts & identity:
                state[key] = value.but(places=moved.places)
                moved_keys.append(key)
    for key in moved_keys:
        if root_of(key) in run._dotted_roots:
            run.kill(key, state)


def tensor_method(run, tensor: Value, name: str, receiver_node: ast.AST, node: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value:
    what = What.TENSOR if tensor.what is What.TENSOR else What.UNKNOWN
    if name in MOVES:
        moved = move_target(run, tensor, name, node, positional, keywords)
        return Value(what, moved if moved is not None else tensor.places, flags=tensor.flags & ZERO_DIM)
    if name == "type_as":
        other = positional[0] if positional else None
        if other is not None and other.what in TENSORISH and other.places:
            return Value(what, frozenset((p, node) for p, _ in other.places), flags=tensor.flags & ZERO_DIM)
        return Value(what, UNKNOWN_PLACES)
    if name == "type":
        return retyped(run, tensor, node, positional, keywords)
    if name == "numpy":
        if run.record:
            sinks.numpy_read(run, node, receiver_node, tensor, state)
        return ARRAY_VALUE
    if name in NON_TENSOR_RESULTS:
        return SCALAR_VALUE
    if name.startswith("new_"):
        if "device" in keywords:
            return run.placed(node, keywords["device"])
        return Value(What.TENSOR, tensor.places)
    if name in COMBINING_METHODS:
        operands = [(receiver_node, tensor)] + list(zip(node.args, positional))
        operands += [(k.value, keywords[k.arg]) for k in node.keywords if k.arg not in ("dim", "out", "keepdim", "dtype", None)]
        result = sinks.combine(run, node, operands, state)
        return result if result.places else Value(what, tensor.places)
    if name in REDUCTIONS and not node.args and not node.keywords:
        return Value(what, tensor.places, flags=ZERO_DIM if what is What.TENSOR else 0)
    if name in ("expand_as", "view_as", "reshape_as", "copy_", "resize_as_"):
        return Value(what, tensor.places, flags=tensor.flags & ZERO_DIM if name == "copy_" else 0)
    if name in TENSOR_METHODS or name.endswith("_"):
        # what an unknown value gives through a method NumPy arrays share (`x.reshape(-1)`) is as unknown
        shown = What.TENSOR if what is What.TENSOR or name in TENSOR_ONLY_METHODS or name.endswith("_") else What.UNKNOWN
        return Value(shown, tensor.places, flags=tensor.flags & ZERO_DIM if name in ("float", "double", "half", "long", "int", "bool", "detach", "clone", "contiguous", "abs", "neg", "sqrt", "exp", "log") else 0)
    return Value(What.UNKNOWN, tensor.places) if tensor.what is What.TENSOR else UNKNOWN_VALUE


def retyped(run, tensor: Value, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
    """``t.type(other.type())`` follows ``other``; ``t.type(torch.cuda.FloatTensor)`` moves."""
    if not node.args:
        return SCALAR_VALUE if "dtype" not in keywords else Value(What.TENSOR, tensor.places)
    arg = node.args[0]
    value = positional[0]
    if type(arg) is ast.Call and type(arg.func) is ast.Attribute and arg.func.attr == "type" and not arg.args:
        other = run.values.get(arg.func.value) if run.record else None
        if other is not None and other.what in TENSORISH and other.places:
            return Value(What.TENSOR, frozenset((p, node) for p, _ in other.places))
        return Value(What.TENSOR, UNKNOWN_PLACES)
    text = arg.value if type(arg) is ast.Constant and isinstance(arg.value, str) else value.ref if type(value.ref) is str else None
    if text is not None:
        if text.startswith("torch.cuda."):
            return Value(What.TENSOR, frozenset({(Device(None), node)}))
        if text in LEGACY_HOST_TYPES:
            return Value(What.TENSOR, frozenset({(HOST, node)}))
        if text in DTYPES:
            return Value(What.TENSOR, tensor.places)
    return Value(What.TENSOR, UNKNOWN_PLACES)


def batch_method(run, batch: Value, name: str, node: ast.Call, positional: list[Value], keywords: dict) -> Value:
    parts = batch.parts if isinstance(batch.parts, Parts) else Parts(UNKNOWN_VALUE)
    if name == "items":
        pair = container_value([SCALAR_VALUE, parts.elem], ((0, SCALAR_VALUE), (1, parts.elem)), UNKNOWN_VALUE)
        return Value(What.UNKNOWN, NO_PLACES, Parts(pair))
    if name == "values":
        return Value(What.UNKNOWN, NO_PLACES, Parts(parts.elem))
    if name == "keys":
        return SCALAR_VALUE
    if name in ("get", "pop") and node.args and type(node.args[0]) is ast.Constant:
        for key, value in parts.items:
            if key == node.args[0].value:
                return value
        return parts.elem if parts.elem is not NOTHING else UNKNOWN_VALUE
    if name in MOVES:  # a batch object with .to(): torch_geometric's Batch, a tokenizer's BatchEncoding
        moved = move_target(run, batch, name, node, positional, keywords)
        if moved is None:
            return batch
        element = Value(What.TENSOR, moved)
        return Value(What.BATCH, moved, Parts(element, tuple((k, element) for k, _ in parts.items)), batch.ref if batch.ref == ENCODING else None)
    return UNKNOWN_VALUE
