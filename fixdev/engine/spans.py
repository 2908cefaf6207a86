"""Character spans of libcst nodes, found a statement at a time.

libcst positions a whole module at once: it generates the module's code and
records where each node's tokens fall (``ByteSpanPositionProvider``), and the
engine generated the code once more to check that it is the text. On a file
with findings that was a fifth of fixdev's time, while rules ask for the spans
of a few nodes in a few statements.

CPython's tree, which the engine has already, says where each block-level
statement starts. A node's span is found by generating only the block
statement that holds it (indented as it stands), and that statement's code is
checked against the text at that place: no offset is used that libcst does
not reproduce there. Where something does not line up (the statements of the
two trees differ, an exotic indent), the whole module is positioned as
before, with the whole-file check.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from typing import Callable, Mapping

import libcst as cst
from libcst.metadata import ByteSpanPositionProvider, CodeSpan

from fixdev.engine import reparse
from fixdev.engine.source import CPythonPositions, line_start, parseable_text


class MetadataWrapper(cst.MetadataWrapper):
    """libcst's wrapper, less one walk. ``resolve`` computes providers that
    do not batch (byte spans, positions) and then walks the whole tree for the
    batchable ones, even when none is left: a walk with no visitor in it, as
    long as generating the file's code. Here an empty batch skips it."""

    def visit_batched(self, visitors, before_visit=None, after_leave=None):  # noqa: ANN001, ANN201 - libcst's signature
        visitors = list(visitors)
        if not visitors and before_visit is None and after_leave is None:
            return self.module
        return super().visit_batched(visitors, before_visit, after_leave)


def char_spans(code: str, byte_spans: Mapping[cst.CSTNode, CodeSpan]) -> Mapping[cst.CSTNode, CodeSpan]:
    """``CharSpanProvider``'s answer from libcst's byte spans of the module whose code is ``code``."""
    if code.isascii():
        return byte_spans
    ends: list[int] = []  # byte offset just after each non-ASCII character
    extra: list[int] = []  # bytes beyond one per character, up to that point
    total = 0
    for match in _NON_ASCII.finditer(code):
        total += len(match.group().encode("utf-8")) - 1
        ends.append(match.end() + total)
        extra.append(total)

    def char_offset(byte_offset: int) -> int:
        i = bisect_right(ends, byte_offset)
        return byte_offset - (extra[i - 1] if i else 0)

    found = {}
    for node, span in byte_spans.items():
        start = char_offset(span.start)
        found[node] = CodeSpan(start, char_offset(span.start + span.length) - start)
    return found


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def inside_block(statement: cst.CSTNode, indent: str) -> cst.If:
    """``statement`` as the body of ``if True:``, indented by ``indent``: how a
    statement is generated as it stands inside nested blocks (a block's lines
    carry the indents of every block around them). Raises
    ``CSTValidationError`` for an indent libcst does not take."""
    return cst.If(test=cst.Name("True"), body=cst.IndentedBlock(body=[statement], indent=indent))


class StatementSpans:
    """``spans[node]``: the node's ``CodeSpan`` in characters of the text,
    as ``CharSpanProvider`` gives it for the whole module."""

    # context is a fixdev.engine.rule.RuleContext, named in words only: that
    # module imports this one.
    def __init__(self, context: "RuleContext", whole_file: Callable[[], Mapping[cst.CSTNode, CodeSpan]]) -> None:
        self._context = context
        self._whole_file = whole_file
        self._known: dict[cst.CSTNode, CodeSpan] = {}
        self._calls: dict[tuple[int, int], cst.Call] = {}  # the calls of the statements positioned, by span
        self._done: set[cst.CSTNode] = set()  # block statements positioned so far
        self._headers: set[cst.CSTNode] = set()  # compound statements whose header alone is positioned
        # Until the first question, nothing is known: a rule may never ask.
        self._starts: dict[cst.CSTNode, int] | None = None  # block statement -> where it starts
        self._statements_by_start: dict[int, cst.CSTNode] = {}  # elif statements too
        self._blocks: list | None = None  # [(start, end, statement, nested blocks)] of the module
        self._parseable: str | None = None  # the text libcst was given
        self.whole = context.tree is None  # positioned as a whole module (then checked as one)

    # -- questions -------------------------------------------------------------

    def __getitem__(self, node: cst.CSTNode) -> CodeSpan:
        if self.whole:
            return self._whole_file()[node]
        found = self._known.get(node)
        if found is not None:
            return found
        if node is self._context.module:
            return CodeSpan(0, len(self._context.text))
        statement = self._block_statement(node)
        if statement is None:
            return self.whole_file()[node]
        if self._in_header(statement, node):
            # a def's name, a loop's target, an if's test: its header alone
            # is generated, not the whole (often long) body below it
            if not self._position_header(statement) and not self._position(statement):
                return self.whole_file()[node]
        elif not self._position(statement):
            return self.whole_file()[node]
        found = self._known.get(node)
        return found if found is not None else self.whole_file()[node]

    def statement_at(self, offset: int) -> cst.CSTNode | None:
        """The line or compound statement (an ``elif`` too) that starts at ``offset``."""
        if self.whole or not self._index():
            spans = self._whole_file()
            return next((n for n in self._context.index().order if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and spans[n].start == offset), None)
        return self._statements_by_start.get(offset)

    def call_at(self, start: int, end: int) -> cst.Call | None:
        """The call whose span is ``text[start:end]``."""
        if not self.whole and self._index():
            statement = self._innermost(start)
            if statement is not None and self._position(statement) and (start, end) in self._calls:
                return self._calls[(start, end)]
        spans = self._whole_file()
        return next((n for n in self._context.index().order if type(n) is cst.Call and (spans[n].start, spans[n].start + spans[n].length) == (start, end)), None)

    # -- where statements start, from CPython's tree ------------------------------

    def _index(self) -> bool:
        """Block statements → their start; False when the trees disagree."""
        if self._starts is None:
            self._starts = {}
            try:
                self._blocks = self._block(self._context.module.body, self._context.tree.body, CPythonPositions(self._context.text).offset)
            except _Disagree:
                self.whole = True
                return False
        return not self.whole

    def _block(self, statements, nodes: list[ast.stmt], offset) -> list:
        entries = []
        i = 0
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                count = len(statement.body)
                if i + count > len(nodes):
                    raise _Disagree
                first, last = nodes[i], nodes[i + count - 1]
                i += count
                entries.append((offset(first.lineno, first.col_offset), offset(last.end_lineno, last.end_col_offset), statement, []))
            else:
                if i >= len(nodes) or not isinstance(nodes[i], _COMPOUND.get(type(statement), ())):
                    raise _Disagree
                node = nodes[i]
                i += 1
                inner = [entry for body, body_nodes in _bodies(statement, node, self._elif(offset)) for entry in self._block(body, body_nodes, offset)]
                start = offset(node.lineno, node.col_offset)
                self._starts[statement] = start
                self._statements_by_start.setdefault(start, statement)
                decorators = getattr(node, "decorator_list", None)
                if decorators:  # the statement's text starts at its first decorator's @
                    start = self._context.text.rfind("@", 0, offset(decorators[0].lineno, decorators[0].col_offset))
                entries.append((start, offset(node.end_lineno, node.end_col_offset), statement, inner))
                continue
            self._starts[statement] = entries[-1][0]
            self._statements_by_start.setdefault(entries[-1][0], statement)
        if i != len(nodes):
            raise _Disagree
        return entries

    def _elif(self, offset) -> Callable[[cst.If, ast.If], None]:
        def record(statement: cst.If, node: ast.If) -> None:
            self._statements_by_start.setdefault(offset(node.lineno, node.col_offset), statement)

        return record

    def _innermost(self, offset: int) -> cst.CSTNode | None:
        """The innermost block statement whose text holds ``offset``."""
        found, entries = None, self._blocks
        while entries:
            i = bisect_right(entries, offset, key=lambda entry: entry[0]) - 1
            if i < 0 or not entries[i][0] <= offset < max(entries[i][1], entries[i][0] + 1):
                break
            found, entries = entries[i][2], entries[i][3]
        return found

    def _block_statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        parents = self._context.parents()
        current = node
        while current is not None:
            parent = parents.get(current)
            if isinstance(parent, (cst.IndentedBlock, cst.Module)) and isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return current
            current = parent
        return None

    def _in_header(self, statement: cst.CSTNode, node: cst.CSTNode) -> bool:
        """``node`` is in the header of the compound ``statement`` (decorators,
        name, parameters, test, target, items): not in its body or ``else``."""
        if type(statement) not in _HEADER_STUBBED or not isinstance(statement.body, cst.IndentedBlock) or node is statement:
            return False
        parents = self._context.parents()
        child = node
        while child is not None and parents.get(child) is not statement:
            child = parents.get(child)
        return child is not None and child is not statement.body and child is not getattr(statement, "orelse", None)

    # -- positioning one statement --------------------------------------------------

    def _position_header(self, statement: cst.CSTNode) -> bool:
        """Spans for the nodes of a compound statement's header, generated with
        a one-line body in place of its own: the header's text is checked, and
        its nodes get their spans, without generating the body. False when
        they cannot be trusted (the caller then positions the whole statement)."""
        if statement in self._done or statement in self._headers:
            return True
        if not self._index() or statement not in self._starts:
            return False
        generated = self._generate(statement, header=True)
        if generated is None:
            return False
        code, spans, shift, first, made, stub = generated
        end = spans[stub.body].start  # just after the header's colon
        if code[first:end] != self._source()[first + shift : end + shift]:
            return False
        self._record(spans, made, shift, first, end)
        self._headers.add(statement)
        return True

    def _position(self, statement: cst.CSTNode) -> bool:
        """Spans for every node of ``statement``; False when they cannot be trusted."""
        if statement in self._done:
            return True
        if not self._index() or statement not in self._starts:
            return False
        generated = self._generate(statement)
        if generated is None:
            return self._disagree()
        code, spans, shift, first, made, _ = generated
        # The text checked: the statement's, from its first decorator to the
        # end of its last line (a trailing comment, the line break; none at
        # the end of a file without a last line break). Nodes outside it
        # (comment lines above the statement) are left to the whole module's
        # positions.
        source = self._source()
        expected = source[first + shift : len(code) + shift]
        if code[first:] != expected and not (len(code) + shift > len(source) and code[first:] == expected + self._context.module.default_newline):
            return self._disagree()
        self._record(spans, made, shift, first, first + len(expected))
        self._done.add(statement)
        return True

    def _generate(self, statement: cst.CSTNode, header: bool = False) -> tuple | None:
        """``statement`` (or, with ``header``, its header with a stub body)
        generated alone, indented as it stands: its code, the char spans of
        its nodes, the shift from them to the text's offsets, where its text
        starts (its first decorator), the nodes made around it (the stub
        among them) and the statement shown (the stub); None where that cannot be made (an indent libcst does
        not take). ``statement`` is indexed.

        The generation depends on the statement's nodes, its indent and the
        module's defaults only, not on where it stands: within
        ``reparse.reusing`` (the language server) it is kept by them for the
        next version of the text, whose unchanged statements are the same
        nodes. The caller checks its code against the text either way."""
        text = self._context.text
        start = self._starts[statement]
        indent = text[line_start(text, start) : start]
        module = self._context.module
        cache = reparse.active()
        key = ("generated", statement, header, indent, module.default_indent, module.default_newline)
        found = cache.by_node.get(key) if cache is not None else None
        if found is None:
            found = _generated(statement, header, indent, module.default_indent, module.default_newline)
            if cache is not None:
                cache.by_node[key] = found
        if found is _NOT_MADE:
            return None
        code, spans, own_start, first, made, shown = found
        return code, spans, start - own_start, first, made, shown

    def _record(self, spans: Mapping[cst.CSTNode, CodeSpan], made: set, shift: int, first: int, last: int) -> None:
        """Keep the spans of the nodes within ``[first, last)`` of the generated
        code, shifted to the text, save those ``made`` around the statement."""
        known, calls = self._known, self._calls
        for node, span in spans.items():
            if node not in made and first <= span.start and span.start + span.length <= last:
                found = known[node] = CodeSpan(span.start + shift, span.length)
                if type(node) is cst.Call:
                    calls.setdefault((found.start, found.start + found.length), node)

    def _source(self) -> str:
        if self._parseable is None:
            self._parseable = parseable_text(self._context.text)
        return self._parseable

    def _disagree(self) -> bool:
        self.whole = True
        return False

    def whole_file(self) -> Mapping[cst.CSTNode, CodeSpan]:
        """Every node's span, from the whole module's code (which the engine
        then checks against the text)."""
        self.whole = True
        return self._whole_file()


_NOT_MADE = ()  # a statement _generated cannot show alone (kept as such too)


def _generated(statement: cst.CSTNode, header: bool, indent: str, default_indent: str, default_newline: str) -> tuple:
    """``StatementSpans._generate``'s work, from the statement and how it is
    indented: (code, spans, where the shown statement starts in the code,
    where its text starts, the nodes made around it, the statement shown),
    or ``_NOT_MADE``."""
    try:
        if header:
            stub_body = cst.IndentedBlock(body=[cst.SimpleStatementLine([cst.Pass()])], header=statement.body.header, indent=statement.body.indent)
            changes = {"body": stub_body}
            if getattr(statement, "orelse", None) is not None:
                changes["orelse"] = None
            shown = statement.with_changes(**changes)
        else:
            shown = statement
        if indent.strip(" \t"):
            raise cst.CSTValidationError("not an indent")
        body = inside_block(shown, indent) if indent else shown
        alone = cst.Module(body=[body], header=(), footer=(), default_indent=default_indent, default_newline=default_newline)
    except cst.CSTValidationError:
        return _NOT_MADE
    code = alone.code
    spans = char_spans(code, MetadataWrapper(alone, unsafe_skip_copy=True).resolve(ByteSpanPositionProvider))
    own = spans[shown]
    first = spans[shown.decorators[0]].start if getattr(shown, "decorators", None) else own.start
    made = {alone} if body is shown else {alone, body, body.body}  # the module and block around it
    if header:
        made |= {shown, shown.body}
    return code, spans, own.start, first, frozenset(made), shown


class _Disagree(Exception):
    """libcst's statements and CPython's do not pair up."""


# Compound statements whose header is positioned alone (``_position_header``):
# with a stub body (and no ``else``) the header generates as it stands.
_HEADER_STUBBED = frozenset({cst.FunctionDef, cst.ClassDef, cst.If, cst.For, cst.While, cst.With})

_COMPOUND: dict[type, tuple[type, ...]] = {
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.Try: (ast.Try,),
    cst.TryStar: (getattr(ast, "TryStar", ast.Try),),
    cst.With: (ast.With, ast.AsyncWith),
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.Match: (getattr(ast, "Match", ast.If),),
}


def _bodies(statement: cst.BaseCompoundStatement, node: ast.stmt, record_elif: Callable[[cst.If, ast.If], None]) -> list[tuple[list, list[ast.stmt]]]:
    """The indented bodies of a compound statement, each with CPython's list
    of the same statements (a body on the header's line holds none)."""
    pairs: list[tuple[cst.BaseSuite | None, list[ast.stmt]]] = []
    if isinstance(statement, cst.If):
        pairs.append((statement.body, node.body))
        orelse, nodes = statement.orelse, node.orelse
        while isinstance(orelse, cst.If):  # elif: CPython nests an If in orelse
            if len(nodes) != 1 or not isinstance(nodes[0], ast.If):
                raise _Disagree
            record_elif(orelse, nodes[0])
            pairs.append((orelse.body, nodes[0].body))
            orelse, nodes = orelse.orelse, nodes[0].orelse
        if orelse is not None:
            pairs.append((orelse.body, nodes))
    elif isinstance(statement, (cst.For, cst.While)):
        pairs.append((statement.body, node.body))
        if statement.orelse is not None:
            pairs.append((statement.orelse.body, node.orelse))
    elif isinstance(statement, (cst.Try, cst.TryStar)):
        pairs.append((statement.body, node.body))
        if len(statement.handlers) != len(node.handlers):
            raise _Disagree
        pairs += [(handler.body, handler_node.body) for handler, handler_node in zip(statement.handlers, node.handlers)]
        if statement.orelse is not None:
            pairs.append((statement.orelse.body, node.orelse))
        if statement.finalbody is not None:
            pairs.append((statement.finalbody.body, node.finalbody))
    elif isinstance(statement, cst.Match):
        if len(statement.cases) != len(node.cases):
            raise _Disagree
        pairs += [(case.body, case_node.body) for case, case_node in zip(statement.cases, node.cases)]
    else:  # def, class, with
        pairs.append((statement.body, node.body))
    return [(suite.body, nodes) for suite, nodes in pairs if isinstance(suite, cst.IndentedBlock)]
