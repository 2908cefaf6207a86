"""libcst's tree of a text that changed a little, made from the trees of its
top-level statements, most of them reused from the text before.

An editor sends the whole file on every keystroke, and libcst's parse of a
1,500-line file takes a tenth of a second or more: the largest share of the
time from an edit to its diagnostics. Most keystrokes change one top-level
statement. Here the text is cut where CPython's tree says each top-level
statement starts; each piece is parsed by libcst on its own, once, and kept
by its text; the module is put together from the pieces. libcst's nodes are
immutable, so a piece's tree can stand in any module whose text holds it.

Pieces join as libcst would have parsed the whole: comment and blank lines
at column 0 before a statement belong to that statement (its
``leading_lines``), lines indented further to the block above (its
``footer``), so a piece's own footer moves to the next piece's first
statement. A module whose code is not the text, or any doubt (a statement
libcst and CPython split differently, a text with a form feed or a line
continuation at the top level), gets a whole parse instead.

Used through ``reusing(cache)`` (the language server), not by the CLI, where
each file is parsed once anyway.
"""

from __future__ import annotations

import ast
import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

import libcst as cst

from fixdev.engine.source import CPythonPositions, line_start

_ACTIVE: ContextVar["ParseCache | None"] = ContextVar("fixdev_parse_cache", default=None)

# Beyond this many pieces kept, the cache starts over (an editor's file is
# small; a cache must not grow with every version of every file ever open).
_LIMIT = 20_000
# Nor hold more text than this, counted over the pieces kept: each version of
# an edited statement is a piece, and libcst's tree takes some 500 bytes a
# character (a keystroke in a 700-line function keeps another 15 MB).
_CHARACTERS = 1_000_000
_NEWLINE = re.compile(r"\r\n|\r|\n")


class ParseCache:
    """Top-level statements' libcst trees by their text, shared by the
    versions of the documents an editor has open."""

    def __init__(self) -> None:
        # each piece's tree, and whether its code is the piece (checked once, when parsed)
        self._pieces: dict[str, tuple[cst.Module, bool]] = {}
        # A piece's first statement with the footer of the piece before it as
        # its leading lines, by the two pieces' texts: the same node from one
        # version to the next, so that what is kept by node (spans, the
        # index's walk) serves again.
        self._joined: dict[tuple[str, str], cst.CSTNode] = {}
        # What the engine keeps by node between versions (fixdev.engine.spans,
        # fixdev.engine.rule's index): emptied with the pieces.
        self.by_node: dict[tuple, object] = {}
        self._characters = 0  # the text of the pieces kept
        self.parsed = 0  # pieces parsed (the rest were reused): for tests and benchmarks
        self.checked_whole = 0  # modules whose code was generated whole to check it: for tests
        self.last: cst.Module | None = None  # the last module put together: its code is the text it was put together from

    def parse(self, text: str, tree: ast.Module) -> cst.Module | None:
        """The module of ``text`` (libcst's parseable text: no lone CRs), or
        None where it cannot be put together (the caller parses it whole)."""
        if "\f" in text or text.startswith("\ufeff") or "print_function" in text or not tree.body:
            return None  # libcst and CPython may place such lines differently: not worth the doubt
        offset = CPythonPositions(text).offset  # (line, column) -> offset, made once for both
        cuts = _cuts(text, tree, offset)
        if cuts is None:
            return None
        pieces = [text[start:end] for start, end in zip(cuts, cuts[1:] + [len(text)])]
        if len(self._pieces) > _LIMIT or self._characters > _CHARACTERS:
            self._characters = 0
            self._pieces.clear()
            self._joined.clear()
            self.by_node.clear()
        seen: set[str] = set()
        modules = []
        for piece in pieces:
            # a piece twice in one text is parsed twice: no node may stand twice in one tree
            entry = self._pieces.get(piece) if piece not in seen else None
            if entry is None:
                try:
                    module = cst.parse_module(piece)
                except (cst.ParserSyntaxError, RecursionError):
                    return None
                self.parsed += 1
                entry = (module, module.code == piece)
                if piece not in seen:
                    self._pieces[piece] = entry
                    self._characters += len(piece)
            else:
                entry = (*entry, True)  # (module, code is the piece, kept): its joins may be kept too
            seen.add(piece)
            modules.append(entry)
        body: list[cst.CSTNode] = []
        carried: list[cst.EmptyLine] = []  # the previous piece's footer: the next statement's leading lines
        default_indent, default_newline = _default_indent(text, tree, offset), _default_newline(text)
        # Each piece's code was checked to be its text; joined, they are the
        # text when every piece generates as in the module (the same indent
        # and newline defaults) and each but the last ends its last line.
        # Else the module's code is generated whole and compared.
        exact = True
        for i, (module, verified, *kept) in enumerate(modules):
            if i and module.header:
                return None  # a piece starts at its statement: nothing may come before it
            statements = list(module.body)
            if not statements:
                return None
            exact = exact and verified and module.default_indent == default_indent and module.default_newline == default_newline
            exact = exact and (i == len(modules) - 1 or module.has_trailing_newline)
            if carried:
                statements[0] = self._join(pieces[i - 1], pieces[i], statements[0], carried, bool(kept) and modules[i - 1][2:] == (True,))
            body.extend(statements)
            carried = list(module.footer)
        first, last = modules[0][0], modules[-1][0]
        assembled = cst.Module(
            body=body, header=first.header, footer=carried, encoding=first.encoding,
            default_indent=default_indent, default_newline=default_newline,
            has_trailing_newline=last.has_trailing_newline,
        )
        if not exact:
            self.checked_whole += 1
            if assembled.code != text:
                return None
        self.last = assembled
        return assembled

    def _join(self, before: str, piece: str, statement: cst.CSTNode, carried: list, kept: bool) -> cst.CSTNode:
        """``statement`` (the first of ``piece``) with ``carried`` (the footer
        of the piece ``before`` it) as its first leading lines; made once for
        two kept pieces and reused (a piece parsed anew gets a new node)."""
        key = (before, piece)
        if kept:
            joined = self._joined.get(key)
            if joined is not None:
                return joined
        joined = statement.with_changes(leading_lines=[*carried, *statement.leading_lines])
        if kept:
            self._joined[key] = joined
        return joined


def _cuts(text: str, tree: ast.Module, offset) -> list[int] | None:
    """Where each piece starts: offset 0, then the start of the first line of
    each top-level statement after the first (its first decorator's line)."""
    cuts = [0]
    previous_end = None
    for statement in tree.body:
        decorators = getattr(statement, "decorator_list", None)
        line = decorators[0].lineno if decorators else statement.lineno
        if previous_end is not None:
            if line <= previous_end:
                return None  # two statements on one line (a; b): one piece
            start = offset(line, 0)
            if start <= cuts[-1]:
                return None
            cuts.append(start)
        previous_end = statement.end_lineno
    return cuts


def _default_newline(text: str) -> str:
    match = _NEWLINE.search(text)
    return match.group() if match else "\n"


def _default_indent(text: str, tree: ast.Module, offset) -> str:
    """The indent of the file's first indented block, as libcst detects it
    (four spaces when there is none)."""
    for statement in ast.walk(tree):
        body = getattr(statement, "body", None)
        if not isinstance(statement, ast.stmt) or not isinstance(body, list) or not body:
            continue
        inner = body[0]
        if inner.lineno == statement.lineno:
            continue  # a body on the header's line
        outer_start = offset(statement.lineno, statement.col_offset)
        outer = text[line_start(text, outer_start) : outer_start]
        start = offset(inner.lineno, inner.col_offset)
        indent = text[line_start(text, start) : start]
        if indent.startswith(outer) and len(indent) > len(outer):
            return indent[len(outer) :]
    return "    "


@contextmanager
def reusing(cache: ParseCache) -> Iterator[None]:
    """Within: the engine's libcst parses go through ``cache``."""
    token = _ACTIVE.set(cache)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active() -> ParseCache | None:
    return _ACTIVE.get()
