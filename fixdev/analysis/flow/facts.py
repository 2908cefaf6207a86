"""The device flow of one file (``FileFlow``): lazy runs, summaries, contexts, class facts, and the query API the rules use; and ``Evidence``, what a device error's message says."""

from __future__ import annotations

import ast
import bisect
import warnings
from fixdev.engine import ast_reuse
from fixdev.engine.ast_reuse import remembered
from fixdev.engine.source import CPythonPositions
from fixdev.analysis.flow import arms, calls, carry
from fixdev.analysis.flow.index import Scope, FUNCTION_DEFS, FileIndex
from fixdev.analysis.flow.interpreter import Run
from fixdev.analysis.flow.lattice import MAX_PARTS_DEPTH, ARRAY_VALUE, Device, HOST, Instance, MAYBE_UNBOUND, NOTHING, NO_PLACES, PENDING, Parts, SCALAR_VALUE, SameAs, UNKNOWN, UNKNOWN_PLACES, UNKNOWN_VALUE, Value, What, apart, capped, parts_depth, host_loader, kinds_of, position_of, settled_origins, join
from fixdev.analysis.flow.mentions import Mentions, header_expressions, is_parenthesized
from fixdev.analysis.flow.reach import Reach
from fixdev.analysis.flow.sinks import Sink
from fixdev.analysis.flow.told import Evidence
from fixdev.analysis.flow.syntax import chain_of, root_of, ast_walk
from fixdev.analysis.flow.sources import meets, source_chains
from fixdev.analysis.flow.vocabulary import DATA_LOADERS, DEVICE_NAMES, DEVICE_STRINGS, TRANSPARENT_DECORATORS, BUILTIN_NAMES, TENSOR_EVIDENCE, TENSOR_USE, is_torch_module_class
from fixdev.analysis.flow.classes import ClassFacts, naming
from fixdev.analysis.flow import entries, evidence


class FileFlow:
    """The device flow of one file. ``source`` is the text (or an already
    parsed ``ast.Module``; then ``span``/``node_at`` need ``text=``). A text
    Python cannot parse has no facts: everything is unknown, no sinks."""

    def __init__(self, source: str | ast.Module, text: str | None = None, project=None) -> None:
        # project: what the other files of the run return (codemods.project's
        # view for this file), or None: calls of their functions are unknown;
        # or an Evidence holding that view and what a device error says
        evidence = project if isinstance(project, Evidence) else None
        self.project = evidence.project if evidence is not None else project
        if isinstance(source, ast.Module):
            tree, self.text = source, text
        else:
            tree, self.text = None, source
        self._bom = 1 if self.text is not None and self.text.startswith("\ufeff") else 0
        self.parsed = True
        if tree is None:
            try:
                with warnings.catch_warnings():  # `1()`, "\d": the file's business, not ours to print
                    warnings.simplefilter("ignore", SyntaxWarning)
                    warnings.simplefilter("ignore", DeprecationWarning)
                    tree = ast.parse(self.text[self._bom :])
            except (SyntaxError, ValueError):  # ValueError: a null byte
                tree = ast.Module(body=[], type_ignores=[])
                self.parsed = False
        self.tree = tree
        module_base = getattr(self.project, "is_module_class", None)  # a base class another file of the run defines
        self.index = FileIndex(tree, self.text[self._bom :] if self.text is not None else None, module_base)
        self.classes = ClassFacts(self)
        self.cache: dict[tuple, object] = {}
        self._active: list[tuple] = []
        self._tainted: set[tuple] = set()
        self._runs = 0
        self._budget = 2 * len(self.index.scopes) + 20
        self._refs: dict[str, Value] = {}
        self._free_values: dict[tuple, Value] = {}  # a prepass is never in progress when asked
        self._mention_index: Mentions | None = None
        self._cpython_positions: CPythonPositions | None = None
        self._spans: dict[ast.stmt, dict] = {}
        self._device_strings: dict[str, Value | None] = {}
        self.evidence_places: dict[tuple, tuple] = evidence.resolve(self) if evidence is not None else {}
        self._carried = carry.carried(ast_reuse.active(), self)  # the language server's runs kept from versions before
        self.carry_units = None
        self.tangled = False  # a run was asked for while being computed (recursion)

    # -- the query API -----------------------------------------------------------------

    def value(self, node: ast.AST) -> Value:
        """What ``node`` evaluated to, joined over every time the code runs it."""
        run = self._run_holding(node)
        value = run.values.get(node) if run is not None else None
        return UNKNOWN_VALUE if value is None else value

    def what(self, node: ast.AST) -> What:
        return self.value(node).what

    def where(self, node: ast.AST) -> frozenset:
        """``{(placement, origin), ...}``: where ``node``'s value may live and
        which node made it so (a loader batch's part not yet bound: ``node``)."""
        return frozenset((p, node if o is PENDING else o) for p, o in self.value(node).places)

    def qualified_name(self, node: ast.AST) -> str | None:
        ref = self.value(node).ref
        return ref if type(ref) is str else None

    def sinks(self, scopes=None) -> list[Sink]:
        """Every place in the file (in ``scopes``' own code) where a value
        meets a device it does not live on, in source order."""
        found: dict[tuple, Sink] = {}
        for scope in self.index.scopes.values() if scopes is None else scopes:
            if scope.kind == "class":
                continue
            run = self._main(scope)
            if run is not None:
                for key, sink in run.sinks.items():
                    found.setdefault(key, sink)
        return sorted((s for s in found.values() if not self._apart_only_on_paper(s)), key=lambda s: (position_of(s.node), position_of(s.value)))

    def _apart_only_on_paper(self, sink: Sink) -> bool:
        """The meeting is in the CPU arm of a CUDA test (``else:`` of ``if
        use_cuda:``) and the device side got there only in that test's CUDA
        arm: on every run both sides are on the CPU (``arms``)."""
        if sink.kind not in ("module-input", "operand", "numpy", "index"):
            return False
        parents = self.ast_parents()
        tests = arms.cpu_arm_tests(parents, sink.node)
        if not tests:
            return False
        device_side = sink.value if sink.kind == "numpy" else sink.other
        if device_side is None:
            return False
        origins = [o for p, o in self.value(device_side).places if type(p) is Device]
        return bool(origins) and all(o is not None and o is not PENDING and arms.in_cuda_arm(parents, o, tests) for o in origins)

    def ast_parents(self) -> dict:
        """Every node of the tree → its parent, made once."""
        parents = getattr(self, "parents", None)
        if parents is None:
            parents = self.parents = {child: parent for parent in ast_walk(self.tree) for child in ast.iter_child_nodes(parent)}
        return parents

    def device_at(self, node: ast.AST, moving: bool = False) -> str | None:
        """Source text of the device a fix at ``node`` should use, in issue 11's
        order: the device of a tensor the code at that line already works with;
        in a module's method, the module's own device (from a parameter or buffer
        it owns); a device variable or flag the program defines that is bound on
        every path before ``node`` (``device``, ``self.device``, ``args.device``,
        ``args.cuda``); else None.

        ``moving``: ``node`` is a value a fix moves to the device (the receiver
        of ``.cuda()``). Then a tensor counts only when the flow shows it on a
        device or the moved value then meets it (``sources.meets``), and never
        one the value is computed from (``sources.source_chains``):
        ``F.pad(audio).cuda()`` is on the CPU because ``audio`` is, so
        ``.to(audio.device)`` would move nothing (issue 25)."""
        scope = self.index.scope_at(position_of(node))
        if scope.kind == "class":
            return None
        run = self._main(scope)
        statement = self._statement_of(scope, node)
        if run is None or statement is None:
            return None
        sources = source_chains(self, scope, node) if moving else frozenset()
        info = self.index.classes.get(scope.cls) if scope.cls is not None else None
        constructing = info is not None and info.is_module and getattr(scope.node, "name", None) == "__init__"
        # 1. a tensor the line works with
        own = chain_of(node)
        unsure = None
        expressions = list(header_expressions(statement))
        # x in x.shape, x.size(0), x.dtype: the line treats x as a tensor
        evidenced = {chain_of(sub.value) for sub in expressions if type(sub) is ast.Attribute and sub.attr in TENSOR_EVIDENCE}
        for sub in expressions:
            if type(sub) not in (ast.Name, ast.Attribute) or type(getattr(sub, "ctx", None)) is not ast.Load:
                continue
            chain = chain_of(sub)
            value = run.values.get(sub)
            if chain is None or chain == own or value is None or value.flags & MAYBE_UNBOUND:
                continue
            if any(source == chain or source.startswith(chain + ".") or chain.startswith(source + ".") for source in sources):
                continue  # what the moved value is made from lives where it lives: not the device
            if constructing and root_of(chain) == scope.self_name:
                continue  # a module's own tensors are still on the CPU while it is built
            if value.what is not What.TENSOR and not (value.what is What.UNKNOWN and chain in evidenced and value.places):
                continue
            host, device, other = kinds_of(value)
            if host:
                continue
            if device and not other:
                return f"{chain}.device"
            # Moving, a tensor of unknown placement names the device only when
            # the moved value then meets it (``scores.masked_fill(~mask)``:
            # the original's GPU value needed it on the GPU); one that is only
            # on the line may be on the CPU on purpose (``lengths`` of
            # ``pack_padded_sequence(x.cuda(), lengths)``).
            if not moving or meets(scope, node, statement, chain):
                unsure = unsure or f"{chain}.device"
        if unsure is not None:
            return unsure
        # 2. the module's own device (not while it is built: the CPU, then)
        if info is not None and info.is_module and info.own_text is not None and scope.self_name == "self" and not constructing:
            return info.own_text
        # 3. a device variable or flag in reach
        return self._device_in_reach(scope, run, statement)

    def node_at(self, start: int, end: int) -> ast.expr | None:
        """The expression whose source is ``text[start:end]`` (character
        offsets), allowing for whitespace and parentheses around it, as libcst
        spans include them."""
        text = self._require_text()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        while start < end:
            found = self._spans_near(start).get((start, end))
            if found is not None:
                return found
            if text[start] == "(" and text[end - 1] == ")" and is_parenthesized(text, start, end):
                start, end = start + 1, end - 1
                while start < end and text[start].isspace():
                    start += 1
                while end > start and text[end - 1].isspace():
                    end -= 1
                continue
            return None
        return None

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Character offsets of ``node`` in the text."""
        return self._offset(node.lineno, node.col_offset), self._offset(node.end_lineno, node.end_col_offset)

    # -- what other files may ask (codemods.project) -----------------------------------

    def module_binding(self, name: str) -> ast.AST | str | None:
        """What a module-level name (``f``, or ``Cls.f`` for a static or class
        method) is bound to when that is its only binding: the ``def``, or the
        qualified name an import binds it to; None otherwise (bound twice, under
        a decorator that may change what it returns, declared global somewhere)."""
        module = self.index.module
        head, _, attr = name.partition(".")
        if module.counts.get(head) != 1 or any(head in scope.declared for scope in self.index.scopes.values()):
            return None
        if not attr:
            if head in module.imports:
                return module.imports[head]
            found = module.defs.get(head)
            if type(found) not in FUNCTION_DEFS:
                return None
        else:
            cls = module.defs.get(head)
            info = self.index.classes.get(cls) if type(cls) is ast.ClassDef else None
            found = info.methods.get(attr) if info is not None and "." not in attr else None
            if found is None or self.index.scopes[cls].counts.get(attr) != 1:
                return None
            kinds = {d.id for d in found.decorator_list if type(d) is ast.Name and d.id not in module.counts}
            if not kinds & {"staticmethod", "classmethod"}:
                return None  # an instance method: what it returns depends on the instance
        for decorator in found.decorator_list:
            bare = type(decorator) is ast.Name and decorator.id in ("staticmethod", "classmethod") and decorator.id not in module.counts
            if not bare and self.qualified(decorator, module) not in TRANSPARENT_DECORATORS:
                return None
        return found

    def returned(self, function: ast.AST) -> Value | None:
        """What a function of this file returns with its parameters as
        themselves (the result of its summary); None for a generator."""
        run = self.symbolic(self.index.scopes[function])
        if run is None or run.generator:
            return None
        return run.returns if run.returns is not None else SCALAR_VALUE

    def tensor_parameters(self, function: ast.AST) -> list[str]:
        """The parameters of ``function`` (``self`` aside) its code treats as
        tensors, in order: annotated as one, read with a tensor's attribute or
        method (``x.shape``, ``x.view(...)``), or passed first to a submodule
        of ``self``. A parameter's value alone says nothing of that (it is
        wherever the caller's argument is), so rules that assume a module's
        inputs live where the module does ask this."""
        return self.compute(("tensor parameters", function), lambda: self._tensor_parameters(function)) or []

    def function_at(self, offset: int) -> ast.AST | None:
        """The innermost function whose code holds character ``offset`` (for
        rules that walk libcst: the offset of a ``def``'s name), or None."""
        scope = self.index.scope_at(self.row_column(offset))
        while scope is not None and scope.kind == "class":
            scope = scope.parent
        return scope.node if scope is not None and scope.kind == "function" else None

    def _tensor_parameters(self, function: ast.AST) -> list[str]:
        scope = self.index.scopes.get(function)
        if scope is None or scope.kind != "function":
            return []
        args = function.args
        params = [a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in (scope.self_name, "self", "cls")]
        used = set()
        for node in ast_walk(function):
            kind = type(node)
            if kind is ast.Attribute and type(node.value) is ast.Name and node.attr in TENSOR_USE:
                used.add(node.value.id)
            elif kind is ast.Call and node.args and type(node.args[0]) is ast.Name and type(node.func) is ast.Attribute:
                if scope.self_name is not None and chain_of(node.func.value) == scope.self_name and self.what(node.func) is What.MODULE:
                    used.add(node.args[0].id)
        return [a.arg for a in params if a.arg in used or self.annotation_what(a.annotation, scope) is What.TENSOR]

    # -- laziness, once per file ---------------------------------------------------------

    def compute(self, key: tuple, make):
        """``make()`` once per key. A key asked for while it is being computed
        (recursion between functions) answers None, and what was computed from
        that answer is not kept, so results do not depend on the order of
        questions (unless a file is so tangled that the budget runs out)."""
        if key in self.cache:
            return self.cache[key]
        if key in self._active:
            self._tainted.update(self._active[self._active.index(key) + 1 :])
            self.tangled = True
            return None
        carried = self._carried if key[0] in carry.KINDS else None
        kept = carried.take(self, key) if carried is not None else None
        if kept is not None:
            self._runs += 1
            self.cache[key] = kept[0]
            carried.give(self, key, kept[0])
            return kept[0]
        self._active.append(key)
        try:
            result = make()
        finally:
            self._active.pop()
        self._runs += 1
        if key in self._tainted:
            self._tainted.discard(key)
            if self._runs < self._budget:
                return result
        self.cache[key] = result
        if carried is not None and self._runs < self._budget:
            carried.give(self, key, result)
        return result

    def module_prepass(self) -> dict:
        return self._prepass(self.index.module)

    def _run_holding(self, node: ast.AST) -> Run | None:
        scope = self.index.scope_at(position_of(node))
        return None if scope.kind == "class" else self._main(scope)

    def _main(self, scope: Scope) -> Run | None:
        """The run queries use: with the arguments of the function's call sites
        when they say more than its parameters do, else the symbolic run."""
        if scope.kind == "module":
            return self.compute(("main", scope.node), lambda: Run(self, scope, {}, record=True, summaries=True).run())
        if scope.kind != "function":
            return None

        def make() -> Run | None:
            context = self._context(scope)
            if context is None:
                return self.symbolic(scope)
            return Run(self, scope, context, record=True, summaries=True, in_init=scope.is_init).run()

        return self.compute(("main", scope.node), make)

    def cached_main(self, scope: Scope) -> Run | None:
        """The run queries use, if made already."""
        run = self.cache.get(("main", scope.node))
        return run if isinstance(run, Run) else None

    def following_device(self, at: ast.AST, other: ast.AST) -> str | None:
        """Text valid at ``at`` naming where ``other`` lives on every path (it
        may be the host on some, so a device's own name would not do): the
        one attribute of ``self`` holding a device that lives where ``other``
        does (``self.device = self.model.device`` after the model's moves)."""
        placements = self.value(other).placements
        scope = self.index.scope_at(position_of(at))
        if scope.cls is None or not scope.self_name or not placements:
            return None
        found = [
            attr
            for attr, value in self.classes.attributes(scope.cls).items()
            if value.what is What.DEVICE and self.rehome(value, scope, f"{scope.self_name}.{attr}").placements == placements
        ]
        return f"{scope.self_name}.{found[0]}" if len(found) == 1 else None

    def entry_moves(self) -> list:
        """Method parameters to move at the start of the method (``entries``)."""
        return entries.entry_moves(self)

    def symbolic(self, scope: Scope) -> Run | None:
        """The run with parameters as themselves (``SameAs(x)``): the summary."""
        return self.compute(("sym", scope.node), lambda: Run(self, scope, self._symbolic_params(scope), record=True, summaries=True, in_init=scope.is_init).run())

    def _prepass(self, scope: Scope) -> dict:
        """A scope's state at its end, without other functions' summaries or
        class facts: the globals (and closure variables) other functions see."""

        def make() -> dict:
            params = self._symbolic_params(scope) if scope.kind == "function" else {}
            run = Run(self, scope, params, record=False, summaries=False).run()
            return run.exits or {}

        result = self.compute(("pre", scope.node), make)
        return {} if result is None else result

    # -- names ------------------------------------------------------------------------------

    def module_ref(self, name: str) -> Value:
        value = self._refs.get(name)
        if value is None:
            value = self._refs[name] = Value(What.UNKNOWN, NO_PLACES, ref=name)
        return value

    def free_name(self, scope: Scope, name: str) -> Value:
        """A name the scope does not bind: an enclosing function's or the
        module's (as their prepass leaves it), else a builtin."""
        key = (scope.node, name)
        value = self._free_values.get(key)
        if value is None:
            value = self._free_values[key] = self._free_value(scope, name)
        return value

    def _free_value(self, scope: Scope, name: str) -> Value:
        outer = scope.outer
        while outer is not None:
            if name in outer.locals:
                value = self._prepass(outer).get(name)
                if value is None:
                    return UNKNOWN_VALUE
                if value.flags & MAYBE_UNBOUND:
                    value = value.but(flags=value.flags & ~MAYBE_UNBOUND)
                return self.rehome(value, scope, name)
            outer = outer.outer
        stars = self.index.module.stars
        if stars:
            if name == "torch":
                return self.module_ref("torch")  # `from common import *` of a module that imports torch
            if all(star == "torch" for star in stars) and name not in BUILTIN_NAMES:
                return self.module_ref(f"torch.{name}")
            if all(star.startswith("torch.nn") for star in stars) and name[:1].isupper():
                return self.module_ref(f"torch.nn.{name}")
            if name not in BUILTIN_NAMES or not all(star.startswith("torch") for star in stars):
                return UNKNOWN_VALUE
        if name in BUILTIN_NAMES:
            return self.module_ref(f"builtins.{name}")
        return UNKNOWN_VALUE

    def scope_home(self, scope: Scope, root: str) -> ast.AST | None:
        return scope.home_of(root)

    def _valid(self, placement, scope: Scope) -> bool:
        """Whether a placement's text names the same thing from ``scope``."""
        if placement.text is None or placement.home is None:
            return True
        home = self.scope_home(scope, root_of(placement.text))
        if home is placement.home:
            return True
        # `self.w.device` in a class names the same in its subclasses' methods
        return type(home) is ast.ClassDef and type(placement.home) is ast.ClassDef and placement.home in self.classes.ancestors(home)


    def rehome(self, value: Value, scope: Scope, chain: str | None) -> Value:
        """``value`` seen from ``scope``, where it is reached as ``chain``:
        texts that name nothing there are rewritten through ``chain``."""
        changed = False
        places = []
        for placement, origin in value.places:
            kind = type(placement)
            if (kind is Device or kind is SameAs) and not self._valid(placement, scope):
                changed = True
                home = self.scope_home(scope, root_of(chain)) if chain else None
                if kind is Device:
                    placement = Device(naming(value, chain), home)
                else:
                    placement = SameAs(chain, home) if chain else UNKNOWN
            places.append((placement, origin))
        parts = value.parts
        if isinstance(parts, Parts) and parts_depth(value) <= MAX_PARTS_DEPTH:
            elem = parts.elem if parts.elem is NOTHING else self.rehome(parts.elem, scope, None)
            items = tuple((k, self.rehome(v, scope, None)) for k, v in parts.items)
            if elem is not parts.elem or any(a is not b for (_, a), (_, b) in zip(items, parts.items)):
                parts = Parts(elem, items)
                changed = True
        if not changed:
            return value
        return value.but(places=frozenset(places), parts=parts)

    def device_string(self, text: str) -> Value | None:
        if text not in self._device_strings:
            kind = text.split(":")[0]
            if text == "cpu":
                value = Value(What.DEVICE, frozenset({(HOST, None)}))
            elif kind in DEVICE_STRINGS and (kind == text or text[len(kind) + 1 :].isdigit()):
                value = Value(What.DEVICE, frozenset({(Device(f'"{text}"'), None)}))
            elif text == "meta":
                value = Value(What.DEVICE, UNKNOWN_PLACES)
            else:
                value = None
            self._device_strings[text] = value
        return self._device_strings[text]

    def source_of(self, node: ast.AST) -> str:
        if self.text is not None:
            start, end = self.span(node)
            return self.text[start:end]
        return ast.unparse(node)

    def qualified(self, node: ast.AST, scope: Scope) -> str | None:
        if type(node) is ast.Call:
            node = node.func
        return self.index.static_name(node, scope)

    def annotation_what(self, annotation: ast.AST | None, scope: Scope) -> What:
        if annotation is None:
            return What.UNKNOWN
        if type(annotation) is ast.BinOp and type(annotation.op) is ast.BitOr:
            sides = [annotation.left, annotation.right]
            kept = [s for s in sides if not (type(s) is ast.Constant and s.value is None)]
            return self.annotation_what(kept[0], scope) if len(kept) == 1 else What.UNKNOWN
        if type(annotation) is ast.Subscript:
            name = self.index.static_name(annotation.value, scope) or ""
            if name.rsplit(".", 1)[-1] == "Optional":
                return self.annotation_what(annotation.slice, scope)
            return What.UNKNOWN
        local = self.index.local_class(annotation, scope)
        if local is not None:
            info = self.index.classes.get(local)
            return What.MODULE if info is not None and info.is_module else What.UNKNOWN
        name = self.index.static_name(annotation, scope)
        if name is None:
            return What.UNKNOWN
        if name in ("torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.nn.Parameter", "torch.BoolTensor", "torch.DoubleTensor") or name.startswith("torch.cuda."):
            return What.TENSOR
        if name in DATA_LOADERS:
            return What.LOADER
        if name == "torch.device":
            return What.DEVICE
        if name in ("numpy.ndarray", "numpy.array"):
            return What.ARRAY
        if name in ("int", "float", "str", "bool"):
            return What.SCALAR
        if is_torch_module_class(name):
            return What.MODULE
        return What.UNKNOWN

    # -- parameters, contexts and summaries ------------------------------------------------

    def _symbolic_params(self, scope: Scope) -> dict[str, Value]:
        function = scope.node
        args = function.args
        params: dict[str, Value] = {}
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if arg.arg == scope.self_name:
                params[arg.arg] = self.classes.self_value(scope.cls)
            else:
                params[arg.arg] = self._param_value(scope, arg)
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                params[arg.arg] = UNKNOWN_VALUE
        return params

    def _param_value(self, scope: Scope, arg: ast.arg) -> Value:
        what = self.annotation_what(arg.annotation, scope)
        name = arg.arg
        function = scope.node
        if what is What.UNKNOWN and (name in DEVICE_NAMES or name.endswith("_device")):
            what = What.DEVICE
        if what is What.UNKNOWN and name in self.evidenced_tensors(scope):
            what = What.TENSOR  # wherever the caller's tensor lives: SameAs(name)
        if what is What.DEVICE:
            return Value(What.DEVICE, frozenset({(Device(name, function), arg)}))
        if what is What.LOADER:
            return host_loader()
        if what is What.SCALAR:
            return SCALAR_VALUE
        if what is What.ARRAY:
            return ARRAY_VALUE
        same = frozenset({(SameAs(name, function), arg)})
        if what is What.MODULE:
            return Value(What.MODULE, same, frozenset({arg}))
        return Value(what, same)


    def evidenced_tensors(self, scope: Scope, reads: bool = True) -> frozenset:
        """The parameters the function's code shows are tensors (``evidence``);
        ``reads=False``: shown so by more than a read as an array (``x.numpy()``)."""
        return self._tensor_evidence(scope)[0 if reads else 1]

    def evidenced_locals(self, scope: Scope) -> frozenset:
        """Local names bound once that the function's code shows are tensors (``evidence``)."""
        return self._tensor_evidence(scope)[2] if scope.kind == "function" else frozenset()

    def kind_tested(self, scope: Scope) -> frozenset:
        """The names the function tests the kind of (``isinstance(x, torch.Tensor)``,
        ``torch.is_tensor(x)``): a tensor on one path, something else on another (``evidence``)."""
        return self._tensor_evidence(scope)[3] if scope.kind == "function" else frozenset()

    def _tensor_evidence(self, scope: Scope) -> tuple:
        key = ("tensor evidence", scope.node)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = carry.through(self._carried, self, key, lambda: evidence.tensor_parameters(self, scope))
        return found

    def evidenced_attributes(self, cls: ast.ClassDef, reads: bool = True) -> frozenset:
        """The attributes ``self.X`` the class's methods show are tensors (``evidence``);
        ``reads=False``: shown so by more than a read as an array."""
        key = ("attribute evidence", cls)
        if key not in self.cache:
            self.cache[key] = evidence.tensor_attributes(self, cls)
        return self.cache[key][0 if reads else 1]

    def shows_tensor(self, roots: list, name: str) -> bool:
        """Whether the code under ``roots`` uses ``name`` as only a tensor is used (``evidence``)."""
        scope = self.index.scope_at(position_of(roots[0])) if roots else None
        return scope is not None and evidence.shows_tensor(self, scope, roots, name)

    def torch_results(self, scope: Scope) -> frozenset:
        """Locals bound once to a torch operation's result (``evidence``)."""
        key = ("torch results", scope.node)
        if key not in self.cache:
            self.cache[key] = evidence.torch_results(self, scope) if scope.kind == "function" else frozenset()
        return self.cache[key]

    def meets_devices(self) -> bool:
        """Whether the file's code may meet devices (``evidence.meets_devices``)."""
        key = ("meets devices",)
        if key not in self.cache:
            self.cache[key] = evidence.meets_devices(self)
        return self.cache[key]

    def library_like(self) -> bool:
        """Whether callers elsewhere choose the devices (``evidence.library_like``)."""
        if ("library like",) not in self.cache:
            self.cache[("library like",)] = evidence.library_like(self)
        return self.cache[("library like",)]

    def mentions(self) -> "Mentions | None":
        if self._mention_index is None and self.text is not None:
            self._mention_index = Mentions(self)
        return self._mention_index

    def _context(self, scope: Scope) -> dict[str, Value] | None:
        """A function's parameters as its call sites in the file pass them,
        when every use of its name is seen to be a call (its name occurs in the
        text nowhere else) and they say more than the parameters do."""
        mentions = self.mentions()
        function = scope.node
        if mentions is None or function in mentions.cyclic:
            return None
        if any(self.qualified(d, scope.parent) not in TRANSPARENT_DECORATORS for d in function.decorator_list):
            return None
        target = scope.cls if scope.is_init else function  # a class is called by its name
        method = target is function and scope.cls is not None
        occurrences = [(offset, caller) for offset, caller, dotted in mentions.occurrences.get(target.name, ()) if dotted == method]
        if not occurrences or any(caller is None for _, caller in occurrences):
            return None
        runs = []
        for caller in {caller for _, caller in occurrences}:
            run = self._main(caller)
            if run is None:
                return None
            runs.append(run)
        seen = set()
        calls = []
        for run in runs:
            for node, used in run.references.items():
                if used.name != target.name:
                    continue
                seen.add(self._reference_offset(node))  # a use of this name, of this or a namesake definition
                if used is target and node not in run.called:
                    return None  # used as a value: called where the analysis cannot see
            calls += [(call, run, implicit) for call, (callee, implicit) in run.callees.items() if callee is function]
        if not calls or any(offset not in seen for offset, _ in occurrences):
            return None  # a use no run has seen
        joined: dict[str, Value] = {}
        for call, run, implicit_self in calls:
            mapping = self.bind_call(scope, call, run.calls.get(call), implicit_self)
            for name, value in mapping.items():
                joined[name] = join(joined.get(name), value)
        params = self._symbolic_params(scope)
        useful = False
        for name, value in joined.items():
            if name not in params or name == scope.self_name:
                continue
            value = self.rehome(value.but(flags=value.flags & ~MAYBE_UNBOUND), scope, name)
            if any(type(p) is Device and (p.text is None or value.what is What.DEVICE) for p, _ in value.places):
                # inside the function, the parameter names the device its callers' argument is on
                named = Device(naming(value, name), function)
                value = value.but(places=frozenset((named, o) if type(p) is Device and (p.text is None or value.what is What.DEVICE) else (p, o) for p, o in value.places))
            host, device, _ = kinds_of(value)
            if host or device or value.what in (What.MODULE, What.LOADER, What.TENSOR, What.BATCH, What.DEVICE):
                useful = True
            params[name] = value
        return params if useful else None

    def bind_call(self, scope: Scope, call: ast.Call, recorded: tuple | None, implicit_self: bool) -> dict[str, Value]:
        """Parameter name -> the argument value a call passes (UNKNOWN where not seen)."""
        args = scope.node.args
        positional_names = [a.arg for a in (*args.posonlyargs, *args.args)]
        if implicit_self and scope.self_name:
            positional_names = positional_names[1:]
        names = positional_names + [a.arg for a in args.kwonlyargs]
        result: dict[str, Value] = {}
        if recorded is None:
            return {name: UNKNOWN_VALUE for name in names}
        positional, keywords = recorded
        starred = False
        for i, (node, value) in enumerate(zip(call.args, positional)):
            if type(node) is ast.Starred:
                starred = True
                break
            if i < len(positional_names):
                result[positional_names[i]] = value
        for name, value in keywords.items():
            if name is None:
                starred = True
            elif name in names:
                result[name] = value
        defaults = dict(zip(positional_names[len(positional_names) - len(args.defaults) :], args.defaults)) if args.defaults else {}
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        for name in names:
            if name in result:
                continue
            default = defaults.get(name)
            if starred or default is None:
                result[name] = UNKNOWN_VALUE
            elif type(default) is ast.Constant:
                result[name] = (self.device_string(default.value) if type(default.value) is str else None) or SCALAR_VALUE
            else:
                result[name] = UNKNOWN_VALUE
        return result

    def apply_summary(self, run: Run, function: ast.AST, call: ast.Call, positional: list[Value], keywords: dict, receiver: Value | None, state: dict) -> Value:
        """A call of a function of this file: its summary, with the call's
        arguments put where its parameters are."""
        scope = self.index.scopes[function]
        mentions = self.mentions()
        if mentions is not None and function in mentions.cyclic and mentions.cyclic.get(run.scope.node) is mentions.cyclic[function]:
            return UNKNOWN_VALUE  # recursion: the summary would depend on itself
        summary = self.symbolic(scope)
        if summary is None:
            return UNKNOWN_VALUE
        mapping = self.bind_call(scope, call, (positional, keywords), receiver is not None)
        if summary.generator:  # what iterating it gives: its elements, as the caller's arguments make them
            return calls.generated(self._substitute(summary.yields, scope, mapping, receiver, run.scope))
        # a module argument the function moves in place (`model.to(device)`) comes back moved
        exits = summary.exits or {}
        for name, before in summary.params.items():
            given = mapping.get(name)
            if given is None or given.what is not What.MODULE:
                continue
            after = exits.get(name)
            if name in summary.discarded:
                after = Value(What.MODULE, summary.discarded[name])
            if after is not None and after.places != before.places:
                moved = self._substitute(after, scope, mapping, receiver, run.scope)
                calls.move_in_place(run, given, given.but(places=moved.places), None, state)
        if run.record:
            for name, kind, node, use, other_node, other in summary.meetings:
                given = mapping.get(name)
                if given is None:
                    continue
                here = self._substitute(other, scope, mapping, receiver, run.scope)
                if apart(given, here):
                    # found inside the function; made (and fixed) where the caller made the value
                    sink = Sink(kind, node, use, settled_origins(given.places, call), other_node, self.device_text(scope, other, other_node))
                    run.sinks.setdefault((node, use), sink)
                elif kinds_of(here) == (False, True, False):
                    # the caller's own parameter, passed on: the caller's summary keeps the meeting
                    params = {p.text for p, _ in given.places if type(p) is SameAs and p.home is run.scope.node}
                    if len(params) == 1 and all(type(p) is SameAs for p, _ in given.places):
                        run.meetings.append((params.pop(), kind, node, use, other_node, here))
            if summary.entries:
                entries.pass_on(self, run, scope, call, summary, mapping)
        result = summary.returns if summary.returns is not None else SCALAR_VALUE
        return self._substitute(result, scope, mapping, receiver, run.scope)

    def _substitute(self, value: Value, scope: Scope, mapping: dict[str, Value], receiver: Value | None, at: Scope) -> Value:
        function = scope.node
        places = set()
        sole: Value | None = None
        for placement, origin in value.places:
            kind = type(placement)
            if kind is SameAs and placement.home is function and placement.text in mapping:
                given = mapping[placement.text]
                places |= given.places
                sole = given if sole is None or sole is given else UNKNOWN_VALUE
            elif kind is Device and placement.home is function and placement.text in mapping and mapping[placement.text].what is What.DEVICE:
                places |= {(p, origin) for p, _ in mapping[placement.text].places}
            elif (kind is Device or kind is SameAs) and placement.home is not None and placement.home is scope.cls:
                if at.cls is scope.cls and receiver is not None and receiver.ref == Instance(scope.cls) and receiver.places == self.classes.self_places(scope.cls):
                    places.add((placement, origin))
                elif receiver is not None and receiver.what is What.MODULE:
                    places |= receiver.places
                else:
                    places.add((Device(None), origin) if kind is Device else (UNKNOWN, None))
            elif (kind is Device or kind is SameAs) and not self._valid(placement, at):
                places.add((Device(None), origin) if kind is Device else (UNKNOWN, None))
            else:
                places.add((placement, origin))
        parts = value.parts
        if isinstance(parts, Parts) and parts_depth(value) <= MAX_PARTS_DEPTH:
            elem = parts.elem if parts.elem is NOTHING else self._substitute(parts.elem, scope, mapping, receiver, at)
            parts = Parts(elem, tuple((k, self._substitute(v, scope, mapping, receiver, at)) for k, v in parts.items))
        elif isinstance(parts, frozenset):
            parts = frozenset(p for p in parts if not isinstance(p, ast.arg)) or None
        what = value.what
        if what is What.UNKNOWN and sole is not None and sole is not UNKNOWN_VALUE and len(value.places) == 1:
            what = sole.what
        ref = value.ref if not isinstance(value.ref, Instance) or value.ref.cls is not None else None
        return Value(what, capped(frozenset(places)), parts, ref, value.flags & ~MAYBE_UNBOUND)

    def inline(self, run: Run, function: ast.AST, call: ast.Call, positional: list[Value], keywords: dict, state: dict) -> Value | None:
        """``self.helper(...)`` called from ``__init__``: interpreted in place, so
        the attributes it sets are known after the call."""
        scope = self.index.scopes[function]
        if function is run.scope.node or not scope.self_name or not run.scope.self_name:
            return None
        params = self._symbolic_params(scope)
        for name, value in self.bind_call(scope, call, (positional, keywords), True).items():
            params[name] = self.rehome(value, scope, name)
        params[scope.self_name] = state.get(run.scope.self_name, params[scope.self_name])
        mine, theirs = run.scope.self_name + ".", scope.self_name + "."
        for key, value in state.items():
            if key.startswith(mine):
                params[theirs + key[len(mine) :]] = value
        child = Run(self, scope, params, record=False, summaries=True, in_init=True, depth=run.depth + 1).run()
        for key, value in (child.exits or {}).items():
            if key.startswith(theirs):
                chain = mine + key[len(theirs) :]
                state[chain] = self.rehome(value, run.scope, chain)
                run._dotted_roots.add(run.scope.self_name)
        return self.rehome(child.returns or SCALAR_VALUE, run.scope, None)

    # -- classes ---------------------------------------------------------------------------

    def inputs_on_device(self, run: Run, module: Value, call: ast.Call, positional: list[Value], keywords: dict) -> set[int] | None:
        """For a call of a module whose class (and ``forward``) this file
        defines: the indexes (in ``call.args`` then ``call.keywords``) of the
        inputs ``forward`` uses with the module's own parameters, which must be
        on its device; None for other modules (every input must be)."""
        if type(module.ref) is not Instance or not run.summaries:
            return None
        forward = self.classes.method_of(module.ref.cls, "forward")
        if forward is None:
            return None
        scope = self.index.scopes[forward]
        summary = self.symbolic(scope)
        if summary is None:
            return None
        owners = {module.ref.cls} | self.classes.ancestors(module.ref.cls)
        needed = {name for name, _, _, _, _, other in summary.meetings if any(type(p) is Device and p.home in owners for p, _ in other.places)}
        args = scope.node.args
        names = [a.arg for a in (*args.posonlyargs, *args.args)][1:]
        required = set()
        for i, arg in enumerate(call.args):
            if type(arg) is ast.Starred or i >= len(names):
                return None  # the analysis cannot tell which parameter gets it
            if names[i] in needed:
                required.add(i)
        for j, keyword in enumerate(call.keywords):
            if keyword.arg is None:
                return None
            if keyword.arg in needed:
                required.add(len(call.args) + j)
        return required


    def module_evidence(self, scope: Scope, chain: str) -> bool:
        """Whether the scope calls a method only modules have on ``chain``."""
        key = ("evidence", scope.node)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = remembered("module evidence", scope.node, lambda: evidence.module_evidence(scope.node))
        return chain in found

    def mentions_device(self, node: ast.AST) -> bool:
        """Whether a class, function or lambda moves tensors or names a device."""
        key = ("mentions", node)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = remembered("mentions device", node, lambda: evidence.mentions_device(node))
        return found

    # -- naming a device --------------------------------------------------------------------

    def device_text(self, scope: Scope, other: Value | None, other_node: ast.AST | None) -> str | None:
        """Text naming the device ``other`` lives on, valid in ``scope``."""
        if other is None:
            return None
        texts = {p.text for p, _ in other.places if type(p) is Device and p.text is not None and self._valid(p, scope)}
        if len(texts) == 1:
            return texts.pop()
        chain = chain_of(other_node) if other_node is not None else None
        if chain is not None:
            return naming(other, chain)
        return None

    def _device_in_reach(self, scope: Scope, run: Run, statement: ast.stmt) -> str | None:
        # one Reach (one watched run) per scope, however many fixes ask
        key = ("reach", scope.node)
        reach = self.cache.get(key)
        if reach is None:
            module = self.index.module
            inner = scope.kind != "module"
            reach = self.cache[key] = Reach(self, scope, run, self._main(module) if inner else None, self._prepass(module) if inner else None)
        return reach.device(self, statement)

    def _statement_of(self, scope: Scope, node: ast.AST) -> ast.stmt | None:
        """The innermost statement of ``scope`` that holds ``node``."""
        position = position_of(node)
        end = (getattr(node, "end_lineno", position[0]), getattr(node, "end_col_offset", position[1]))
        blocks = [scope.node.body]
        found = None
        while blocks:
            body = blocks.pop()
            # a block's statements stand in order and do not overlap: only the
            # last one starting at or before ``node`` can hold it (found by
            # bisection: a scan per fix made a module of n fixes cost n²)
            i = bisect.bisect_right(self._statement_starts(body), position) - 1
            statement = body[i] if i >= 0 else None
            if statement is not None and end <= (statement.end_lineno, statement.end_col_offset):
                found = statement
                if type(statement) in FUNCTION_DEFS or type(statement) is ast.ClassDef:
                    break
                blocks = [getattr(statement, f) for f in ("body", "orelse", "finalbody") if getattr(statement, f, None)]
                for handler in getattr(statement, "handlers", ()):
                    blocks.append(handler.body)
                for case in getattr(statement, "cases", ()):
                    blocks.append(case.body)
        return found

    def _statement_starts(self, body: list[ast.stmt]) -> list[tuple[int, int]]:
        key = ("starts", id(body))
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = [position_of(s) for s in body]
        return found

    # -- offsets ----------------------------------------------------------------------------

    def _require_text(self) -> str:
        if self.text is None:
            raise ValueError("FileFlow was made from a tree: pass text= to map offsets")
        return self.text

    def _positions(self) -> CPythonPositions:
        if self._cpython_positions is None:
            self._cpython_positions = CPythonPositions(self._require_text())
        return self._cpython_positions

    def _starts(self) -> list[int]:
        return self._positions().starts

    def _offset(self, line: int, byte_column: int) -> int:
        return self._positions().offset(line, byte_column)

    def _reference_offset(self, node: ast.AST) -> int:
        """Character offset of the name a Name or Attribute node uses."""
        if type(node) is ast.Attribute:
            return self._offset(node.end_lineno, node.end_col_offset) - len(node.attr)
        return self._offset(node.lineno, node.col_offset)

    def row_column(self, offset: int) -> tuple[int, int]:
        """(line, UTF-8 column), as ast counts them, of a character offset."""
        return self._positions().position(offset)

    def name_offset(self, definition: ast.AST) -> int:
        """Character offset of the name in a def or class statement's header."""
        text, name = self.text, definition.name
        at = self._offset(definition.lineno, definition.col_offset)
        while True:
            at = text.find(name, at)
            if at < 0:
                return -1
            end = at + len(name)
            if not (text[at - 1 : at].isidentifier() or text[at - 1 : at].isdigit()) and not (text[end : end + 1].isidentifier() or text[end : end + 1].isdigit()):
                return at
            at = end

    def top_lines(self) -> list[int]:
        """The line each top-level statement starts on, made once."""
        found = self.cache.get("top lines")
        if found is None:
            found = self.cache["top lines"] = [s.lineno for s in self.tree.body]
        return found

    def _spans_near(self, offset: int) -> dict:
        """Expressions of the top-level statement holding ``offset``, by span."""
        starts = self._starts()
        line = bisect.bisect_right(starts, offset) - 1
        body = self.tree.body
        i = bisect.bisect_right(self.top_lines(), line) - 1
        if i < 0:
            return {}
        statement = body[i]
        found = self._spans.get(statement)
        if found is None:
            # by offsets from the statement's first line, kept across versions
            # (``ast_reuse``: a node kept stands on the same lines, the same text)
            base = self._offset(statement.lineno, 0)
            relative = remembered("spans", statement, lambda: ast_reuse.spans_of(statement, base, self._offset, self._relative_spans))
            found = self._spans[statement] = {(start + base, end + base): node for (start, end), node in relative.items()} if base else relative
        return found

    def _relative_spans(self, statement: ast.stmt, base: int) -> dict:
        found: dict = {}
        for node in ast_walk(statement):
            if isinstance(node, ast.expr):
                start, end = self.span(node)
                found.setdefault((start - base, end - base), node)
        return found



