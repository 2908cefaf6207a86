"""The index of a file: one pass over its statements (scopes, classes, bindings, calls)."""

from __future__ import annotations

import ast
import bisect
import re
from fixdev.engine.source import line_ends
from fixdev.analysis.flow.syntax import chain_of, imported_name, ast_statements, ast_walk
from fixdev.analysis.flow.vocabulary import DEVICE_PROPERTY_BASES, MODULE_ONLY_SELF_CALLS, NN_PARAMETERS, PARAM_FREE_LAYERS, BUILTIN_NAMES, is_model_builder, is_torch_module_class


# ---------------------------------------------------------------------------
# The index: one pass over the statements
# ---------------------------------------------------------------------------

FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPE_STATEMENTS = (*FUNCTION_DEFS, ast.ClassDef)  # statements whose bodies are a scope of their own
_WALRUS_NAME = re.compile(r"([^\W\d]\w*)\s*\Z")  # the name just before a `:=`
_DEFAULT_DEVICE_CALL = re.compile(r"\bset_default_(?:device|tensor_type)\s*\(")


class Scope:
    """A module, function or class body, and the names it binds."""

    __slots__ = ("node", "kind", "outer", "parent", "cls", "counts", "declared", "imports", "stars", "locals", "start", "end", "self_name", "defs")

    def __init__(self, node: ast.AST, kind: str, parent: "Scope | None") -> None:
        self.node = node
        self.kind = kind  # "module" | "function" | "class"
        self.parent = parent  # the scope the node sits in
        # where free names are looked up: the nearest enclosing function or module (class bodies do not enclose)
        self.outer = None if parent is None else parent if parent.kind != "class" else parent.outer
        self.cls = parent.node if parent is not None and parent.kind == "class" and kind == "function" else None
        self.counts: dict[str, int] = {}
        self.declared: set[str] = set()  # global / nonlocal
        self.imports: dict[str, str] = {}
        self.stars: list[str] = []
        self.defs: dict[str, ast.AST] = {}  # names bound by def or class statements
        self.locals: frozenset = frozenset()
        self.start = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        self.end = (getattr(node, "end_lineno", 1 << 30), getattr(node, "end_col_offset", 0))
        self.self_name: str | None = None

    def bind(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    @property
    def is_init(self) -> bool:
        return self.cls is not None and self.node.name == "__init__"

    def home_of(self, root: str) -> ast.AST | None:
        """The scope node whose binding ``root`` refers to from this scope."""
        if self.cls is not None and root == self.self_name:
            return self.cls
        current: Scope | None = self
        while current is not None:
            if root in current.locals:
                return current.node
            current = current.outer
        return None

    def contains(self, position: tuple[int, int]) -> bool:
        return self.start <= position < self.end


# The text of a call `_acts_as_module` takes for evidence: `.register_buffer(`, `.parameters(`, `nn.Parameter(`.
_MODULE_BODY = re.compile(r"\.(?:%s)\s*\(|Parameter\s*\(" % "|".join(sorted(MODULE_ONLY_SELF_CALLS)))


class ClassInfo:
    __slots__ = ("node", "scope", "methods", "stores", "is_module", "bases", "local_bases", "owns", "own_text", "param_free", "device_property", "kept_parameters")

    def __init__(self, node: ast.ClassDef, scope: Scope) -> None:
        self.node = node
        self.scope = scope  # the scope the class statement sits in
        self.methods: dict[str, ast.AST] = {}
        self.stores: dict[str, set[str]] = {}  # self.X -> methods assigning it
        self.is_module = False
        self.bases: list[str] = []  # qualified names of the bases
        self.local_bases: list[ast.ClassDef] = []
        self.owns = False  # evidently owns parameters or buffers
        self.own_text: str | None = None  # names the module's own device, in its methods
        self.param_free = False
        self.device_property = False
        self.kept_parameters: set[str] = set()  # __init__ parameters it keeps as they are (self.inner = inner)


class FileIndex:
    """Scopes, bindings, classes and imports, from one pass over the statements."""

    def __init__(self, tree: ast.Module, source: str | None, module_base=None) -> None:
        # module_base(qualified name) -> bool: whether a base another file of
        # the run defines is an nn.Module class (codemods.project), or None
        self.module_base = module_base
        self.tree = tree
        self.module = Scope(tree, "module", None)
        self.scopes: dict[ast.AST, Scope] = {tree: self.module}
        self.classes: dict[ast.ClassDef, ClassInfo] = {}
        self.default_device_set = False
        self._positions: list[tuple[tuple[int, int], Scope]] = []
        self.definitions: list[ast.AST] = []  # every def and class statement
        self._scan(tree.body, self.module)
        self._positions.sort(key=lambda item: item[0])
        self._starts = [position for position, _ in self._positions]
        if source is None or ":=" in source:
            self._walrus(source)
        for scope in self.scopes.values():
            scope.locals = frozenset(scope.counts) - scope.declared
        # what `_acts_as_module` looks for, by the text: most files have none of it
        self._module_hint = source is None or _MODULE_BODY.search(source) is not None
        self._resolve_classes()
        if source is None:
            self.default_device_set = self._sets_default_device()
        else:  # in a comment or string too: then less is known, nothing is wrong
            self.default_device_set = "set_default_" in source and _DEFAULT_DEVICE_CALL.search(source) is not None

    # -- the pass ---------------------------------------------------------------------

    def _scan(self, statements: list[ast.stmt], scope: Scope) -> None:
        for node in statements:
            kind = type(node)
            if kind in FUNCTION_DEFS:
                scope.bind(node.name)
                scope.defs[node.name] = node
                self.definitions.append(node)
                self._function(node, scope)
            elif kind is ast.ClassDef:
                scope.bind(node.name)
                scope.defs[node.name] = node
                self.definitions.append(node)
                inner = self._new_scope(node, "class", scope)
                info = self.classes[node] = ClassInfo(node, scope)
                self._scan(node.body, inner)
                for child in node.body:
                    if type(child) in FUNCTION_DEFS:
                        info.methods[child.name] = child
            elif kind is ast.Assign:
                for target in node.targets:
                    self._target(target, scope)
            elif kind is ast.AugAssign or kind is ast.AnnAssign:
                self._target(node.target, scope)
            elif kind is ast.For or kind is ast.AsyncFor:
                self._target(node.target, scope)
                self._scan(node.body, scope)
                self._scan(node.orelse, scope)
            elif kind is ast.While or kind is ast.If:
                self._scan(node.body, scope)
                self._scan(node.orelse, scope)
            elif kind is ast.With or kind is ast.AsyncWith:
                for item in node.items:
                    if item.optional_vars is not None:
                        self._target(item.optional_vars, scope)
                self._scan(node.body, scope)
            elif kind is ast.Try or kind.__name__ == "TryStar":
                self._scan(node.body, scope)
                for handler in node.handlers:
                    if handler.name:
                        scope.bind(handler.name)
                    self._scan(handler.body, scope)
                self._scan(node.orelse, scope)
                self._scan(node.finalbody, scope)
            elif kind is ast.Import:
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    scope.bind(name)
                    scope.imports[name] = alias.name if alias.asname else name
            elif kind is ast.ImportFrom:
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name == "*":
                        scope.stars.append(module)
                        continue
                    name = alias.asname or alias.name
                    scope.bind(name)
                    scope.imports[name] = imported_name(node, alias.name)
            elif kind is ast.Global or kind is ast.Nonlocal:
                scope.declared.update(node.names)
            elif kind is ast.Delete:
                for target in node.targets:
                    self._target(target, scope)
            elif kind is ast.Match:
                for case in node.cases:
                    for sub in ast_walk(case.pattern):
                        name = getattr(sub, "name", None) or getattr(sub, "rest", None)
                        if isinstance(name, str):
                            scope.bind(name)
                    self._scan(case.body, scope)

    def _new_scope(self, node: ast.AST, kind: str, parent: Scope) -> Scope:
        scope = self.scopes[node] = Scope(node, kind, parent)
        self._positions.append((scope.start, scope))
        return scope

    def _function(self, node: ast.AST, parent: Scope) -> None:
        scope = self._new_scope(node, "function", parent)
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                scope.bind(arg.arg)
        if scope.cls is not None:
            positional = [*args.posonlyargs, *args.args]
            decorators = {chain_of(d) for d in node.decorator_list}
            if positional and not decorators & {"staticmethod", "classmethod"}:
                scope.self_name = positional[0].arg
        self._scan(node.body, scope)
        if scope.cls is not None and scope.self_name:
            stores = self.classes[scope.cls].stores
            for attr in self._self_stores(node, scope.self_name):
                stores.setdefault(attr, set()).add(node.name)

    def _target(self, target: ast.AST, scope: Scope) -> None:
        kind = type(target)
        if kind is ast.Name:
            scope.bind(target.id)
        elif kind is ast.Tuple or kind is ast.List:
            for element in target.elts:
                self._target(element, scope)
        elif kind is ast.Starred:
            self._target(target.value, scope)

    def _self_stores(self, function: ast.AST, self_name: str) -> set[str]:
        """Attributes ``self.X`` a method assigns (directly, in its own body)."""
        stores = set()
        for node in ast_statements(function.body, enter=lambda statement: type(statement) not in _SCOPE_STATEMENTS):
            kind = type(node)
            if kind in _SCOPE_STATEMENTS:
                continue
            targets = ()
            if kind is ast.Assign:
                targets = node.targets
            elif kind is ast.AugAssign or kind is ast.AnnAssign:
                targets = (node.target,)
            elif kind is ast.For or kind is ast.AsyncFor:
                targets = (node.target,)
            for target in targets:
                for sub in ast_walk(target):
                    if type(sub) is ast.Attribute and type(sub.value) is ast.Name and sub.value.id == self_name:
                        stores.add(sub.attr)
            if kind is ast.Expr and type(node.value) is ast.Call:
                call = node.value
                if type(call.func) is ast.Attribute and call.func.attr in ("register_buffer", "register_parameter", "add_module"):
                    if call.args and type(call.args[0]) is ast.Constant and isinstance(call.args[0].value, str):
                        stores.add(call.args[0].value)
        return stores

    def _walrus(self, source: str | None) -> None:
        """``(x := ...)`` binds in the enclosing function, even inside a
        comprehension. Found in the text when there is one (an occurrence in
        a string only makes a name local that is not: less known, never wrong)."""
        if source is not None:
            starts = None
            at = source.find(":=")
            while at >= 0:
                match = _WALRUS_NAME.search(source, max(0, at - 200), at)
                if match is not None:
                    if starts is None:
                        starts = [0, *line_ends(source)]
                    line = bisect.bisect_right(starts, match.start()) - 1
                    self._bind_walrus(match.group(1), (line + 1, len(source[starts[line] : match.start()].encode("utf-8"))))
                at = source.find(":=", at + 2)
            return
        for node in ast_walk(self.tree):
            if type(node) is ast.NamedExpr and type(node.target) is ast.Name:
                self._bind_walrus(node.target.id, (node.lineno, node.col_offset))

    def _bind_walrus(self, name: str, position: tuple[int, int]) -> None:
        scope = self.scope_at(position)
        while scope.kind == "class":
            scope = scope.parent
        scope.bind(name)

    # -- where a node is --------------------------------------------------------------

    def scope_at(self, position: tuple[int, int]) -> Scope:
        """The innermost scope whose span holds ``position``."""
        i = bisect.bisect_right(self._starts, position) - 1
        if i < 0:
            return self.module
        scope: Scope | None = self._positions[i][1]
        while scope is not None and scope is not self.module and not scope.contains(position):
            scope = scope.parent
        return scope or self.module

    # -- static names, for facts needed before any interpretation ---------------------

    def static_name(self, node: ast.AST, scope: Scope) -> str | None:
        """The qualified name an expression refers to through imports, or the
        local class it names (``"<local>.Net"``), without interpretation."""
        chain = chain_of(node)
        if chain is None:
            return None
        root, _, rest = chain.partition(".")
        current: Scope | None = scope
        while current is not None:
            if root in current.counts and root not in current.declared:
                if current.counts[root] == 1 and root in current.imports:
                    base = current.imports[root]
                    return f"{base}.{rest}" if rest else base
                return chain
            current = current.outer
        if root in BUILTIN_NAMES:
            return None
        if root == "torch" and self.module.stars:
            return chain  # `from common import *` of a module that imports torch
        for star in self.module.stars:
            if star.startswith("torch"):
                return f"{star}.{chain}"
        return None

    def local_class(self, node: ast.AST, scope: Scope) -> ast.ClassDef | None:
        """The class of this file a name refers to (bound once, by its class statement)."""
        if type(node) is not ast.Name:
            return None
        current: Scope | None = scope
        while current is not None:
            if node.id in current.counts and node.id not in current.declared:
                found = current.defs.get(node.id) if current.counts[node.id] == 1 else None
                return found if type(found) is ast.ClassDef else None
            current = current.outer
        return None

    def _resolve_classes(self) -> None:
        for info in self.classes.values():
            for base in info.node.bases:
                local = self.local_class(base, info.scope)
                if local is not None:
                    info.local_bases.append(local)
                else:
                    name = self.static_name(base, info.scope)
                    if name:
                        info.bases.append(name)
        changed = True
        while changed:  # a class may derive from a module class defined later
            changed = False
            for info in self.classes.values():
                if info.is_module:
                    continue
                if any(is_torch_module_class(b) for b in info.bases) or any(self.classes[b].is_module for b in info.local_bases if b in self.classes):
                    info.is_module = True
                    changed = True
        if self.module_base is not None:  # asked last, and only for classes not known to be modules
            for info in self.classes.values():
                if not info.is_module and any(self.module_base(b) for b in info.bases):
                    info.is_module = True
                    changed = True
        if self._module_hint:
            for info in self.classes.values():
                # a base imported from a file not in the run, or computed: the class's own body may show it
                if not info.is_module and info.node.bases and not info.local_bases and self._acts_as_module(info):
                    info.is_module = changed = True
        while changed:
            changed = False
            for info in self.classes.values():
                if not info.is_module and any(self.classes[b].is_module for b in info.local_bases if b in self.classes):
                    info.is_module = changed = True
        for info in self.classes.values():
            if info.is_module:
                self._ownership(info)

    def _acts_as_module(self, info: ClassInfo) -> bool:
        """Whether a class's own methods show it is an ``nn.Module`` whatever
        its (imported) base: they call a method only modules have on
        ``self`` that the class does not define (``self.register_buffer``,
        ``self.register_parameter``, ``self.add_module``, ``self.parameters()``,
        ``self.named_parameters()``, ``self.modules()``, …), or store an
        ``nn.Parameter`` on ``self``. Defining ``forward`` and calling
        ``super().__init__()`` is no evidence: plain classes of other
        frameworks (pipelines, autograd functions, layers of their own) do both."""
        for method in info.methods.values():
            args = getattr(method, "args", None)
            if args is None or not args.args:
                continue
            me = args.args[0].arg
            for node in ast.walk(method):
                kind = type(node)
                if kind is ast.Call:
                    func = node.func
                    if type(func) is ast.Attribute and func.attr in MODULE_ONLY_SELF_CALLS and type(func.value) is ast.Name and func.value.id == me and func.attr not in info.methods:
                        return True
                elif kind is ast.Assign and type(node.value) is ast.Call:
                    if any(type(t) is ast.Attribute and type(t.value) is ast.Name and t.value.id == me for t in node.targets):
                        if self.static_name(node.value.func, self.scopes.get(method, info.scope)) in NN_PARAMETERS:
                            return True
        return False

    def _ownership(self, info: ClassInfo) -> None:
        """Whether a module class evidently owns parameters or buffers, and the
        text that names its device inside its methods."""
        seen: set[ast.ClassDef] = set()

        def inherited(info: ClassInfo, attribute: str):
            for base in info.local_bases:
                base_info = self.classes.get(base)
                if base_info is not None and base not in seen:
                    seen.add(base)
                    if base_info.own_text is None and not base_info.owns:
                        self._ownership(base_info)
                    yield getattr(base_info, attribute)

        info.device_property = any(b in DEVICE_PROPERTY_BASES for b in info.bases) or any(inherited(info, "device_property"))
        layer_bases = [b for b in info.bases if is_torch_module_class(b) and b != "torch.nn.Module"]
        owns = bool(layer_bases) and not all(b.split(".")[-1] in PARAM_FREE_LAYERS for b in layer_bases)
        own_text = None
        anything_stored = bool(info.stores)
        init = info.methods.get("__init__")
        if init is not None and self.scopes[init].self_name:
            info.kept_parameters = self._kept_parameters(init, self.scopes[init].self_name)
        for method in info.methods.values():
            scope = self.scopes[method]
            self_name = scope.self_name
            if not self_name:
                continue
            for statement in method.body if method is init else ():
                attr = self._direct_parameter(statement, self_name, scope)
                if attr is not None and own_text is None:
                    own_text = f"{self_name}.{attr}.device"
            if not owns:
                owns = self._stores_module(method, self_name, scope)
        owns = owns or any(inherited(info, "owns"))
        info.owns = owns or info.device_property
        if info.device_property:
            info.own_text = "self.device"
        elif own_text is not None:
            info.own_text = own_text.replace(f"{self.scopes[init].self_name}.", "self.", 1) if init else own_text
        elif info.owns:
            info.own_text = "next(self.parameters()).device"
        # a base another file defines may hold parameters: not known to be free of them
        foreign = any(not is_torch_module_class(b) for b in info.bases)
        info.param_free = not info.owns and not anything_stored and not layer_bases and not info.local_bases and not foreign

    @staticmethod
    def _kept_parameters(init: ast.AST, self_name: str) -> set[str]:
        """Parameters ``__init__`` stores as they are: ``self.inner = inner``."""
        args = init.args
        names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} - {self_name}
        kept = set()
        for node in ast_statements(init.body):
            if type(node) is ast.Assign and type(node.value) is ast.Name and node.value.id in names:
                if any(type(t) is ast.Attribute and chain_of(t.value) == self_name for t in node.targets):
                    kept.add(node.value.id)
        return kept

    def _direct_parameter(self, statement: ast.stmt, self_name: str, scope: Scope) -> str | None:
        """``self.w = nn.Parameter(...)`` or ``self.register_buffer("w", <tensor>)``
        run unconditionally in ``__init__``: the attribute name."""
        if type(statement) is ast.Assign and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
            if type(target) is ast.Attribute and type(target.value) is ast.Name and target.value.id == self_name and type(value) is ast.Call:
                if self.static_name(value.func, scope) in NN_PARAMETERS:
                    return target.attr
        if type(statement) is ast.Expr and type(statement.value) is ast.Call:
            call = statement.value
            func = call.func
            if type(func) is ast.Attribute and func.attr in ("register_buffer", "register_parameter") and chain_of(func.value) == self_name:
                if len(call.args) >= 2 and type(call.args[0]) is ast.Constant and isinstance(call.args[0].value, str):
                    if not (type(call.args[1]) is ast.Constant and call.args[1].value is None):
                        return call.args[0].value
        return None

    def _stores_module(self, method: ast.AST, self_name: str, scope: Scope) -> bool:
        for node in ast_walk(method):
            if type(node) is ast.Call:
                func = node.func
                if type(func) is ast.Attribute and func.attr in ("register_buffer", "register_parameter", "add_module") and chain_of(func.value) == self_name:
                    return True
            elif type(node) is ast.Assign and type(node.value) is ast.Call:
                if not any(type(t) is ast.Attribute and chain_of(t.value) == self_name for t in node.targets):
                    continue
                name = self.static_name(node.value.func, scope) or ""
                if name in NN_PARAMETERS or is_model_builder(name, node.value):
                    return True
                if is_torch_module_class(name) and name.split(".")[-1] not in PARAM_FREE_LAYERS:
                    return True
                local = self.local_class(node.value.func, scope)
                if local is not None and local in self.classes and self.classes[local].is_module:
                    return True
        return False

    def _sets_default_device(self) -> bool:
        for node in ast_walk(self.tree):
            if type(node) is ast.Call:
                chain = chain_of(node.func) or ""
                if chain.rsplit(".", 1)[-1] in ("set_default_device", "set_default_tensor_type"):
                    return True
        return False
