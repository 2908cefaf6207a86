"""What a rule is: the base class every module in ``codemods/`` subclasses.

A rule is a libcst visitor. It looks at nodes, and for each problem it calls
``self.report(node, fix=...)``. A fix is a set of text edits on the file, built
with ``replace`` and ``insert``; the engine decides which fixes to apply, in
what order, and checks the result. A rule never reads files or prints.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import libcst as cst
from libcst import BatchableCSTVisitor
from libcst._nodes.internal import CodegenState  # public codegen needs no indentation; ours does
from libcst.metadata import BaseMetadataProvider, CodeSpan, ParentNodeProvider, QualifiedNameProvider
from libcst.metadata.span_provider import SpanProvidingCodegenState


class CharSpanProvider(BaseMetadataProvider[CodeSpan]):
    """Start offset and length of every node, in characters of the source text.

    libcst ships the same thing in bytes (``ByteSpanPositionProvider``); edits
    are applied to text, so characters are the unit we need.
    """

    def _gen_impl(self, module: cst.Module) -> None:
        state = SpanProvidingCodegenState(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            provider=self,
        )
        module._codegen(state)


class _Everything:
    """Every name (a star import may bind any)."""

    def __contains__(self, name: object) -> bool:
        return True


def _dotted_root(node: cst.BaseExpression) -> str:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


def _statements(node: cst.CSTNode):
    """Every statement line in the file, nested ones included; expressions are
    not entered, which keeps this walk cheap."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.SimpleStatementLine):
            yield current
            continue
        for child in current.children:
            if isinstance(child, (cst.BaseStatement, cst.BaseSuite, cst.ExceptHandler, cst.ExceptStarHandler, cst.Else, cst.Finally, cst.MatchCase)):
                stack.append(child)


@dataclass(frozen=True, order=True)
class Edit:
    """Replace ``text[start:end]`` with ``content`` (an insertion when start == end)."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class Fix:
    edits: tuple[Edit, ...]
    message: str
    applicability: str = "safe"


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    start: int  # character offsets in the text the rule saw
    end: int
    fix: Fix | None = None


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
class RuleContext:
    """What one run of the rules over one file shares: the tree, its metadata,
    the options, and a cache for analyses that several rules use."""

    module: cst.Module
    text: str
    wrapper: cst.MetadataWrapper
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """What a name or attribute refers to, through imports and aliases
        (``t.ones`` after ``import torch as t`` is ``torch.ones``), from libcst's
        ``QualifiedNameProvider``. Its scope analysis is the slowest step of a
        run, so it is skipped when the answer cannot name an import: when the
        expression's root name is bound by no import statement in the file."""
        root = node
        while isinstance(root, (cst.Attribute, cst.Call)):
            root = root.value if isinstance(root, cst.Attribute) else root.func
        if isinstance(root, cst.Name) and root.value not in self.imported_names():
            return set()
        found = self.metadata(QualifiedNameProvider).get(node, ())
        if callable(found):  # libcst computes qualified names lazily
            found = found()
        return {q.name for q in found}

    def imported_names(self) -> frozenset[str] | _Everything:
        if "imported" not in self.shared:
            names: set[str] = set()
            star = False
            for statement in _statements(self.module):
                for small in getattr(statement, "body", ()):
                    if isinstance(small, cst.Import):
                        names.update((a.asname.name.value if a.asname else _dotted_root(a.name)) for a in small.names)
                    elif isinstance(small, cst.ImportFrom):
                        if isinstance(small.names, cst.ImportStar):
                            star = True
                        else:
                            names.update((a.asname.name.value if a.asname else a.name.value) for a in small.names if isinstance(a.name, cst.Name))
            self.shared["imported"] = _Everything() if star else frozenset(names)
        return self.shared["imported"]

    def metadata(self, provider: type[BaseMetadataProvider]) -> Mapping[cst.CSTNode, Any]:
        """One kind of metadata for the whole file, computed on first use:
        a file whose candidates all fail a rule's cheap syntactic checks never
        pays for scope analysis."""
        key = ("metadata", provider)
        if key not in self.shared:
            self.shared[key] = self.wrapper.resolve(provider)
        return self.shared[key]


class Rule(BatchableCSTVisitor):
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    # A regular expression that finds, in the raw text, every file the rule
    # could possibly flag. A rule runs only on files it matches, and a file
    # that no enabled rule matches is never parsed by libcst.
    trigger: ClassVar[str | tuple[str, ...]]  # a tuple: all must match
    options: ClassVar[Mapping[str, Option]] = {}
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

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
    def might_match(cls, text: str) -> bool:
        patterns = cls.__dict__.get("_trigger_patterns")
        if patterns is None:
            sources = (cls.trigger,) if isinstance(cls.trigger, str) else cls.trigger
            patterns = tuple(re.compile(source) for source in sources)
            cls._trigger_patterns = patterns
        return all(pattern.search(text) for pattern in patterns)

    @classmethod
    def fixable(cls) -> bool:
        return any(example.fixed is not None for example in cls.INVALID)

    # -- reporting -----------------------------------------------------------

    def report(self, node: cst.CSTNode, message: str | None = None, *, fix: Sequence[Edit] = (), fix_message: str = "") -> None:
        start, end = self.span(node)
        edits = tuple(sorted(set(fix)))
        self.findings.append(
            Finding(
                code=self.code,
                name=self.name,
                message=message or self.message,
                start=start,
                end=end,
                fix=Fix(edits, fix_message or message or self.message) if edits else None,
            )
        )

    # -- helpers for building fixes -------------------------------------------

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        code_span = self.context.metadata(CharSpanProvider)[node]
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
        no indentation, so continuation lines inside brackets would lose theirs;
        the indentation of the enclosing statement's first line is put back."""
        statement = old
        while statement is not None and not isinstance(statement, (cst.BaseSmallStatement, cst.BaseCompoundStatement, cst.SimpleStatementLine)):
            statement = self.parent(statement)
        indent = ""
        if statement is not None:
            text = self.context.text
            line_start = max(text.rfind("\n", 0, self.span(statement)[0]), text.rfind("\r", 0, self.span(statement)[0])) + 1
            line = text[line_start : self.span(statement)[0]]
            indent = line[: len(line) - len(line.lstrip(" \t"))]
        module = self.context.module
        state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
        state.indent_tokens = [indent] if indent else []
        new._codegen(state)
        return "".join(state.tokens)

    def insert(self, offset: int, content: str) -> Edit:
        return Edit(offset, offset, content)

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """What a name or attribute refers to, through imports and aliases
        (``t.ones`` after ``import torch as t`` is ``torch.ones``)."""
        return self.context.qualified_names(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.context.metadata(ParentNodeProvider).get(node)
