"""Class facts: what ``self.X`` holds after ``__init__`` (and the helpers only
it calls), where a module's own parameters live inside its methods, the
methods a class has through the file's base classes. ``FileFlow`` owns one
(``flow.classes``); the interpreter asks it through the flow."""

from __future__ import annotations

import ast
import weakref
from fixdev.analysis.flow.lattice import Device, FOLLOWS_MODULE, Instance, NO_PLACES, PARAM_FREE, SameAs, UNKNOWN_PLACES, UNKNOWN_VALUE, Value, What, join
from fixdev.analysis.flow.syntax import chain_of, root_of
from fixdev.analysis.flow.vocabulary import DEVICE_OBJECT

# Methods a class overrides to move what ``Module.to`` does not see (or, in a
# plain class, to move itself at all): ``self.a = self.a.to(device)``.
OVERRIDE_MOVERS = ("to",)


class OwnMoves:
    """A class's own ``to(self, device)``: the attributes it moves one by one
    (``self.a = self.a.to(device)``, all with the same arguments, which are
    the method's own parameters), in the method's top-level statements."""

    __slots__ = ("method", "moves", "arguments")

    def __init__(self, method: ast.FunctionDef, moves: dict[str, ast.Assign], arguments: str) -> None:
        self.method = method
        self.moves = moves  # attribute -> the statement that moves it
        self.arguments = arguments  # ``device``: the text of the moves' arguments


def own_moves(cls: ast.ClassDef) -> OwnMoves | None:
    """The ``to`` override of ``cls`` and the attributes it moves, or None
    where there is none or its moves do not all pass the method's own
    parameters the same way (then what it means is not sure)."""
    method = next((s for s in cls.body if type(s) is ast.FunctionDef and s.name in OVERRIDE_MOVERS and not s.decorator_list), None)
    if method is None:
        return None
    args = method.args
    positional = [*args.posonlyargs, *args.args]
    if not positional:
        return None
    self_name = positional[0].arg
    own = {a.arg for a in (*positional[1:], *args.kwonlyargs)} | {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    moves: dict[str, ast.Assign] = {}
    spelled = set()
    for statement in method.body:
        if type(statement) is not ast.Assign or len(statement.targets) != 1:
            continue
        target, value = statement.targets[0], statement.value
        if not (type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == self_name):
            continue
        if not (type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr == method.name):
            continue
        receiver = value.func.value
        if not (type(receiver) is ast.Attribute and receiver.attr == target.attr and type(receiver.value) is ast.Name and receiver.value.id == self_name):
            continue
        passed = [a.value if type(a) is ast.Starred else a for a in value.args] + [k.value for k in value.keywords]
        if not passed or not all(type(a) is ast.Name and a.id in own for a in passed):
            return None  # moved somewhere the caller does not choose: not a plain override
        spelled.add(ast.dump(ast.Call(ast.Name("f"), value.args, value.keywords)))
        moves[target.attr] = statement
    if not moves or len(spelled) != 1:
        return None
    first = next(iter(moves.values())).value
    arguments = ", ".join([ast.unparse(a) for a in first.args] + [ast.unparse(k) for k in first.keywords])
    return OwnMoves(method, moves, arguments)



class ClassFacts:
    """The facts of one file's classes, computed when first asked, once."""

    def __init__(self, flow) -> None:  # flow: the file's FileFlow (facts.py, which imports this module)
        # Weakly: the flow owns this object, and a strong reference back would
        # make a cycle (flow -> classes -> flow) that only the cycle collector
        # frees; a file's analysis is freed by reference counting when done.
        self.flow = weakref.proxy(flow)

    def ancestors(self, cls: ast.ClassDef) -> set:
        """The classes of this file ``cls`` derives from."""
        key = ("ancestors", cls)
        found = self.flow.cache.get(key)
        if found is None:
            found = set()
            stack = list(self.flow.index.classes[cls].local_bases) if cls in self.flow.index.classes else []
            while stack:
                base = stack.pop()
                if base not in found:
                    found.add(base)
                    stack.extend(self.flow.index.classes[base].local_bases if base in self.flow.index.classes else ())
            self.flow.cache[key] = found
        return found

    def self_value(self, cls: ast.ClassDef) -> Value:
        info = self.flow.index.classes.get(cls)
        if info is None or not info.is_module:
            return Value(What.UNKNOWN, NO_PLACES, None, Instance(cls))
        return Value(What.MODULE, self.self_places(cls), frozenset({cls}), Instance(cls), PARAM_FREE if info.param_free else 0)

    def self_places(self, cls: ast.ClassDef) -> frozenset:
        """Where a module's submodules, parameters and buffers live, inside its
        methods: on the module's device, named by a parameter it owns."""
        info = self.flow.index.classes[cls]
        if info.param_free:
            return UNKNOWN_PLACES
        return frozenset({(Device(info.own_text, cls if info.own_text else None), None)})

    def method_of(self, cls: ast.ClassDef, name: str, seen: set | None = None) -> ast.AST | None:
        info = self.flow.index.classes.get(cls)
        if info is None:
            return None
        method = info.methods.get(name)
        if method is not None:
            decorators = {chain_of(d) for d in method.decorator_list}
            return None if decorators & {"property", "classmethod"} or name in info.stores else method
        seen = seen or set()
        for base in info.local_bases:
            if base not in seen:
                seen.add(base)
                found = self.method_of(base, name, seen)
                if found is not None:
                    return found
        return None

    def attributes(self, cls: ast.ClassDef) -> dict[str, Value]:
        """``self.X`` after ``__init__`` (and the helpers it calls), joined with
        unknown for attributes other methods assign too."""

        def make() -> dict[str, Value]:
            info = self.flow.index.classes[cls]
            result = dict(self.base_attributes(cls))
            init = info.methods.get("__init__")
            if init is not None:
                scope = self.flow.index.scopes[init]
                run = self.flow.symbolic(scope)
                if run is not None and scope.self_name:
                    prefix = scope.self_name + "."
                    for key, value in (run.exits or {}).items():
                        if key.startswith(prefix) and "." not in key[len(prefix) :]:
                            result[key[len(prefix) :]] = value
                    name_devices_by_attribute(result, init, cls, prefix)
            # helpers only __init__ calls set attributes as __init__ does
            mentions = self.flow.mentions()
            only_from_init = set()
            if mentions is not None and init is not None:
                for name in info.methods:
                    occurrences = [caller for _, caller, dotted in mentions.occurrences.get(name, ()) if dotted]
                    if occurrences and all(caller is not None and caller.node is init for caller in occurrences):
                        only_from_init.add(name)
            # a module's own ``to`` that moves a tensor attribute as
            # ``Module.to`` moves a buffer: the attribute follows the module
            followed = own_moves(cls) if info.is_module else None
            for attr, methods in info.stores.items():
                others = methods - {"__init__"} - only_from_init
                value = result.get(attr)
                if followed is not None and others == {followed.method.name} and attr in followed.moves and value is not None and value.what is What.TENSOR:
                    result[attr] = value.but(places=self.self_places(cls), flags=value.flags | FOLLOWS_MODULE)
                elif others:
                    result[attr] = join(value, UNKNOWN_VALUE)
            # given to the constructor (wherever it lives) and used as a tensor by a method
            for attr in self.flow.evidenced_attributes(cls):
                value = result.get(attr)
                if value is not None and value.what is What.UNKNOWN and value.places and all(type(p) is SameAs for p, _ in value.places):
                    result[attr] = value.but(what=What.TENSOR)
            return result

        result = self.flow.compute(("attrs", cls), make)
        return {} if result is None else result

    def moved_parameter(self, scope, chain: str) -> bool:
        """``chain`` (a name of the function ``scope``, or ``self.X`` of its
        class) is bound only by moves of a parameter of the function binding
        it: ``model = model.to(device)``, ``self.net = net.cuda()`` (in any
        method of the class); never by anything else."""
        if "." in chain:
            root, _, attr = chain.partition(".")
            if "." in attr or scope.cls is None or root != scope.self_name:
                return False
            owner, target = scope.cls, attr
        else:
            if scope.kind != "function":
                return False
            owner, target = scope.node, chain
        key = ("moved-parameter", owner, target)
        found = self.flow.cache.get(key)
        if found is None:
            found = _moved_parameter(owner, target)
            self.flow.cache[key] = found
        return found

    def called_parameter(self, scope, chain: str) -> bool:
        """``chain`` is a parameter of the function ``scope`` that it never
        rebinds and calls (``model(x)``): with ``model.to(device)`` beside,
        a module (a tensor is not callable)."""
        if scope.kind != "function" or "." in chain:
            return False
        key = ("called-parameter", scope.node, chain)
        found = self.flow.cache.get(key)
        if found is None:
            found = _called_parameter(scope.node, chain)
            self.flow.cache[key] = found
        return found

    def base_attributes(self, cls: ast.ClassDef) -> dict[str, Value]:
        result: dict[str, Value] = {}
        for base in self.flow.index.classes[cls].local_bases:
            if base in self.flow.index.classes:
                result.update(self.attributes(base))
        return result

    def instance_attribute(self, run: "Run", owner: Value, attr: str, chain: str | None) -> Value | None:
        """``self.X`` or ``model.X`` for an instance of a class of this file."""
        cls = owner.ref.cls
        info = self.flow.index.classes.get(cls)
        if info is None:
            return None
        is_self = run.scope.cls is cls and chain is not None and root_of(chain) == run.scope.self_name
        if not run.summaries:
            return None
        attributes = self.base_attributes(cls) if (run.in_init and is_self) else self.attributes(cls)
        value = attributes.get(attr)
        if value is None:
            if attr == "device" and info.device_property:  # Lightning's, transformers': a torch.device
                return Value(What.DEVICE, owner.places, ref=DEVICE_OBJECT)
            method = self.method_of(cls, attr)
            return Value(What.UNKNOWN, NO_PLACES, ref=method) if method is not None else None
        if value.flags & FOLLOWS_MODULE and not is_self:
            return value.but(places=owner.places)
        return self.flow.rehome(value, run.scope, chain)


def name_devices_by_attribute(attributes: dict[str, Value], init: ast.AST, cls: ast.ClassDef, prefix: str) -> None:
    """``self.device = device`` in ``__init__``: what ``__init__`` moved with
    ``device`` is, in the other methods, on ``self.device``."""
    names: dict[str, str] = {}
    for attr, value in attributes.items():
        if value.what is What.DEVICE:
            for placement, _ in value.places:
                if type(placement) is Device and placement.text is not None and placement.home is init:
                    names.setdefault(placement.text, prefix + attr)
    if not names:
        return
    for attr, value in list(attributes.items()):
        places = frozenset(
            (Device(names[p.text], cls), o) if type(p) is Device and p.home is init and p.text in names else (p, o)
            for p, o in value.places
        )
        if places != value.places:
            attributes[attr] = value.but(places=places)


def naming(value: Value, chain: str | None) -> str | None:
    """Text naming the device of ``value``, reached as ``chain``."""
    if chain is None:
        return None
    if value.what is What.DEVICE:
        return chain
    if value.what is What.MODULE:
        return f"next({chain}.parameters()).device"
    if value.what in (What.TENSOR, What.UNKNOWN):
        return f"{chain}.device"
    return None


def _moved_parameter(owner: ast.AST, target: str) -> bool:
    """In ``owner`` (a function for a name, a class for ``self.target``), every
    binding of ``target`` is ``p.to(...)`` / ``p.cuda(...)`` of a parameter
    ``p`` of the function holding the binding, and there is one at least."""
    functions = [owner] if not isinstance(owner, ast.ClassDef) else [n for n in owner.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    seen = False
    for function in functions:
        args = function.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        self_name = args.args[0].arg if isinstance(owner, ast.ClassDef) and args.args else None
        for node in ast.walk(function):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if _names(sub, target, self_name):
                            if isinstance(node, ast.AugAssign) or len(targets) != 1 or sub is not t or not _moves_parameter(node.value, params - {self_name}):
                                return False
                            seen = True
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr, ast.Delete)) or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not function):
                bound = [node.target] if isinstance(node, (ast.For, ast.AsyncFor, ast.NamedExpr)) else [i.optional_vars for i in getattr(node, "items", ()) if i.optional_vars is not None] if isinstance(node, (ast.With, ast.AsyncWith)) else list(getattr(node, "targets", ()))
                if any(_names(sub, target, self_name) for b in bound for sub in ast.walk(b)):
                    return False
        if self_name is None and not isinstance(owner, ast.ClassDef) and target in params and not seen:
            return False
    return seen


def _names(node: ast.AST, target: str, self_name: str | None) -> bool:
    if self_name is None:
        return isinstance(node, ast.Name) and node.id == target
    return isinstance(node, ast.Attribute) and node.attr == target and isinstance(node.value, ast.Name) and node.value.id == self_name


def _moves_parameter(value: ast.AST, params: set) -> bool:
    """``p.to(...)``, ``p.cuda(...)`` of a parameter ``p``."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("to", "cuda")
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id in params
        and not (value.func.attr == "to" and not value.args and not any(k.arg == "device" for k in value.keywords))
    )


def _called_parameter(function: ast.AST, name: str) -> bool:
    args = function.args
    if name not in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
        return False
    called = False
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not function:
            inner = node.args
            if name in {a.arg for a in (*inner.posonlyargs, *inner.args, *inner.kwonlyargs)}:
                return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            called = True
    return called
