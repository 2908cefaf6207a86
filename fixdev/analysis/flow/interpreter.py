"""The interpreter: one abstract interpretation of one scope's body (``Run``), its state, and the tables that send each statement and expression to its family (``statements``, ``expressions``, ``calls``)."""

from __future__ import annotations

import ast
from fixdev.analysis.flow.index import Scope
from fixdev.analysis.flow.lattice import DTYPE, Device, FOLLOWS_MODULE, HOST, Instance, MAYBE_UNBOUND, NOTHING, Parts, SCALAR_VALUE, UNKNOWN, UNKNOWN_PLACES, UNKNOWN_VALUE, Value, What, ZERO_DIM, TENSORISH, capped, join_states, settle_pending, join
from fixdev.analysis.flow.sinks import Sink
from fixdev.analysis.flow.syntax import chain_of, root_of
from fixdev.analysis.flow.vocabulary import DTYPES, ENCODING, FLAG_NAMES
from fixdev.analysis.flow import calls, evidence, expressions, statements


# ---------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------





class Run:
    """One abstract interpretation of one scope's body.

    ``record``: keep every expression's value and the sinks (the run queries
    use). ``summaries``: use other functions' summaries and class facts (off
    for the module-level prepass that gives functions their globals)."""

    # flow: the file's FileFlow (facts.py, which imports this module).
    def __init__(self, flow: "FileFlow", scope: Scope, params: dict[str, Value], *, record: bool, summaries: bool, in_init: bool = False, depth: int = 0, watch=None) -> None:
        self.flow = flow
        self.index = flow.index
        self.scope = scope
        self.record = record
        self.summaries = summaries
        self.in_init = in_init
        self.depth = depth
        # watch: what sees the state at each statement (reach.Single or reach's
        # watcher of every statement), and the kind of state it needs kept
        self.watch = watch
        self._tracked = watch.tracked if watch is not None else None
        self.values: dict[ast.AST, Value] = {}
        self.sinks: dict[tuple, Sink] = {}
        self.returns: Value | None = None
        self.exits: dict | None = None  # the state where the body ends or returns
        self.generator = False
        self.yields: Value | None = None  # what its `yield`s give, joined (a generator's elements)
        self.flag_tests: list[ast.AST] = []
        self.calls: dict[ast.Call, tuple] = {}
        # uses of the file's own functions and classes by name: node -> def; calls -> (function, implicit self)
        self.references: dict[ast.AST, ast.AST] = {}
        self.called: set[ast.AST] = set()
        self.callees: dict[ast.Call, tuple] = {}
        self.discarded: dict[str, frozenset] = {}  # chain -> where a discarded .to() would put it
        # (parameter, kind, node, its use, other node, other value): a parameter meets a device here
        self.meetings: list[tuple] = []
        # a plain class's method parameter meeting the class's own device (sinks.Entry);
        # (function, parameter) this run's calls pass such a parameter on from
        self.entries: list = []
        self.passed_on: set[tuple] = set()
        self.lambdas: set[ast.Lambda] = set()  # lambdas whose body runs now (a call inside is not followed)
        self.params = params
        self._loops: list[tuple[list, list]] = []
        self._default_device = 0
        self._dotted_roots: set[str] = set()
        self.cls_info = flow.index.classes.get(scope.cls) if scope.cls is not None else None
        if flow.evidence_places:  # --traceback's evidence: only then is each expression checked against it
            self.ev = self._ev_told

    def join(self, a: dict | None, b: dict | None) -> dict | None:
        joined = join_states(a, b, self._untracked)
        if self._tracked is not None and joined is not None and joined is not a and joined is not b:
            joined = self._tracked(joined)
        return joined

    def copy(self, state: dict) -> dict:
        """A copy of ``state`` for a branch (of the kind the watcher needs)."""
        return dict(state) if self._tracked is None else self._tracked(state)

    def own(self, state: dict) -> dict:
        """``state``, made by hand, as a state of this run."""
        return state if self._tracked is None else self._tracked(state)

    def _untracked(self, chain: str) -> Value:
        """What ``self.x`` holds where this run has not assigned it: the class's facts."""
        root, _, attr = chain.partition(".")
        owner = self.params.get(root)
        if root != self.scope.self_name or "." in attr or owner is None or type(owner.ref) is not Instance:
            return UNKNOWN_VALUE
        found = self.flow.classes.instance_attribute(self, owner, attr, chain)
        return UNKNOWN_VALUE if found is None else found

    def run(self) -> "Run":
        node = self.scope.node
        state = self.copy(self.params)
        if self.record and self.scope.kind == "function":
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                if arg is not None and arg.arg in state:
                    self.values[arg] = state[arg.arg]
        state = self.block(node.body, state)
        if state is not None:
            self.returns = join(self.returns, SCALAR_VALUE)
            self.exits = self.join(self.exits, state)
        # Finished, a run is only read (values, exits, sinks). Without its
        # flow it closes no cycle (flow -> cache -> run -> flow), and a
        # file's flow is freed by reference counting when its user drops it.
        self.flow = None
        return self

    def block(self, statements: list[ast.stmt], state: dict | None) -> dict | None:
        handlers = _STATEMENTS
        watch = self.watch
        for statement in statements:
            if state is None:
                return None
            if watch is not None:
                watch.at(self, statement, state, bool(self._loops))
            handler = handlers.get(type(statement))
            if handler is not None:
                state = handler(self, statement, state)
        return state

    def bind(self, target: ast.AST, value: Value, state: dict, settle: bool = True) -> None:
        kind = type(target)
        if kind is ast.Name:
            if settle:
                value = settle_pending(value, target)
            if value.what is What.UNKNOWN and value.ref is None and value.parts is None and self.scope.kind == "function" and target.id in self.flow.evidenced_locals(self.scope):
                # bound once, and used as only a tensor is (`t.size(0)`, `torch.max(t, 1)`)
                value = value.but(what=What.TENSOR, places=value.places or UNKNOWN_PLACES)
            elif value.what is What.UNKNOWN and value.ref is None and value.parts is None and self.scope.kind == "function":
                where = evidence.rebound_tensors(self.flow, self.scope).get(target.id)
                if where is not None and where[2] and where[0] == (target.lineno, target.col_offset):
                    # bound for the last time at the top of the body, used as only a tensor is after
                    value = value.but(what=What.TENSOR, places=value.places or UNKNOWN_PLACES)
            if value.flags & MAYBE_UNBOUND:
                value = value.but(flags=value.flags & ~MAYBE_UNBOUND)
            state[target.id] = value
            if target.id in self._dotted_roots:
                self.kill(target.id, state)
            if self.record:
                self.remember(target, value)
        elif kind is ast.Tuple or kind is ast.List:
            self._unpack(target.elts, value, state)
        elif kind is ast.Attribute:
            chain = chain_of(target)
            if chain is None:
                self.ev(target.value, state)
                return
            if settle:
                value = settle_pending(value, target)
            value = self._attach(target, value, state)
            if value.flags & MAYBE_UNBOUND:
                value = value.but(flags=value.flags & ~MAYBE_UNBOUND)
            state[chain] = value
            self._dotted_roots.add(root_of(chain))
            self.kill(chain, state)
            if self.record:
                self.remember(target, value)
        elif kind is ast.Subscript:
            container = self.ev(target.value, state)
            index = self.ev(target.slice, state)
            chain = chain_of(target.value)
            key = target.slice.value if type(target.slice) is ast.Constant else None
            if chain is not None and isinstance(container.parts, Parts):
                if isinstance(key, (str, int)):
                    # batch["image"] = batch["image"].to(device)
                    items = tuple((k, v) for k, v in container.parts.items if k != key) + ((key, value),)
                    parts = Parts(container.parts.elem, items)
                else:
                    # batch[k] = ...: any part may now be the new value
                    elem = container.parts.elem
                    parts = Parts(value if elem is NOTHING else join(elem, value), tuple((k, join(v, value)) for k, v in container.parts.items))
                # a BatchEncoding given a value that is no tensor may no longer move whole
                keeps = container.ref != ENCODING or value.what in (What.TENSOR, What.BATCH)
                state[chain] = container.but(parts=parts) if keeps else container.but(parts=parts, ref=None)
            elif container.what is What.TENSOR and (index.what is What.TENSOR or type(target.slice) in (ast.Slice, ast.Tuple) or type(key) is int):
                pass  # label[label == pad] = -100, x[:, 0] = v: a tensor's items are written where the tensor lives
            elif chain is not None and container.what in TENSORISH and container.places and value.places and not value.places <= container.places:
                # x[k] = value where value may live elsewhere: x is a container after all (a loader's dict batch)
                state[chain] = container.but(places=capped(container.places | value.places))
        elif kind is ast.Starred:
            self.bind(target.value, value, state, settle)

    def _unpack(self, targets: list, value: Value, state: dict) -> None:
        parts = value.parts if isinstance(value.parts, Parts) else None
        items = dict(parts.items) if parts is not None else {}
        star = next((i for i, t in enumerate(targets) if type(t) is ast.Starred), None)
        length = len(targets)
        known_length = None
        if items and all(isinstance(k, int) for k in items) and sorted(items) == list(range(len(items))):
            known_length = len(items)
        for i, target in enumerate(targets):
            if parts is not None:
                key = i
                if star is not None and i > star and known_length is not None:
                    key = known_length - (length - i)
                part = items.get(key, parts.elem) if not (star is not None and i == star) else Value(value.what, value.places, Parts(parts.elem))
                if part is NOTHING:
                    part = UNKNOWN_VALUE
            elif value.what is What.TENSOR:
                part = value.but(flags=value.flags & ~ZERO_DIM)  # unbinding along the first dimension
            else:
                part = UNKNOWN_VALUE
            self.bind(target, part, state)

    def _attach(self, target: ast.Attribute, value: Value, state: dict) -> Value:
        """``self.fc = nn.Linear(...)`` in an nn.Module: submodules, parameters
        and buffers live where the module lives."""
        info = self.cls_info
        if info is None or not info.is_module or type(target.value) is not ast.Name or target.value.id != self.scope.self_name:
            return value
        if value.what is What.MODULE or value.flags & FOLLOWS_MODULE:
            own = self.flow.classes.self_places(info.node)
            return value.but(places=own, flags=value.flags | FOLLOWS_MODULE)
        return value

    def kill(self, root: str, state: dict) -> None:
        prefix = root + "."
        for key in [k for k in state if k.startswith(prefix)]:
            del state[key]

    def load_target(self, target: ast.AST, state: dict) -> Value:
        kind = type(target)
        if kind is ast.Name:
            return expressions.e_name(self, target, state)
        if kind is ast.Attribute:
            chain = chain_of(target)
            if chain is not None and chain in state:
                return state[chain]
            return expressions.attribute(self, self.ev(target.value, state), target.attr, target, chain, state)
        if kind is ast.Subscript:
            return expressions.subscript(self, self.ev(target.value, state), target, state)
        return UNKNOWN_VALUE

    def ev(self, node: ast.AST, state: dict) -> Value:
        handler = _EXPRESSIONS.get(type(node))
        value = handler(self, node, state) if handler is not None else UNKNOWN_VALUE
        if self.record:  # (``remember``, inline: the interpreter's most frequent call)
            values = self.values
            old = values.get(node)
            values[node] = value if old is None or old is value else join(old, value)
        return value

    def _ev_told(self, node: ast.AST, state: dict) -> Value:
        """``ev``, where an expression the analysis cannot place is placed as
        the run's evidence says (``Evidence``); placed values keep their place."""
        handler = _EXPRESSIONS.get(type(node))
        value = handler(self, node, state) if handler is not None else UNKNOWN_VALUE
        told = self.flow.evidence_places.get((type(node), node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)) if hasattr(node, "lineno") else None
        if told is not None and value.what in (What.TENSOR, What.UNKNOWN, What.MODULE) and not any(p is HOST or type(p) is Device for p, _ in value.places):
            value = value.but(what=What.TENSOR if value.what is What.UNKNOWN else value.what, places=frozenset({told}))
        if self.record:
            self.remember(node, value)
        return value

    def note_call(self, node: ast.Call, positional: list[Value], keywords: dict, callee: ast.AST, implicit_self: bool) -> None:
        """The arguments a call of a function of this file passes, for its context."""
        self.callees[node] = (callee, implicit_self)
        self.called.add(node.func)
        if type(node.func) is ast.Attribute and node.func.attr == callee.name:
            self.references[node.func] = callee
        old = self.calls.get(node)
        if old is not None:
            positional = [join(a, b) for a, b in zip(old[0], positional)]
            keywords = {k: join(old[1].get(k), v) for k, v in keywords.items()}
        self.calls[node] = (positional, keywords)

    def remember(self, node: ast.AST, value: Value) -> None:
        old = self.values.get(node)
        self.values[node] = value if old is None or old is value else join(old, value)

    def note_flag(self, test: ast.AST) -> None:
        """Remember chains tested like flags (``if args.cuda:``), for device_at."""
        if not self.record:
            return
        tests = test.values if type(test) is ast.BoolOp else [test]
        for sub in tests:
            if type(sub) is ast.UnaryOp and type(sub.op) is ast.Not:
                sub = sub.operand
            chain = chain_of(sub)
            if chain is not None and chain.rsplit(".", 1)[-1] in FLAG_NAMES:
                self.flag_tests.append(sub)

    def arguments(self, node: ast.Call, state: dict) -> tuple[list[Value], dict[str | None, Value]]:
        positional = [self.ev(arg, state) for arg in node.args]
        keywords: dict[str | None, Value] = {}
        for keyword in node.keywords:
            value = self.ev(keyword.value, state)
            if keyword.arg is None and "device" not in keywords:
                # f(**kw): a device may be in it (dd = dict(device=device); torch.zeros(3, **dd))
                items = dict(value.parts.items) if isinstance(value.parts, Parts) else {}
                keywords["device"] = items.get("device", UNKNOWN_VALUE)
            keywords[keyword.arg] = join(keywords.get(keyword.arg), value)
        return positional, keywords

    def placed(self, node: ast.Call, device: Value, zero_dim: bool = False) -> Value:
        places = self.target_places(device, node)
        return Value(What.TENSOR, places if places is not None else UNKNOWN_PLACES, flags=ZERO_DIM if zero_dim else 0)

    def target_places(self, device: Value, node: ast.AST) -> frozenset | None:
        """Where ``.to(d)`` / ``device=d`` puts a tensor; None when ``d`` is not a device."""
        if device.what is What.DEVICE:
            return frozenset((p, node) for p, _ in device.places)
        if device.what is What.TENSOR:  # x.to(other): other's device (and dtype)
            return frozenset((p, node) for p, _ in device.places)
        if type(device.ref) is str and (device.ref in DTYPES or device.ref.startswith("numpy.")):
            return None
        if device.ref == DTYPE:
            return None
        return frozenset({(UNKNOWN, None)})  # a string or number: a device not known

    def element(self, iterable: Value) -> Value:
        """What iterating ``iterable`` yields."""
        if isinstance(iterable.parts, Parts):
            elem = iterable.parts.elem
            return UNKNOWN_VALUE if elem is NOTHING else elem
        if iterable.what is What.TENSOR:
            # an element may be 0-dim (every one of a 1-d tensor's is: `for i
            # in torch.arange(n)`), and a 0-dim host one meets a device tensor
            # legally; taken so for any tensor iterated over (a row of a 2-d
            # one is not 0-dim: a miss, never a wrong fix)
            return iterable.but(flags=(iterable.flags & ~FOLLOWS_MODULE) | ZERO_DIM)
        if iterable.what is What.ARRAY:
            return iterable
        if iterable.what is What.SCALAR:
            return SCALAR_VALUE
        if type(iterable.ref) is Instance and iterable.ref.cls is not None and iterable.what is not What.MODULE:
            return calls.iterated_instance(self, iterable.ref.cls)  # `for x in Batches(data):`
        return UNKNOWN_VALUE


_STATEMENTS = {
    ast.Expr: statements.s_expr,
    ast.Assign: statements.s_assign,
    ast.AnnAssign: statements.s_annassign,
    ast.AugAssign: statements.s_augassign,
    ast.If: statements.s_if,
    ast.For: statements.s_for,
    ast.AsyncFor: statements.s_for,
    ast.While: statements.s_while,
    ast.With: statements.s_with,
    ast.AsyncWith: statements.s_with,
    ast.Try: statements.s_try,
    ast.Return: statements.s_return,
    ast.Raise: statements.s_raise,
    ast.Break: statements.s_break,
    ast.Continue: statements.s_continue,
    ast.Assert: statements.s_assert,
    ast.Delete: statements.s_delete,
    ast.FunctionDef: statements.s_function,
    ast.AsyncFunctionDef: statements.s_function,
    ast.ClassDef: statements.s_class,
    ast.Import: statements.s_import,
    ast.ImportFrom: statements.s_importfrom,
    ast.Match: statements.s_match,
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = statements.s_try

_EXPRESSIONS = {
    ast.Constant: expressions.e_constant,
    ast.Name: expressions.e_name,
    ast.Attribute: expressions.e_attribute,
    ast.Subscript: calls.e_subscript,
    ast.Starred: expressions.e_starred,
    ast.Tuple: expressions.e_sequence,
    ast.List: expressions.e_sequence,
    ast.Dict: expressions.e_dict,
    ast.Set: expressions.e_set,
    ast.ListComp: expressions.e_comprehension,
    ast.SetComp: expressions.e_comprehension,
    ast.GeneratorExp: expressions.e_comprehension,
    ast.DictComp: expressions.e_comprehension,
    ast.UnaryOp: expressions.e_unaryop,
    ast.BinOp: expressions.e_binop,
    ast.BoolOp: expressions.e_boolop,
    ast.Compare: expressions.e_compare,
    ast.IfExp: expressions.e_ifexp,
    ast.NamedExpr: expressions.e_namedexpr,
    ast.JoinedStr: expressions.e_joinedstr,
    ast.Lambda: expressions.e_lambda,
    ast.Await: expressions.e_await,
    ast.Yield: expressions.e_await,
    ast.YieldFrom: expressions.e_await,
    ast.Slice: expressions.e_slice,
    ast.Call: calls.e_call,
}
