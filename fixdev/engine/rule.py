"""What a rule is: the base class every module in ``codemods/`` subclasses.

A rule is a libcst visitor. It looks at nodes, and for each problem it calls
``self.report(node, fix=...)``. A fix is a set of text edits on the file, built
with ``replace`` and ``insert``; the engine decides which fixes to apply, in
what order, and checks the result. A rule never reads files or prints.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import textwrap
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import libcst as cst
from libcst import BatchableCSTVisitor
from libcst.metadata import BaseMetadataProvider, CodeSpan, QualifiedNameProvider, QualifiedNameSource
from libcst.metadata import ByteSpanPositionProvider

from fixdev.engine import reparse, stop
from fixdev.engine.findings import SAFE, UNSAFE, Edit, Finding, Fix  # noqa: F401 - rules build these
from fixdev.engine.source import line_start, matches_any, trigger_branches
from fixdev.engine.spans import StatementSpans, char_spans, inside_block


class CharSpanProvider(BaseMetadataProvider[CodeSpan]):
    """Start offset and length of every node, in characters of the source text.

    libcst's public ``ByteSpanPositionProvider`` counts UTF-8 bytes; edits are
    applied to text, so its spans are mapped to characters, once per file. An
    ASCII file needs no mapping; otherwise each character beyond ASCII moves
    every later offset back by its extra bytes.
    """

    METADATA_DEPENDENCIES = (ByteSpanPositionProvider,)

    def _gen_impl(self, module: cst.Module) -> None:
        for node, span in char_spans(module.code, self.metadata[ByteSpanPositionProvider]).items():
            self.set_metadata(node, span)


def dotted(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a name or attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


# What each node type can bind, for FileIndex.
_BINDINGS: dict[type, str] = {
    cst.Name: "name",
    cst.ClassDef: "class",
    cst.Import: "import",
    cst.ImportFrom: "import",
    cst.Param: "def",
    cst.FunctionDef: "def",
    **{t: "target" for t in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.AsName, cst.NamedExpr, cst.Del)},
    cst.Global: "scope",
    cst.Nonlocal: "scope",
    cst.MatchAs: "match",
    cst.MatchStar: "match",
    cst.MatchMapping: "rest",
}
_NODE_TYPES: dict[type, bool] = {}
# Layout tokens: most of a tree's nodes (about 60% on torch's own source), and
# no rule looks at them through the index (``run`` refuses a rule that would
# visit one). The index leaves them out: they have no parent entry and are not
# in ``order``; rules still reach them as attributes of the nodes they hold.
TRIVIA: frozenset[type] = frozenset({
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline, cst.EmptyLine,
    cst.Comment, cst.Comma, cst.Dot, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket,
    cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.AssignEqual, cst.Colon, cst.Semicolon,
})
_BUILTIN_NAMES = frozenset(dir(builtins))
# Node types whose fields hold only values and layout tokens: no child node
# (names and literals are about half of a tree's nodes).
_LEAVES: frozenset[type] = frozenset({
    cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis, cst.Pass, cst.Break, cst.Continue,
})


def _is_node(value_type: type) -> bool:
    """A node the index walks: any libcst node but the layout tokens."""
    known = _NODE_TYPES.get(value_type)
    if known is None:
        known = _NODE_TYPES[value_type] = issubclass(value_type, cst.CSTNode) and value_type not in TRIVIA
    return known


class FileIndex:
    """One cheap walk over the tree: every node's parent, layout tokens
    (``TRIVIA``) aside (libcst's
    ``ParentNodeProvider`` costs three times as much), the names imports bind,
    and the names bound any other way, for ``RuleContext.qualified_names``."""

    def __init__(self, module: cst.Module) -> None:
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.imported: set[str] = set()
        self.rebound: set[str] = set()
        self.star_import = False
        self._module = module
        self._first_binding: dict[str, int] | None = None  # built only for files with a star import
        self._star_statements: list[int] = []  # indices of module statements holding `from X import *`
        self._star_modules: set[str] = set()  # the X of each `from X import *` ("" for a relative one)
        self._targets: dict[str, set[str]] = {}
        self._top_level: set[str] = set()
        self._scoped: set[str] = set()  # names an import inside a function or class binds
        self.order: list[cst.CSTNode] = []  # every node but TRIVIA, parents before children
        self.classes: list[cst.ClassDef] = []
        self.names: set[str] = set()  # every name used as a variable (not x.attr, not keyword=)
        parents = self.parents
        parents_update, order, names, rebound, classes = parents.update, self.order, self.names, self.rebound, self.classes
        order.append(module)
        cache = reparse.active()
        # The walk is depth first, last child first: each top-level statement's
        # nodes come together, the last statement's first. Each statement's
        # walk is its own (_walk), kept by the statement's node within
        # ``reparse.reusing`` (an editor's next version holds the same nodes
        # for the statements it did not change), and replayed here in order.
        for statement in reversed(child_nodes(module)):
            key = ("index", statement)
            part = cache.by_node.get(key) if cache is not None else None
            if part is None:
                part = _walk(statement, cache.by_node if cache is not None else None)
                if cache is not None:
                    cache.by_node[key] = part
            parents_update(part.parents)
            parents[statement] = module
            order.extend(part.order)
            names.update(part.names)
            rebound.update(part.rebound)
            classes.extend(part.classes)
            for node, top_level, scoped in part.imports:
                self._imports(node, top_level, scoped)

    def _imports(self, node: cst.Import | cst.ImportFrom, top_level: bool, scoped: bool) -> None:
        if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
            self.star_import = True
            self._star_modules.add("" if node.relative or node.module is None else dotted(node.module) or "")
            return
        for alias in node.names:
            if isinstance(node, cst.Import):
                path = dotted(alias.name) or ""
                name = alias.asname.name.value if alias.asname else path.split(".")[0]
                target = path if alias.asname else name
            else:
                name = alias.asname.name.value if alias.asname else alias.name.value
                # a relative import never names torch: "" stands for "no torch name";
                # but `torch` itself re-exported by a module of the project is torch
                # (`from common import torch`: no module names another thing `torch`)
                target = "" if node.relative or node.module is None else f"{dotted(node.module)}.{alias.name.value}"
                if alias.name.value == "torch" and (node.module is None or dotted(node.module) != "torch"):
                    target = "torch"  # as the flow's ``imported_name`` reads it
            self.imported.add(name)
            self._targets.setdefault(name, set()).add(target)
            if top_level:
                self._top_level.add(name)
            if scoped:
                self._scoped.add(name)

    def module_alias(self, path: str) -> str | None:
        """A name a module-level import binds to module ``path`` (``torch`` for
        ``import torch``, ``t`` for ``import torch as t``)."""
        names = sorted(name for name in self._top_level if path in self._targets[name])
        return path if path in names else (names[0] if names else None)

    def _may_come_from_star_import(self, name: str) -> bool:
        """A name the file never binds may come from ``from X import *``; so may
        one the file binds, when a star import comes at or after the first
        module statement that binds it (the star import may rebind it). A name
        bound before every star import is the file's own."""
        if self._first_binding is None:
            self._first_binding, self._star_statements = _first_bindings(self._module)
        first = self._first_binding.get(name)
        return first is None or any(index >= first for index in self._star_statements)

    def resolve(self, name: str, attributes: list[str]) -> set[str] | None:
        """The qualified names of ``name.attr...`` when the imports alone decide
        them; None when only a scope analysis can."""
        if name not in self.imported:
            if self.star_import and self._may_come_from_star_import(name):
                modules = self._star_modules
                if name not in _BUILTIN_NAMES and all(m == "torch" or m.startswith("torch.") for m in modules):
                    # only torch's modules are star-imported: a name the file
                    # uses and does not bind comes from one of them (or raises)
                    return {".".join([module, name, *attributes]) for module in modules}
                if name == "torch":
                    # `from common import *` of a project module that imports
                    # torch: no module names something else `torch`
                    return {".".join([name, *attributes])}
                return {STAR_IMPORTED}
            return set()
        targets = self._targets[name]
        if name in self.rebound or (len(targets) != 1 and name in self._scoped):
            return None
        if name not in self._top_level and name in _BUILTIN_NAMES:
            return None  # imported in a function only: elsewhere the name is the builtin
        if len(targets) != 1:
            # Imports outside functions and classes, each its own target
            # (``try: from torch.hub import load_state_dict_from_url`` / ``except
            # ImportError: from torch.utils.model_zoo import load_url as ...``):
            # one scope holds them all, and libcst names every one.
            return {".".join([target, *attributes]) for target in targets if target}
        # A name only imports bind, all to one target, means that target
        # wherever it is bound; where it is not (a use outside the function
        # that imports it), the code would raise NameError, so no answer is
        # wrong there. libcst's scope analysis, which would say the same, costs
        # more than all the rules on a large file.
        (target,) = targets
        return {".".join([target, *attributes])} if target else set()


class _Part:
    """One top-level statement's share of a ``FileIndex``: the parents of
    the nodes below it (itself as the child of ``_ROOT``), its nodes in the
    walk's order, and what they bind and use, in the order the walk met them."""

    __slots__ = ("parents", "order", "names", "rebound", "classes", "imports")

    def __init__(self) -> None:
        self.parents: dict[cst.CSTNode, object] = {}
        self.order: list[cst.CSTNode] = []
        self.names: list[str] = []
        self.rebound: list[str] = []
        self.classes: list[cst.ClassDef] = []
        self.imports: list[tuple[cst.CSTNode, bool, bool]] = []  # (import, at the top level, in a function or class)


_ROOT = object()  # the module, above a statement walked alone
_INNER = object()  # the block above a statement inside another, walked alone
# The statements inside others whose walks are kept by node, within
# ``reparse.reusing``: an edit inside a large function makes a new function
# node, but the statements of it the edit did not touch are the nodes of the
# version before (``fixdev.engine.reparse``), and their walks serve again.
_INNER_STATEMENTS = frozenset({
    cst.SimpleStatementLine, cst.FunctionDef, cst.ClassDef, cst.If, cst.For, cst.While, cst.With, cst.Try, cst.TryStar, cst.Match,
})


def _walk(statement: cst.CSTNode, kept: dict | None = None, root: object = _ROOT) -> _Part:
    """``statement``'s share of the index; with ``kept`` (the parse cache's
    ``by_node``), the walks of the statements inside it are kept there and
    replayed: the same nodes, in the same order, bound and used the same
    way, as a walk of each node."""
    part = _Part()
    parents, order, names, rebound = part.parents, part.order, part.names, part.rebound
    parents[statement] = root
    stack: list[cst.CSTNode] = [statement]
    # Exact-type lookups throughout: libcst nodes are ABCs, and isinstance
    # on an ABC costs more here than all the rest of the walk.
    while stack:
        node = stack.pop()
        node_type = type(node)
        if kept is not None and node_type in _INNER_STATEMENTS and node is not statement:
            key = ("index", node, _INNER)
            inner = kept.get(key)
            if inner is None:
                inner = kept[key] = _walk(node, kept, _INNER)
            above = parents[node]
            parents.update(inner.parents)
            parents[node] = above
            order.extend(inner.order)
            names.extend(inner.names)
            rebound.extend(inner.rebound)
            part.classes.extend(inner.classes)
            if inner.imports:
                # walked alone, an import inside is never at the top level and
                # is in a function or class where one holds it or ``node`` does
                around = _in_a_scope(node, parents)
                part.imports.extend((found, False, scoped or around) for found, _, scoped in inner.imports)
            continue
        order.append(node)
        if node_type not in _LEAVES:
            children = child_nodes(node)
            for child in children:
                parents[child] = node
            stack.extend(children)
        kind = _BINDINGS.get(node_type)
        if kind is None:
            continue
        if kind == "name":
            # ``x.device`` and ``f(device=...)`` do not use ``device`` as a variable
            parent = parents.get(node)
            if not ((type(parent) is cst.Attribute and parent.attr is node) or (type(parent) is cst.Arg and parent.keyword is node)):
                names.append(node.value)
        elif kind == "class":
            part.classes.append(node)
            rebound.append(node.name.value)
        elif kind == "import":
            line = parents.get(node)
            part.imports.append((node, parents.get(line) is _ROOT, _in_a_scope(node, parents)))
        elif kind == "def":
            rebound.append(node.name.value)
        elif kind == "target":
            target = getattr(node, "target", None) or getattr(node, "name", None)
            if target is not None and type(parents.get(node)) is not cst.ImportAlias:
                rebound.extend(n.value for n in _names_in(target))
        elif kind == "scope":
            rebound.extend(item.name.value for item in node.names)
        elif kind == "match" and getattr(node, "name", None) is not None:
            rebound.append(node.name.value)
        elif kind == "rest" and node.rest is not None:
            rebound.append(node.rest.value)
    return part


def _in_a_scope(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """``node`` is inside a function or class (not in module-level code)."""
    current = parents.get(node)
    while current is not None:
        if type(current) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return True
        current = parents.get(current)
    return False


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node.children`` but the layout tokens (``TRIVIA``), in the order of
    the node's fields (source order, but for an expression's parts such as
    ``a if test else b``). Read from the dataclass fields: 2.5x faster than
    ``children``, which runs a visitor per call and cost more than parsing in
    rules that walk scopes."""
    if type(node) in _LEAVES:
        return []
    found = []
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            for child in value:
                if _is_node(type(child)):
                    found.append(child)
        elif _is_node(value_type):
            found.append(value)
    return found


@lru_cache(maxsize=None)
def _child_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _names_in(node: cst.CSTNode) -> list[cst.Name]:
    if isinstance(node, cst.Name):
        return [node]
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.append(current)
        elif not isinstance(current, (cst.Attribute, cst.Subscript)):
            stack.extend(child_nodes(current))
        elif isinstance(current, cst.Attribute):
            pass  # obj.attr = ... binds no name
    return found


# What a name that may come from ``from X import *`` resolves to: no rule's
# qualified name, but not empty either, so "is this an imported thing?" says yes.
STAR_IMPORTED = "<star import>"


def _first_bindings(module: cst.Module) -> tuple[dict[str, int], list[int]]:
    """For each name the file binds anywhere, the index of the first module
    statement that binds it; and the indices of statements with a star import."""
    first: dict[str, int] = {}
    stars: list[int] = []
    for position, statement in enumerate(module.body):
        stack: list[cst.CSTNode] = [statement]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is cst.ImportFrom and type(node.names) is cst.ImportStar:
                stars.append(position)
            elif kind in _BINDERS:  # exact types: isinstance on libcst's ABCs costs more than the walk
                for name in _bound_by(node):
                    first.setdefault(name, position)
            stack.extend(child_nodes(node))
    return first, stars


# The node types ``_bound_by`` reads, the only ones that bind (libcst's
# concrete node classes have no subclasses).
_BINDERS = frozenset({
    cst.FunctionDef, cst.ClassDef, cst.Param, cst.ImportAlias, cst.AssignTarget, cst.AnnAssign, cst.AugAssign,
    cst.For, cst.CompFor, cst.NamedExpr, cst.WithItem, cst.ExceptHandler, cst.Global, cst.Nonlocal,
})


def _bound_by(node: cst.CSTNode) -> list[str]:
    """Names one node binds (the same node types ``FileIndex`` reads)."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return [node.name.value]
    if isinstance(node, cst.Param):
        return [node.name.value]
    if isinstance(node, cst.ImportAlias):
        if node.asname is not None:
            return [n.value for n in _names_in(node.asname.name)]
        return [(dotted(node.name) or "").split(".")[0]]
    target = None
    if isinstance(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.NamedExpr)):
        target = node.target
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        target = node.asname.name
    elif isinstance(node, cst.ExceptHandler) and node.name is not None:
        target = node.name.name
    elif isinstance(node, (cst.Global, cst.Nonlocal)):
        return [item.name.value for item in node.names]
    return [n.value for n in _names_in(target)] if target is not None else []


@dataclass(frozen=True)
class Option:
    """A per-rule setting, read from ``[tool.fixdev.rules.<rule-name>]``."""

    type: type
    default: Any
    help: str


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag; ``fixed`` is the expected text after the fix,
    or None when the rule reports the site without a fix."""

    code: str
    fixed: str | None = None


@dataclass
class Screening:
    """What a rule's ``screen`` sees of a file before libcst parses it: the
    text, CPython's tree of it (about 7x cheaper to build), the run's project
    facts, and a cache for what screens compute, handed on to the
    ``RuleContext`` (as its ``shared``) when the file is parsed after all."""

    text: str
    tree: ast.Module
    project: Any = None
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass
class RuleContext:
    """What one run of the rules over one file shares: the tree, its metadata,
    the options, and a cache for analyses that several rules use. ``project``:
    facts about the run's other files, opaque to the engine (the analysis
    asks it; None for source without a run around it, such as stdin)."""

    module: cst.Module
    text: str
    wrapper: cst.MetadataWrapper
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)
    project: Any = None
    tree: ast.Module | None = None  # CPython's tree of the text, when the engine has it

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """What a name or attribute refers to, through imports and aliases:
        ``t.ones`` after ``import torch as t`` is ``torch.ones``.

        libcst's ``QualifiedNameProvider`` is the authority, but its scope
        analysis costs several parses. Where the imports alone decide the answer
        it is not needed: an expression rooted at a call or a subscript, or at
        a name no import binds, names no import; a name that module-level
        imports bind to one target, and nothing else ever rebinds, resolves
        through that import. (Checked equal to libcst's answer on torch's own
        source; a relative import is never a torch name, so it resolves to
        nothing.)"""
        parts = []
        root = node
        while isinstance(root, cst.Attribute):
            parts.append(root.attr.value)
            root = root.value
        if not isinstance(root, cst.Name):
            return set()  # rooted at a call, subscript…: no import's name
        resolved = self.index().resolve(root.value, parts[::-1])
        if resolved is not None:
            return resolved
        found = self.metadata(QualifiedNameProvider).get(node, ())
        if callable(found):  # libcst computes qualified names lazily
            found = found()
        # Only what imports reach: libcst also names local bindings
        # (``f.<locals>.h``), which the fast path above calls "no import".
        return {q.name for q in found if q.source is not QualifiedNameSource.LOCAL}

    def index(self) -> "FileIndex":
        if "index" not in self.shared:
            self.shared["index"] = FileIndex(self.module)
        return self.shared["index"]

    def parents(self) -> Mapping[cst.CSTNode, cst.CSTNode]:
        return self.index().parents

    def run(self, rules: Sequence["Rule"]) -> None:
        """Call each rule's ``visit_<Node>`` methods on every node. The same
        calls libcst's ``visit_batched`` makes (layout tokens aside), without its per-node
        bookkeeping, which costs more than parsing: rules only look."""
        dispatch: dict[type, list] = {}
        for rule in rules:
            for name in dir(type(rule)):
                node_type = getattr(cst, name[6:], None) if name.startswith("visit_") else None
                if node_type is None or getattr(getattr(type(rule), name), "_is_no_op", False):
                    continue
                if node_type in TRIVIA:
                    raise TypeError(f"{type(rule).__name__}.{name}: the index leaves layout tokens out (fixdev.engine.rule.TRIVIA); find them from the node that holds them")
                dispatch.setdefault(node_type, []).append(getattr(rule, name))
        order = self.index().order
        superseded = stop.current()
        if superseded is None:
            for node in order:
                for method in dispatch.get(type(node), ()):
                    method(node)
            return
        # In the language server: stopped between nodes once a newer change
        # came (``fixdev.engine.stop``), never inside a rule's method.
        for number, node in enumerate(order):
            if not number & 255 and superseded():
                raise stop.Superseded
            for method in dispatch.get(type(node), ()):
                method(node)

    def code(self) -> str:
        """The module's code as libcst generates it, once per file: the spans
        and the engine's round-trip check both need it, and each generation
        walks the whole tree."""
        if "code" not in self.shared:
            self.shared["code"] = self.module.code
        return self.shared["code"]

    def spans(self) -> "StatementSpans":
        """Character spans of the module's nodes (``spans[node]``), found a
        statement at a time (``fixdev.engine.spans``)."""
        if "spans" not in self.shared:
            self.shared["spans"] = StatementSpans(self, lambda: self.metadata(CharSpanProvider))
        return self.shared["spans"]

    def metadata(self, provider: type[BaseMetadataProvider]) -> Mapping[cst.CSTNode, Any]:
        """One kind of metadata for the whole file, computed on first use:
        a file whose candidates all fail a rule's cheap syntactic checks never
        pays for scope analysis."""
        key = ("metadata", provider)
        if key not in self.shared:
            if provider is CharSpanProvider:
                # Resolved by hand, from the code the round-trip check needs
                # anyway: libcst's resolve would generate it once more.
                self.shared[key] = char_spans(self.code(), self.metadata(ByteSpanPositionProvider))
            else:
                self.shared[key] = self.wrapper.resolve(provider)
        return self.shared[key]


# The kinds of device bug, each rule's ``group``, with the title
# ``--list-rules`` shows above the group's rules (in this order).
GROUPS: dict[str, str] = {
    "mismatch": "Values that meet on different devices",
    "cuda-only": "Code that needs CUDA",
    "state": "State left on the old device",
    "noqa": "Suppression comments",
}


class Rule(BatchableCSTVisitor):
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    group: ClassVar[str]  # a key of GROUPS
    # A regular expression that finds, in the raw text, every file the rule
    # could possibly flag. A rule runs only on files it matches, and a file
    # that no enabled rule matches is never parsed by libcst.
    trigger: ClassVar[str | tuple[str, ...]]  # a tuple: all must match
    options: ClassVar[Mapping[str, Option]] = {}
    # Whether the rule's fixes may change more than the device (its docstring's
    # "Fix safety" says what); a report can say otherwise for one fix.
    fix_applicability: ClassVar[str] = "safe"
    # Whether a fix at a factory makes the value it makes live on the device
    # it meets (``device=``, a ``*_like`` twin): downstream fixes of that
    # value (a move where it is used) then yield to it, one fix per value.
    fixes_where_made: ClassVar[bool] = False
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    # Selected only where its code or name is named (--extend-select FDV100),
    # never by ALL, a prefix or a group: a rule that is off by default.
    explicit: ClassVar[bool] = False
    # A rule that judges the file's ``# noqa: CODES`` directives rather than
    # its code (unused-noqa): it visits nothing; once the other rules have
    # run, the engine hands ``judge_noqa`` every directive with the codes that
    # silenced a finding (``fixdev.engine.noqa.Directive``).
    judges_noqa: ClassVar[bool] = False

    def __init__(self, context: RuleContext) -> None:
        super().__init__()
        self.context = context
        self.findings: list[Finding] = []
        defaults = {key: option.default for key, option in self.options.items()}
        self.settings: dict[str, Any] = {**defaults, **context.options.get(self.name, {})}

    # -- documentation -------------------------------------------------------

    @classmethod
    def doc(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()

    @classmethod
    def explanation(cls) -> str:
        """Everything ``fixdev --explain`` prints, in Markdown (an editor's hover shows the same)."""
        parts = [f"# {cls.code} {cls.name}", f"{cls.message}.", f"Fix: {'available' if cls.fixable() else 'none (reported only)'}", cls.doc()]
        if cls.options:
            options = [f"- `{key}` ({option.type.__name__}, default {option.default!r}): {option.help}" for key, option in cls.options.items()]
            parts.append("\n".join([f"## Options ([tool.fixdev.rules.{cls.name}])", *options]))
        return "\n\n".join(parts)

    @classmethod
    def might_match(cls, text: str) -> bool:
        patterns = cls.__dict__.get("_trigger_patterns")
        if patterns is None:
            sources = (cls.trigger,) if isinstance(cls.trigger, str) else cls.trigger
            patterns = tuple(trigger_branches(source) for source in sources)
            cls._trigger_patterns = patterns
        return all(matches_any(branches, text) for branches in patterns)

    @classmethod
    def screen(cls, screening: Screening) -> bool:
        """Whether the rule may report anything in the file, asked of CPython's
        tree after the trigger matched and before libcst parses the file: a
        file no enabled rule's screen passes is never parsed by libcst. It
        must hold wherever the rule reports (finer than the trigger, never
        stricter than the rule); every rule's INVALID examples check that.
        The default, True, leaves the rule to its libcst visit."""
        return True

    @classmethod
    def judge_noqa(cls, text: str, directives: Sequence[Any], ran: frozenset[str]) -> list[Finding]:
        """For ``judges_noqa`` rules: the findings about ``directives`` (each
        with the codes that silenced a finding), ``ran`` the codes of every
        rule that ran on the text (a directive's other codes name rules that
        did not)."""
        return []

    @classmethod
    def fixable(cls) -> bool:
        return any(example.fixed is not None for example in cls.INVALID)

    # -- reporting -----------------------------------------------------------

    def report(
        self, node: cst.CSTNode, message: str | None = None, *, fix: Sequence[Edit] = (), fix_message: str = "", unsafe: bool | None = None,
    ) -> None:
        self.report_at(*self.span(node), message, fix=fix, fix_message=fix_message, unsafe=unsafe)

    def report_at(
        self, start: int, end: int, message: str | None = None, *, fix: Sequence[Edit] = (), fix_message: str = "", unsafe: bool | None = None,
        origins: Sequence[tuple[int, int]] = (),
    ) -> None:
        """``report`` for a span of the text (character offsets), for rules
        that find their sites through another tree than libcst's. ``unsafe``:
        whether this fix may change more than the device (None: the rule's
        ``fix_applicability``). ``origins``: the spans where the value this
        finding is about was made, when its fix goes elsewhere."""
        self.findings.append(self.finding_at(start, end, message, fix=fix, fix_message=fix_message, unsafe=unsafe, origins=origins))

    @classmethod
    def finding_at(
        cls, start: int, end: int, message: str | None = None, *, fix: Sequence[Edit] = (), fix_message: str = "", unsafe: bool | None = None,
        origins: Sequence[tuple[int, int]] = (),
    ) -> Finding:
        """The finding ``report_at`` records (for ``judge_noqa``, which has no visit to report from)."""
        edits = tuple(sorted(set(fix)))
        applicability = cls.fix_applicability if unsafe is None else (UNSAFE if unsafe else SAFE)
        return Finding(
            code=cls.code,
            name=cls.name,
            message=message or cls.message,
            start=start,
            end=end,
            fix=Fix(edits, fix_message or message or cls.message, applicability) if edits else None,
            origins=tuple(origins),
            places_value=cls.fixes_where_made and bool(edits),
        )

    # -- helpers for building fixes -------------------------------------------

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        code_span = self.context.spans()[node]
        return code_span.start, code_span.start + code_span.length

    def code_of(self, node: cst.CSTNode) -> str:
        start, end = self.span(node)
        return self.context.text[start:end]

    def replace(self, node: cst.CSTNode, new: cst.CSTNode | str) -> Edit:
        start, end = self.span(node)
        content = new if isinstance(new, str) else self._code_in_place(node, new)
        return Edit(start, end, content)

    def _code_in_place(self, old: cst.CSTNode, new: cst.CSTNode) -> str:
        """Code for ``new`` where ``old`` stands. ``Module.code_for_node`` knows
        no indentation, so continuation lines inside brackets would lose theirs.
        So ``new`` is generated as a line of a block indented as the statement
        holding ``old`` is (``if True:`` / indent / ``new`` / newline), and cut
        out of it."""
        if isinstance(new, cst.BaseExpression):
            line = cst.SimpleStatementLine(body=[cst.Expr(value=new)])
        elif isinstance(new, cst.BaseSmallStatement):  # its span ends before its semicolon
            line = cst.SimpleStatementLine(body=[new.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)])
        else:
            return self._code_in_module(old, new)
        statement = old
        while statement is not None and not isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            statement = self.parent(statement)
        indent = ""
        if statement is not None:
            text = self.context.text
            statement_start = self.span(statement)[0]
            prefix = text[line_start(text, statement_start) : statement_start]
            indent = prefix[: len(prefix) - len(prefix.lstrip(" \t"))]
        module = self.context.module
        newline = module.default_newline
        head = ""
        if indent:
            head = "if True:" + newline + indent
            try:
                line = inside_block(line, indent)
            except cst.CSTValidationError:  # not an indent libcst takes for a block
                return self._code_in_module(old, new)
        code = module.code_for_node(line)
        if not (code.startswith(head) and code.endswith(newline)):
            return self._code_in_module(old, new)
        return code[len(head) : len(code) - len(newline)]

    def _code_in_module(self, old: cst.CSTNode, new: cst.CSTNode) -> str:
        """The general, slower way: the whole file with ``new`` in ``old``'s
        place, less the unchanged text before and after ``old``."""
        text = self.context.text
        start, end = self.span(old)
        code = self.context.module.deep_replace(old, new).code
        if not (code.startswith(text[:start]) and code.endswith(text[end:])):
            raise ValueError(f"a fix replacing {type(old).__name__} changes code outside it")
        return code[start : len(code) - (len(text) - end)]

    def insert(self, offset: int, content: str) -> Edit:
        return Edit(offset, offset, content)

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """What a name or attribute refers to, through imports and aliases
        (``t.ones`` after ``import torch as t`` is ``torch.ones``)."""
        return self.context.qualified_names(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.context.parents().get(node)
