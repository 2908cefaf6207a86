"""What the rules need to know about a file beyond the device flow, computed
once per file and shared by every rule: the libcst side of the syntax (parents,
spans, enclosing statements), which classes are ``nn.Module``s, how to spell a
new device or ``torch`` function where a fix goes. What a value is and where it
lives is the device flow's answer (``flow.FileFlow``, through ``flow_of``,
``value_of``, ``tensor_parameters``): there is one analysis of values.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Iterable, NamedTuple, Sequence

import libcst as cst

from fixdev.engine import ast_reuse
from fixdev.engine.ast_reuse import remembered
from fixdev.engine.rule import Edit, child_nodes, dotted

from fixdev.analysis import placement
from fixdev.analysis.flow import AST_LEAVES, LIGHTNING_MODULES, NOT_MODULES, ast_children, ast_walk
from fixdev.analysis.flow.sinks import may_index_by_tensor
from fixdev.analysis.flow.sources import source_chains

if TYPE_CHECKING:
    from fixdev.engine.rule import Rule, RuleContext, Screening

    from fixdev.analysis.flow import FileFlow, Value, What


# Factories: fresh tensors, on the CPU unless device= is given.
TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "zeros ones empty full rand randn randint randperm arange range linspace logspace eye "
        "tensor as_tensor scalar_tensor from_numpy empty_strided tril_indices triu_indices "
        "bartlett_window blackman_window hamming_window hann_window kaiser_window"
    ).split()
)
# The factories' names as a call writes them (``zeros`` of ``torch.zeros``).
FACTORY_NAMES = frozenset(name.split(".")[-1] for name in TENSOR_FACTORIES)


def word_call(names: Iterable[str]) -> str:
    """A pattern for a call of any of ``names`` by its last name
    (``\\b(?:zeros|ones|...)\\s*\\(``), the names grouped by their first letter
    behind a lookahead for those letters: ``re`` then rejects most positions
    of a text at one character instead of trying each name there (the same
    matches, in two thirds of the time on real code)."""
    by_letter: dict[str, list[str]] = {}
    for name in sorted(set(names)):
        by_letter.setdefault(name[0], []).append(re.escape(name[1:]))
    groups = "|".join(f"{letter}(?:{'|'.join(sorted(rests, key=len, reverse=True))})" for letter, rests in sorted(by_letter.items()))
    return r"(?=[%s])\b(?:%s)\s*\(" % ("".join(sorted(by_letter)), groups)


# For the rules' text pre-filters: a call of any factory, by its last name.
FACTORY_CALL = word_call(FACTORY_NAMES)
# Tensor methods whose result is a tensor on the receiver's device.
TENSOR_METHODS = frozenset(
    (
        "abs add addmm all any amax amin argmax argmin argsort bmm bool byte ceil char chunk "
        "clamp clamp_ clip clone contiguous cos cumsum detach div double exp expand expand_as "
        "fill_ flatten flip float floor gather half int log log_softmax long masked_fill "
        "masked_fill_ matmul max mean min mm mul neg norm normal_ permute pow relu repeat "
        "repeat_interleave reshape roll round rsqrt sigmoid sign sin softmax sort split sqrt "
        "square squeeze std sub sum t tanh topk transpose tril triu type_as uniform_ unbind "
        "unflatten unsqueeze var view view_as where zero_ bfloat16 numpy tolist item"
    ).split()
)
MOVES = frozenset({"to", "cuda", "cpu", "type_as"})


def of(rule: "Rule") -> "FileAnalysis":
    """The analysis of the file ``rule`` is looking at, made on first use."""
    shared = rule.context.shared
    if "analysis" not in shared:
        shared["analysis"] = FileAnalysis(rule.context)
    return shared["analysis"]


def flow_of(rule: "Rule") -> "FileFlow":
    """The device flow (``flow.FileFlow``) of the file ``rule`` is looking at,
    made on first use."""
    return flow_for(rule.context)


def flow_for(facts: "RuleContext | Screening") -> "FileFlow":
    """The device flow of a file being screened or visited, made once: a
    screen's flow is the one the rules then visit with."""
    shared = facts.shared
    if "flow" not in shared:
        from fixdev.analysis.flow import FileFlow

        # calls of the run's other files' functions: codemods.project's facts, when the engine has them
        source = facts.tree if facts.tree is not None else facts.text
        shared["flow"] = FileFlow(source, text=facts.text, project=facts.project)
    return shared["flow"]


def calls_named(facts: "RuleContext | Screening", *names: str) -> list[ast.Call]:
    """The calls of the file's CPython tree whose callee's last name is one of
    ``names`` (``torch.zeros(...)``, ``zeros(...)``), in source order."""
    calls = _ast_index(facts).calls
    return sorted((call for name in names for call in calls.get(name, ())), key=lambda c: (c.lineno, c.col_offset))


def method_holding(facts: "RuleContext | Screening", call: ast.Call) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The method (a function right in a class body) that holds ``call``, the
    innermost such; None outside methods."""
    return _ast_index(facts).methods.get(call)


def class_definitions(facts: "RuleContext | Screening") -> list[ast.ClassDef]:
    """Every class statement of the file's CPython tree, nested ones too."""
    return _ast_index(facts).classes


def imported_names(facts: "RuleContext | Screening") -> set[str]:
    """Every name an import binds anywhere in the file (``t`` for ``import
    torch as t``, ``torch`` for ``import torch.nn``): a name no import binds
    has no qualified name (``RuleContext.qualified_names``)."""
    return _ast_index(facts).imported


def torch_imported_names(facts: "RuleContext | Screening") -> set[str]:
    """The names imports of ``torch`` or its modules bind (``nn`` for
    ``import torch.nn as nn`` or ``from torch import nn``, ``torch`` for
    ``import torch.nn``), and ``*`` where any star import may bind a name:
    only such a name's qualified name can be a torch one."""
    return _ast_index(facts).torch_imported


class _AstIndex(NamedTuple):
    calls: dict[str, list[ast.Call]]  # by the callee's last name
    methods: dict[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef]  # the method holding each call
    classes: list[ast.ClassDef]
    imported: set[str]
    torch_imported: set[str]
    index_reads: list[ast.Subscript]  # subscripts whose index may be a tensor (``sinks.may_index_by_tensor``)


def _ast_index(facts: "RuleContext | Screening") -> _AstIndex:
    """One pass over the file's CPython tree for what screens look up; it
    also records every node's parent, for ``ast_parents``. In the language
    server it is put together from each top-level statement's (kept across
    versions), in the order one pass over the whole tree meets them."""
    shared = facts.shared
    if "ast_index" not in shared:
        flow = flow_for(facts)
        if ast_reuse.active() is None:  # the CLI: one pass over the whole tree
            index, parents = _statement_index(flow.tree)
        else:
            index, parents = _composed_index(flow.tree)
        if getattr(flow, "parents", None) is None:
            flow.parents = parents
        shared["ast_index"] = index
    return shared["ast_index"]


def set_in_apply(facts: "RuleContext | Screening") -> frozenset:
    """The attribute names an ``_apply`` override in the file assigns
    (``m.grid = list(map(fn, m.grid))``): state the code moves itself
    whenever ``.to()`` / ``.cuda()`` / ``.half()`` reach the module."""
    shared = facts.shared
    if "set_in_apply" not in shared:
        found = set()
        if "_apply" in facts.text:
            for node in ast_walk(flow_for(facts).tree):
                if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef) and node.name == "_apply":
                    found.update(t.attr for sub in ast_walk(node) if type(sub) is ast.Assign for t in sub.targets if type(t) is ast.Attribute)
        shared["set_in_apply"] = frozenset(found)
    return shared["set_in_apply"]


def _composed_index(tree: ast.Module) -> tuple[_AstIndex, dict]:
    """``_statement_index(tree)``, from each top-level statement's, kept across versions."""
    index = _AstIndex({}, {}, [], set(), set(), [])
    parents: dict[ast.AST, ast.AST] = {}
    for statement in reversed(tree.body):  # (a stack: the last statement is walked first)
        part, part_parents = remembered("ast index", statement, lambda statement=statement: _statement_index(statement))
        for name, calls in part.calls.items():
            index.calls.setdefault(name, []).extend(calls)
        index.methods.update(part.methods)
        index.classes.extend(part.classes)
        index.imported.update(part.imported)
        index.torch_imported.update(part.torch_imported)
        index.index_reads.extend(part.index_reads)
        parents[statement] = tree
        parents.update(part_parents)
    return index, parents


def _statement_index(statement: ast.AST) -> tuple[_AstIndex, dict]:
    """The index and parents of ``statement``'s tree (or the module's)."""
    index = _AstIndex({}, {}, [], set(), set(), [])
    parents: dict[ast.AST, ast.AST] = {}
    stack: list[tuple[ast.AST, ast.AST | None]] = [(statement, None)]
    while stack:
        node, method = stack.pop()
        kind = type(node)
        if kind is ast.Call:
            func = node.func
            name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
            if name is not None:
                index.calls.setdefault(name, []).append(node)
            if method is not None:
                index.methods[node] = method
        elif kind is ast.ClassDef:
            index.classes.append(node)
        elif kind is ast.Subscript:
            if may_index_by_tensor(node):
                index.index_reads.append(node)
        elif kind is ast.Import or kind is ast.ImportFrom:
            index.imported.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
            if kind is ast.Import:
                index.torch_imported.update(alias.asname or "torch" for alias in node.names if alias.name == "torch" or alias.name.startswith("torch."))
            elif any(alias.name == "*" for alias in node.names):
                index.torch_imported.add("*")
            elif not node.level and node.module is not None and (node.module == "torch" or node.module.startswith("torch.")):
                index.torch_imported.update(alias.asname or alias.name for alias in node.names)
            else:  # torch re-exported by a module of the project (`from common import torch`)
                index.torch_imported.update(alias.asname or alias.name for alias in node.names if alias.name == "torch")
        in_class = kind is ast.ClassDef
        for child in ast_children(node):
            parents[child] = node
            child_kind = type(child)
            if child_kind not in AST_LEAVES:  # nothing to index in a name or a constant, nor below it
                stack.append((child, child if in_class and child_kind in (ast.FunctionDef, ast.AsyncFunctionDef) else method))
    return index, parents


def call_arguments(call: ast.Call) -> list[ast.expr]:
    """A call's argument values (CPython's tree), keyword ones too (``*x`` counts as ``x``)."""
    return [arg.value if type(arg) is ast.Starred else arg for arg in call.args] + [keyword.value for keyword in call.keywords]


def has_sink(screening: "Screening", *kinds: str, at: Sequence[ast.AST] | None = None) -> bool:
    """Whether the device flow finds a sink of one of ``kinds`` in the file:
    the screen of the rules that report at sinks. ``at``: the only nodes
    such sinks can form at (``index_reads``): then only the runs of the
    scopes holding them are made (and what those runs ask for)."""
    flow = flow_for(screening)
    if at is None:
        return any(sink.kind in kinds for sink in flow.sinks())
    scopes = {}
    for node in at:
        scope = flow.index.scope_at((node.lineno, node.col_offset))
        while scope.kind == "class":  # a class body runs in the scope around it
            scope = scope.parent
        scopes[scope.node] = scope
    return bool(scopes) and any(sink.kind in kinds for sink in flow.sinks(scopes.values()))


def index_reads(screening: "Screening") -> list[ast.Subscript]:
    """The file's subscripts whose index may be a tensor: where the flow's
    ``"index"`` and ``"index-relative"`` sinks form (``expressions.index_meets``)."""
    return _ast_index(screening).index_reads


def has_entry(screening: "Screening") -> bool:
    """Whether a plain class's method takes a tensor it meets on the class's own device (``flow.entry_moves``)."""
    return bool(flow_for(screening).entry_moves())


def value_of(rule: "Rule", expr: cst.CSTNode) -> "Value":
    """What the device flow knows of ``expr`` (a libcst node of the file
    ``rule`` is looking at): ``UNKNOWN_VALUE`` where it has no answer."""
    from fixdev.analysis.flow import UNKNOWN_VALUE

    flow = flow_of(rule)
    node = flow.node_at(*rule.span(expr))
    return flow.value(node) if node is not None else UNKNOWN_VALUE


def what_of(rule: "Rule", expr: cst.CSTNode) -> "What":
    return value_of(rule, expr).what


def tensor_parameters(rule: "Rule", func: cst.FunctionDef) -> list[str]:
    """The parameters ``func`` treats as tensors (``FileFlow.tensor_parameters``)."""
    flow = flow_of(rule)
    function = flow.function_at(rule.span(func.name)[0])
    return flow.tensor_parameters(function) if function is not None else []


def first_tensor_parameter(rule: "Rule", func: cst.FunctionDef) -> str | None:
    return next(iter(tensor_parameters(rule, func)), None)


def ast_parents(flow: "FileFlow") -> dict:
    """Every node of the flow's ``ast`` tree → its parent, made once per file."""
    parents = getattr(flow, "parents", None)
    if parents is None:
        parents = {child: parent for parent in ast_walk(flow.tree) for child in ast_children(parent)}
        flow.parents = parents
    return parents


def fixed_by_a_bare_move(flow: "FileFlow", name: str, origin) -> bool:
    """A statement ``name.to(...)`` / ``name.cuda()`` whose result is dropped
    follows ``origin`` in its function: the value was meant to move, and
    ``cuda-call`` / ``discarded-to`` make that statement assign, which is the
    whole fix (another rule moving it again would be noise)."""
    import ast

    parents = ast_parents(flow)
    scope = parents.get(origin)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        scope = parents.get(scope)
    scope = scope if scope is not None else flow.tree
    # the last line of each name's bare moves in the scope, found once (a walk
    # of the scope per finding made a file of n findings cost n²)
    key = ("bare moves", scope)
    moves = flow.cache.get(key)
    if moves is None:
        moves = flow.cache[key] = {}
        for statement in ast_walk(scope):
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                func = statement.value.func
                if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda") and isinstance(func.value, ast.Name):
                    moves[func.value.id] = max(moves.get(func.value.id, 0), statement.lineno)
    return moves.get(name, 0) > origin.lineno


def last_name(node: cst.CSTNode) -> str | None:
    """``ones`` for ``torch.ones``, ``t.ones`` and ``ones``: a cheap check
    before asking for qualified names."""
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def is_name_chain(node: cst.CSTNode) -> bool:
    """``x``, ``self.x``, ``a.b.c``: names only, nothing evaluated but lookups."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def chain_root(node: ast.expr) -> ast.Name | None:
    """``x`` of ``x``, ``x.a.b`` (CPython's tree); None for other expressions."""
    while type(node) is ast.Attribute:
        node = node.value
    return node if type(node) is ast.Name else None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


class FileAnalysis:
    def __init__(self, context: "RuleContext") -> None:
        self.module = context.module
        self._context = context
        self._parents = context.parents()
        self._module_classes: set[cst.ClassDef] | None = None
        self._indexes: dict[int, tuple] = {}  # id(body) -> (body, its table); the body kept so its id is not reused

    # -- basic facts ---------------------------------------------------------------

    def qnames(self, node: cst.CSTNode) -> set[str]:
        return self._context.qualified_names(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def start(self, node: cst.CSTNode) -> int:
        return self._context.spans()[node].start

    def end(self, node: cst.CSTNode) -> int:
        span = self._context.spans()[node]
        return span.start + span.length

    def statement_at(self, offset: int) -> cst.CSTNode | None:
        """The block-level statement (a line or a compound statement) that
        starts at character ``offset``, for rules that find sites in ``ast``."""
        return self._context.spans().statement_at(offset)

    def call_at(self, start: int, end: int) -> cst.Call | None:
        """The call whose span is ``text[start:end]``, for rules that find
        sites in ``ast`` (whose call spans exclude enclosing parentheses)."""
        return self._context.spans().call_at(start, end)

    def index_in(self, body: Sequence[cst.CSTNode], statement: cst.CSTNode) -> int:
        """``body.index(statement)`` (libcst's nodes are equal by identity),
        from a table made once per body: asked once per fix, a search of the
        body made a module of n findings cost n²."""
        entry = self._indexes.get(id(body))
        if entry is None:
            entry = self._indexes[id(body)] = (body, {id(node): i for i, node in enumerate(body)})
        found = entry[1].get(id(statement))
        if found is None:
            raise ValueError(f"{type(statement).__name__} is not in the body")
        return found

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        while node is not None and not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            node = self.parent(node)
        return node

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        node = self.parent(node)
        while node is not None and not isinstance(node, kind):
            node = self.parent(node)
        return node

    def enclosing_method(self, node: cst.CSTNode) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The module class and its method that contain ``node``, if any: a
        method ``self`` is bound in (not a ``@classmethod`` or
        ``@staticmethod``, whose ``self.device`` would raise NameError), as
        every rule that takes a device from ``self`` asks here."""
        func = self.enclosing(node, cst.FunctionDef)
        while func is not None:
            owner = self.parent(self.parent(func))  # FunctionDef → IndentedBlock → ClassDef
            if isinstance(owner, cst.ClassDef):
                return (owner, func) if owner in self.module_classes and binds_self(func) else None
            func = self.enclosing(func, cst.FunctionDef)
        return None

    # -- which classes are modules -----------------------------------------------

    @property
    def module_classes(self) -> set[cst.ClassDef]:
        """The file's ``nn.Module`` classes, found on first use."""
        if self._module_classes is None:
            self._module_classes = self._find_module_classes()
        return self._module_classes

    def _find_module_classes(self) -> set[cst.ClassDef]:
        classes = self._context.index().classes
        found: set[cst.ClassDef] = set()
        local_names: set[str] = set()
        changed = True
        while changed:  # a class may derive from a module class defined later in the file
            changed = False
            for cls in classes:
                if cls in found:
                    continue
                for base in cls.bases:
                    names = self.qnames(base.value) | ({dotted(base.value)} - {None})
                    if any(self._is_module_base(n) for n in names) or names & local_names:
                        found.add(cls)
                        local_names.add(cls.name.value)
                        changed = True
                        break
        return found | {cls for cls in classes if cls not in found and (self._behaves_like_a_module(cls) or self._flow_module(cls))}

    def flow(self) -> "FileFlow":
        """The file's device flow (``flow_for``)."""
        return flow_for(self._context)

    def _flow_module(self, cls: cst.ClassDef) -> bool:
        """Whether the device flow's index takes ``cls`` for a module: through
        a base class another file of the run defines, or a library's module
        base (the index asks the project; this side knows only this file)."""
        if not cls.bases:
            return False
        flow = flow_for(self._context)
        line = flow.row_column(self.start(cls.name))[0]
        return any(info.is_module for node, info in flow.index.classes.items() if node.name == cls.name.value and node.lineno == line)

    def _behaves_like_a_module(self, cls: cst.ClassDef) -> bool:
        """A class derived from a class of another file (``class Net(BaseModel)``)
        is taken for a module only when it acts as one on its own: it defines
        ``forward`` and its ``__init__`` stores a ``torch.nn`` layer on ``self``."""
        if not cls.bases or not all(self.qnames(base.value) for base in cls.bases):
            return False  # no base, or one this file defines or cannot trace to an import
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        if "forward" not in methods or "__init__" not in methods:
            return False
        for assign in placement.own_statements(methods["__init__"].body):
            if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.value, cst.Call):
                target = assign.targets[0].target
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                    if any(self._is_module_base(n) for n in self.qnames(assign.value.func)):
                        return True
        return False

    @staticmethod
    def _is_module_base(name: str) -> bool:
        if name in NOT_MODULES:
            return False
        if name in LIGHTNING_MODULES or name == "torch.nn.Module":
            return True
        parts = name.split(".")
        if parts[:2] != ["torch", "nn"] or not parts[-1][:1].isupper():
            return False
        return len(parts) == 3 or parts[2] == "modules"

    # -- imports and new definitions ---------------------------------------------------

    @property
    def project(self):
        """What the run knows of the other files (``project.FileFacts``), or None."""
        return self._context.project

    @property
    def shared(self) -> dict:
        """Per-file memo for facts computed on demand (see ``placement``)."""
        return self._context.shared

    def index_order(self) -> list[cst.CSTNode]:
        return self._context.index().order

    def identifiers(self) -> set[str]:
        """Every name the file uses as a variable, anywhere."""
        return self._context.index().names

    def functions(self) -> list[cst.FunctionDef]:
        if "functions" not in self.shared:
            self.shared["functions"] = [n for n in self.index_order() if isinstance(n, cst.FunctionDef)]
        return self.shared["functions"]

    def torch_function(self, name: str, rule: "Rule", node: cst.CSTNode) -> tuple[str, list[Edit]] | None:
        """How to spell ``torch.<name>`` where ``node`` (a call of a function
        imported ``from torch``, or any other node) stands, with the import edits that needs: the
        module's ``import torch`` when it reaches ``node``; else the twin joins
        the ``from torch import`` that binds the called name, so it is in
        reach wherever that name is. None when neither is sure."""
        torch = placement.unconditional_torch(self)
        func = self.enclosing(node, cst.FunctionDef)
        if torch is not None and placement.bound_when_run(self, torch.statement, node) and (func is None or not placement.binds(func, torch.alias)):
            return f"{torch.alias}.{name}", []
        # a call of a name imported from torch may reach the twin through its import; any other node, only `import torch`
        called = node.func.value if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) else None
        scope = func
        while called is not None:
            for statement in placement.own_statements(scope.body if scope is not None else self.module):
                if isinstance(statement, cst.ImportFrom) and dotted(statement.module) == "torch" and not statement.relative and not isinstance(statement.names, cst.ImportStar):
                    aliases = [a for a in statement.names if isinstance(a.name, cst.Name) and a.asname is None]
                    if any(a.name.value == called for a in aliases):
                        if any(a.name.value == name for a in aliases):
                            return name, []
                        names = list(statement.names)
                        names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                        return name, [rule.replace(statement, statement.with_changes(names=[*names, cst.ImportAlias(cst.Name(name))]))]
            if scope is None:
                break
            scope = self.enclosing(scope, cst.FunctionDef)
        return None


# A name that says CUDA is in use, or that it is not (read as a test's words).
CUDA_WORD = re.compile(r"cuda|gpu|accelerator")
CPU_WORD = re.compile(r"cpu|no_cuda|no_gpu|disable")


def words_of(node: cst.CSTNode) -> list[str]:
    """The lowercased names and attribute names ``node`` reads."""
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.append(current.value.lower())
        elif isinstance(current, cst.SimpleString):
            continue
        stack.extend(child_nodes(current))
    return found


def string_of(node: cst.CSTNode) -> str | None:
    """The value of a string literal, or of ``torch.device("...")``."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.Call) and last_name(node.func) == "device" and len(node.args) == 1:
        return string_of(node.args[0].value)
    return None


def cuda_test(test: cst.BaseExpression, truth: bool) -> bool:
    """``test`` evaluating to ``truth`` shows that CUDA is in use: an
    availability check, a flag or attribute that says cuda or gpu (``args.cuda``,
    ``use_gpu``, ``x.is_cuda``, ``n_gpu > 0``), or a device compared with
    ``"cuda"`` (``device.type == "cuda"``) or ``"cpu"`` (``!=``)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return cuda_test(test.expression, not truth)
    if isinstance(test, cst.BooleanOperation):
        sides = (test.left, test.right)
        if isinstance(test.operator, cst.And) == truth:
            return any(cuda_test(side, truth) for side in sides)  # a and b true / a or b false
        return all(cuda_test(side, truth) for side in sides)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        operator = target.operator
        for side in (test.left, target.comparator):
            value = string_of(side)
            if value is None:
                continue
            positive = isinstance(operator, (cst.Equal, cst.In, cst.Is))
            if not positive and not isinstance(operator, (cst.NotEqual, cst.NotIn, cst.IsNot)):
                return False
            if value.startswith("cuda"):
                return positive == truth
            if value == "cpu":
                return positive != truth
            return False
        comparator = target.comparator
        index = _device_index_test(test.left, operator, comparator, truth)
        if index is not None:
            return index
        if not any(CUDA_WORD.search(w) for w in words_of(test)):
            return False
        if isinstance(comparator, cst.Name) and comparator.value == "None" or isinstance(comparator, cst.Integer) and comparator.value == "0":
            # `args.gpu is None`, `n_gpu == 0`: true when no GPU is chosen
            if isinstance(operator, (cst.Is, cst.Equal)):
                return not truth
            if isinstance(operator, (cst.IsNot, cst.NotEqual)):
                return truth
        return True  # torch.cuda.device_count() > 0, args.gpu >= 0
    if isinstance(test, cst.Call) and last_name(test.func) == "startswith" and test.args:
        value = string_of(test.args[0].value)
        return value is not None and value.startswith("cuda") and truth
    if isinstance(test, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        words = words_of(test) + _string_keys(test)
        if any(CPU_WORD.search(w) for w in words):
            return not truth
        return truth and any(CUDA_WORD.search(w) for w in words)
    return False


def _integer(node: cst.BaseExpression) -> int | None:
    """The value of ``3`` or ``-1``, else None."""
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.value, 0)
    return None


# A name whose integer value picks a GPU by its index, -1 (or any negative)
# for the CPU: `cuda_device`, `gpu`, `model_device`, `args.device_id`.
_DEVICE_INDEX_WORD = re.compile(r"cuda|gpu|device")


# A comparison's operator → the one that holds where it does not.
_NEGATED_COMPARISONS = {
    cst.GreaterThanEqual: cst.LessThan, cst.GreaterThan: cst.LessThanEqual, cst.LessThan: cst.GreaterThanEqual,
    cst.LessThanEqual: cst.GreaterThan, cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal,
}


def _device_index_test(left: cst.BaseExpression, operator: cst.BaseCompOp, right: cst.BaseExpression, truth: bool) -> bool | None:
    """A device index compared with a number: True where the test being
    ``truth`` leaves only indexes >= 0 (a GPU the caller chose:
    ``cuda_device >= 0``, ``device > -1``, ``gpu != -1``, ``cuda_device <
    0`` false), False where it leaves only negatives (the CPU); None where it
    is no such test (``n_gpu == 0`` counts GPUs: ``cuda_test`` reads it)."""
    bound = _integer(right)
    if bound is None or not isinstance(left, (cst.Name, cst.Attribute)):
        return None
    words = words_of(left)
    if not any(_DEVICE_INDEX_WORD.search(w) for w in words) or any(CPU_WORD.search(w) for w in words):
        return None
    if not truth:  # the test false: the negated comparison true
        negated = _NEGATED_COMPARISONS.get(type(operator))
        if negated is None:
            return None
        kind = negated
    else:
        kind = type(operator)
    if kind is cst.GreaterThanEqual:
        return True if bound >= 0 else None
    if kind is cst.GreaterThan:
        return True if bound >= -1 else None
    if kind is cst.LessThan:
        return False if bound <= 0 else None
    if kind is cst.LessThanEqual:
        return False if bound <= -1 else None
    if kind is cst.NotEqual and bound == -1:
        return True
    if kind is cst.Equal and bound < 0:
        return False
    return None


def _string_keys(test: cst.BaseExpression) -> list[str]:
    """The lowercased string keys ``test`` subscripts with (``conf["use_gpu"]``)."""
    found = []
    while isinstance(test, (cst.Subscript, cst.Attribute, cst.Call)):
        if isinstance(test, cst.Subscript):
            for element in test.slice:
                if isinstance(element.slice, cst.Index):
                    value = string_of(element.slice.value)
                    if value is not None:
                        found.append(value.lower())
        test = test.func if isinstance(test, cst.Call) else test.value
    return found


def cuda_guarded(facts: "FileAnalysis", node: cst.CSTNode) -> bool:
    """``node`` runs only where an ``if`` shows CUDA in use (``cuda_test``,
    the one notion of a CUDA test every rule's silence uses): in its body,
    in its ``else`` / ``elif`` where the test being false shows it (``if
    cuda_device < 0: return x`` / ``else: x.cuda(cuda_device)``), or after
    an ``if`` of the same block whose body exits where it does not (``if not
    torch.cuda.is_available(): return``): code written for the GPU, on purpose."""
    child, block = node, facts.parent(node)
    while block is not None:
        if isinstance(block, cst.If):
            if child is block.body and cuda_test(block.test, True):
                return True
            if child is block.orelse and cuda_test(block.test, False):
                return True
        if isinstance(block, cst.IndentedBlock) and _exits_before_without_cuda(facts, block, child):
            return True
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child, block = block, facts.parent(block)
    return False


def _exits_before_without_cuda(facts: "FileAnalysis", block: cst.IndentedBlock, statement: cst.CSTNode) -> bool:
    """An ``if`` before ``statement`` in ``block``, without ``else``, whose
    test true shows no CUDA and whose body ends in ``return`` / ``raise``."""
    try:
        index = facts.index_in(block.body, statement)
    except ValueError:
        return False
    for earlier in block.body[:index]:
        if isinstance(earlier, cst.If) and earlier.orelse is None and _ends_in_exit(earlier.body) and cuda_test(earlier.test, False):
            return True
    return False


def _ends_in_exit(body: cst.BaseSuite) -> bool:
    last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else None
    if isinstance(body, cst.SimpleStatementSuite):
        last = body
    return isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and isinstance(last.body[-1], (cst.Return, cst.Raise))


def runs_without_cuda(facts: "FileAnalysis", node: cst.CSTNode) -> bool:
    """``node`` runs only where CUDA is not in use, so nothing there is on a
    GPU (the flow joins both branches): in the ``else`` (or ``elif``) of an
    ``if`` that tests for CUDA (``torch.cuda.is_available()``, ``args.cuda``,
    ``train_on_gpu``, ``x.is_cuda``...), under ``if not`` such a test, or in
    the matching branch of a conditional expression (``a.numpy() if not
    train_on_gpu else a.cpu().numpy()``)."""
    child, block = node, facts.parent(node)
    while block is not None:
        if isinstance(block, (cst.If, cst.IfExp)):
            truth = True if child is block.body else False if child is block.orelse else None
            if truth is not None and without_cuda(block.test, truth):
                return True
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child, block = block, facts.parent(block)
    return False


def without_cuda(test: cst.BaseExpression, truth: bool) -> bool:
    """``test`` evaluating to ``truth`` shows that CUDA is not in use: a CUDA
    test that is false (``not train_on_gpu``, the ``else`` of ``if
    args.cuda:``), a CPU flag that is true (``args.no_cuda``), a device
    compared with ``"cpu"``. An ``and``/``or`` of tests says nothing here (``a
    and b`` false does not make either false)."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, truth = test.expression, not truth
    if isinstance(test, cst.BooleanOperation):
        return False
    if not truth and cuda_test(test, True):
        return True
    if isinstance(test, cst.Comparison):
        # only a device compared with a string: `n_gpu > 0` is not two-valued here
        sides = [test.left, *(c.comparator for c in test.comparisons)]
        if not any(string_of(side) is not None for side in sides):
            return False
    elif not isinstance(test, (cst.Name, cst.Attribute, cst.Call)):
        return False
    return cuda_test(test, not truth)


def binds_self(func: cst.FunctionDef) -> bool:
    """A method whose first parameter is the instance: it has one, and no
    ``@classmethod`` / ``@staticmethod`` (the flow's scopes read it alike)."""
    params = func.params
    if not (params.posonly_params or params.params):
        return False
    for decorator in func.decorators:
        if dotted(decorator.decorator) in ("classmethod", "staticmethod"):
            return False
    return True


def method_input_device(rule: "Rule", node: cst.CSTNode, moved: cst.BaseExpression | None = None) -> str | None:
    """In a module's method (not ``__init__``), the device of its first
    tensor parameter (``x.device``): an input of a module is on the module's
    device. None when ``moved`` (the value a fix moves there) is made from
    that parameter (``F.pad(x).cuda()``: the value is where ``x`` is, the
    CPU, and ``.to(x.device)`` would move nothing), and in ``__init__``, whose
    parameters are the module's configuration (a vocabulary with a
    ``size()``), not its inputs."""
    method = of(rule).enclosing_method(node)
    if method is None or method[1].name.value == "__init__":
        return None
    tensor = first_tensor_parameter(rule, method[1])
    if tensor is None:
        return None
    if moved is not None:
        flow = flow_of(rule)
        at = flow.node_at(*rule.span(moved))
        if at is None:
            return None
        sources = source_chains(flow, flow.index.scope_at((at.lineno, at.col_offset)), at)
        if any(source == tensor or source.startswith(tensor + ".") for source in sources):
            return None
    return f"{tensor}.device"


def device_expression(rule: "Rule", node: cst.CSTNode, moved: cst.BaseExpression | None = None) -> tuple[str, list[Edit]] | None:
    """The device to move things to at ``node``, and the edits that define it;
    None when no definition can be placed safely (report without a fix).

    In a module's method, the device of its first tensor parameter
    (``method_input_device``); else what the device flow names at that line (a tensor the line works with, the
    module's own device, a device variable or flag in reach; see
    ``FileFlow.device_at``), when every name it reads is bound there; else a
    device already bound wherever ``node`` runs; else a new
    ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")``
    where it is sure to run first (see ``placement.define_device``).
    ``moved`` is the value a fix moves there, when there is one.
    """
    facts = of(rule)
    flow = flow_of(rule)
    input_device = method_input_device(rule, node, moved)
    if input_device is not None:
        return input_device, []
    # asked at the value being moved, so that value itself is not the answer
    at = flow.node_at(*rule.span(moved if moved is not None else node))
    flowed = flow.device_at(at, moving=moved is not None) if at is not None else None
    statement = facts.statement_of(node)
    if flowed is not None and statement is not None and placement.expression_bound_at(facts, flowed, statement):
        return flowed, []
    existing = placement.existing_device(facts, node)
    if existing is not None:
        return existing, []
    return placement.define_device(rule, facts, node)


# Tensor methods whose result shares the receiver's storage: a write to one is a write to the other.
VIEW_METHODS = frozenset("view view_as reshape t T mT permute transpose squeeze unsqueeze expand expand_as narrow select flatten unflatten unbind split chunk detach as_strided diagonal real imag".split())
# Attributes of a tensor that are views of it (`y.data`, `y.T`); any other
# attribute read from the result (`layer.weight`) shows it is a module or
# another object, whose `.to()` takes no `copy=` and moves in place anyway.
VIEW_ATTRIBUTES = frozenset("data T mT H mH real imag".split())


def written_in_place(rule: "Rule", call: cst.Call) -> bool:
    """The result of ``call`` (a move such as ``x.cuda()``) may later be
    written in place: ``.add_()``/``.zero_()``/``.copy_()``…, an indexed or
    sliced assignment, ``+=``, ``out=``, or ``nn.init.*_(...)``, on it or on a
    view of it, in the same function after the call (anywhere in an
    enclosing loop). ``.cuda()`` always copies a CPU tensor, ``.to(device)``
    on the CPU returns the tensor itself: with such a write the rewrite must
    say ``copy=True``, or the write lands in the original (issue 25)."""
    import ast as _ast

    flow = flow_of(rule)
    at = flow.node_at(*rule.span(call))
    if at is None:
        return False
    receiver = at.func.value if type(at) is _ast.Call and type(at.func) is _ast.Attribute else None
    while type(receiver) is _ast.Call and type(receiver.func) is _ast.Attribute and type(receiver.func.value) is _ast.Call:
        receiver = receiver.func.value  # torch.zeros(n).float().cuda(): down to the factory
    if type(receiver) is _ast.Call:
        func = receiver.func
        name = func.attr if type(func) is _ast.Attribute else func.id if type(func) is _ast.Name else None
        if name in FACTORY_NAMES - {"as_tensor", "from_numpy"}:
            return False  # a tensor made on that line: nothing else holds it to be written through
    parents = ast_parents(flow)
    parent = parents.get(at)
    if type(parent) is _ast.Attribute and parent.attr.endswith("_") and not parent.attr.startswith("_"):
        return True  # x.cuda().zero_()
    if type(parent) is _ast.Subscript and type(parent.ctx) is _ast.Store:
        return True
    statement, scope = at, None
    while statement is not None and not isinstance(statement, _ast.stmt):
        statement = parents.get(statement)
    if type(statement) is not _ast.Assign or statement.value is not at:
        return False  # only a name bound to the result is followed
    names = {t.id for t in statement.targets if type(t) is _ast.Name}
    if not names:
        return False
    scope, loop = parents.get(statement), None
    while scope is not None and not isinstance(scope, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.Module)):
        if loop is None and isinstance(scope, (_ast.For, _ast.AsyncFor, _ast.While)):
            loop = scope
        scope = parents.get(scope)
    after = (statement.end_lineno, statement.end_col_offset)
    low, high = ((loop.lineno, loop.col_offset), (loop.end_lineno, loop.end_col_offset)) if loop is not None else (after, None)

    def counts(node) -> bool:
        position = (node.lineno, node.col_offset)
        return position >= after or (high is not None and low <= position <= high)

    nodes = [n for n in _ast.walk(scope) if hasattr(n, "lineno")]
    changed = True
    while changed:  # views of the result: v = y.view(...), v = y[0]
        changed = False
        for node in nodes:
            if type(node) is _ast.Assign and counts(node) and len(node.targets) == 1 and type(node.targets[0]) is _ast.Name and node.targets[0].id not in names:
                value = node.value
                while type(value) in (_ast.Call, _ast.Attribute, _ast.Subscript):
                    if type(value) is _ast.Call:
                        value = value.func
                        if type(value) is not _ast.Attribute or value.attr not in VIEW_METHODS:
                            value = None  # y(x), y.other(): a new value, no view (a module's output)
                            break
                    elif type(value) is _ast.Attribute and value.attr not in VIEW_ATTRIBUTES:
                        value = None
                        break
                    value = value.value
                if type(value) is _ast.Name and value.id in names and value is not node.value:
                    names.add(node.targets[0].id)
                    changed = True

    def held(expr) -> bool:
        """``y``, ``y.data``, ``y[0]``, ``y.view(-1)[0]``: the result or a view of
        it (not ``y.weight``: a module's parameter, written where it lives)."""
        while type(expr) in (_ast.Attribute, _ast.Subscript, _ast.Call):
            if type(expr) is _ast.Call:
                if type(expr.func) is not _ast.Attribute or expr.func.attr not in VIEW_METHODS:
                    return False
                expr = expr.func
            elif type(expr) is _ast.Attribute and expr.attr not in VIEW_ATTRIBUTES:
                return False
            expr = expr.value
        return type(expr) is _ast.Name and expr.id in names

    for node in nodes:
        if not counts(node):
            continue
        if type(node) is _ast.Call:
            func = node.func
            name = func.attr if type(func) is _ast.Attribute else func.id if type(func) is _ast.Name else ""
            if name.endswith("_") and not name.startswith("_"):
                if type(func) is _ast.Attribute and held(func.value):
                    return True
                if node.args and held(node.args[0]):
                    return True  # nn.init.zeros_(y), torch.add_? (functions writing their first argument)
            if any(k.arg == "out" and held(k.value) for k in node.keywords):
                return True
        elif type(node) is _ast.Assign and any(type(t) is _ast.Subscript and held(t) for t in node.targets):
            return True
        elif type(node) is _ast.AugAssign and held(node.target):
            return True
    return False


def with_keyword_argument(call: cst.Call, keyword: str, value: str) -> cst.Call:
    """``call`` with ``keyword=value`` added last, in the call's own layout:
    on a line of its own when the arguments stand one a line, the trailing
    comma kept where there was one, comments left on the lines they were on."""
    args = list(call.args)
    new = cst.Arg(value=cst.parse_expression(value), keyword=cst.Name(keyword), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    before_last = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else call.whitespace_before_args
    trailing_comma = isinstance(last.comma, cst.Comma)
    closing = last.comma.whitespace_after if trailing_comma else last.whitespace_after_arg  # up to ")"
    if isinstance(before_last, cst.ParenthesizedWhitespace):
        # one argument a line: the new one gets a line, indented like the last
        after_last: cst.BaseParenthesizableWhitespace = cst.ParenthesizedWhitespace(
            first_line=closing.first_line if isinstance(closing, cst.ParenthesizedWhitespace) else cst.TrailingWhitespace(),
            indent=True,
            last_line=before_last.last_line,
        )
        if isinstance(closing, cst.ParenthesizedWhitespace):
            closing = closing.with_changes(first_line=cst.TrailingWhitespace())
    else:
        after_last = cst.SimpleWhitespace(" ")
    if trailing_comma:
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=after_last))
        new = new.with_changes(comma=cst.Comma(whitespace_before=last.comma.whitespace_before, whitespace_after=closing))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=after_last), whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=closing)
    return call.with_changes(args=[*args, new])


def call_text(rule: "Rule", method: str, args: list[str], kept: Iterable[cst.Arg]) -> str:
    """``method(a, b, kw=v)``: new leading arguments, then kept arguments as written."""
    module = rule.context.module
    written = [module.code_for_node(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip() for a in kept]
    return f"{method}({', '.join([*args, *written])})"
