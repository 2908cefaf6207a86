"""CPython's tree of a text that changed a little, with the nodes of its
unchanged top-level statements kept from the version before, and what the
analysis computed from those nodes alone kept with them.

The language server analyses the whole document on each change. CPython's
parse of it is cheap, but what the analysis then reads off the tree (its
walks, the spans of its expressions, the syntactic facts the rules screen
with) is keyed by node, and a fresh parse makes every node new. Here each
top-level statement of the new tree is replaced by the node of the version
before when its lines are the same text at the same line numbers: same text
and same place give CPython the same tree, positions included, so the node
stands for the new statement exactly. What is kept by such a node then
serves the new version:

- ``children``: each node's children (``flow.syntax.ast_walk``'s step),
- ``memo``: results computed from a node's own syntax (no name resolution,
  no flow), under keys ``(what, node)``, through ``remembered``.

Results that read more than the node's syntax (the flow's facts, what a name
refers to through the module's imports) are not kept here.

CPython's parse itself is made a piece at a time too (``AstReuse.parse``):
a top-level statement of the version before is kept when its lines, from the
start of its first to the first character of the next statement (the end of
the text after the last, the text's start before the first), are the same
text at the same line numbers; each run of the others, from the start of its
first statement to the start of the next kept one, is parsed on its own, its
lines numbered from where it stands. That is the whole parse: at the start
of a top-level statement (a token at column 0 after a line break, no
bracket, string or line continuation open) the tokenizer holds nothing from
the lines before; a kept statement's text, and the character after it that
ends it, tokenize as before; a piece that parses alone ends with nothing
open; and the module's statements are parsed one after another, each from
its own tokens. When the piece does not parse on its own, the text
as a whole is parsed (its error is the whole text's). Texts with a carriage
return, a form feed, a byte-order mark, ``barry_as_FLUFL`` or two top-level
statements on one line are parsed whole.

A long def or class typed in (``_INNER_LINES`` lines up, the same number of
lines) is made from its last version (``AstReuse._rebuilt``): its body
statements that the edit did not touch keep their nodes, and the run of
the others is parsed alone, below a line ``if 1:``. Its node count
(``core._node_count``) and its expressions' spans (``spans_of``) are then
put together from what each body statement keeps.

Active only through ``fixdev.engine.reparse.reusing`` (the language server's
cache) and within ``walking()``, which ``Linter.lint`` enters: the CLI parses
each file once and keeps nothing.
"""

from __future__ import annotations

import ast
import copy
import sys
import warnings
from bisect import bisect_left, bisect_right
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

from fixdev.engine.source import line_ends, split_lines

# The children lists of the current lint's reuse (None: no reuse, the CLI).
CHILDREN: ContextVar["dict | None"] = ContextVar("fixdev_ast_children", default=None)
_CURRENT: ContextVar["AstReuse | None"] = ContextVar("fixdev_ast_reuse", default=None)
_KEY = ("fixdev.engine.ast_reuse",)

# Bounds: kept statements and the nodes kept by them. Past either, all starts
# over (versions of an edited statement pile up; none is ever removed).
_STATEMENTS = 20_000
_NODES = 200_000
_CHARACTERS = 1_000_000
# A def or class of at least this many lines, edited, is made from its last
# version (``AstReuse._rebuilt``); a smaller one is parsed whole.
_INNER_LINES = 40
_REBUILT = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class AstReuse:
    """Top-level statements' CPython nodes by (first line, text), and what is
    computed from nodes, shared by the versions of the documents open."""

    def __init__(self) -> None:
        self.statements: dict[tuple[int, str], ast.stmt] = {}
        self.children: dict[ast.AST, list] = {}
        self.memo: dict[tuple, object] = {}
        self._characters = 0
        self.reused = 0  # statements reused, for tests and benchmarks
        # The last text parsed: (text, its top-level statements, the line each
        # starts on (decorators included), the offset of each line), or None.
        self._last: tuple[str, list[ast.stmt], list[int], list[int]] | None = None
        self.parsed = 0  # characters CPython parsed in pieces, for tests and benchmarks
        self.inner_lines = _INNER_LINES  # the size from which a def or class is made from its last version
        self.rebuilt = 0  # defs and classes made from their last version, for tests and benchmarks

    def parse(self, text: str, whole: Callable[[str], tuple]) -> tuple:
        """``whole(text)`` (CPython's ``(tree, error)`` of ``text``), the tree
        made in pieces where the last text parsed allows (module docstring),
        then ``splice``d."""
        tree = self._in_pieces(text)
        error = None
        if tree is None:
            tree, error = whole(text)
        if tree is None:
            self._last = None
            return tree, error
        tree = self.splice(text, tree)
        self._remember(text, tree)
        return tree, error

    def _remember(self, text: str, tree: ast.Module) -> None:
        self._last = None
        body = tree.body
        if _whole_only(text) or not body:
            return
        firsts = [statement.decorator_list[0].lineno if getattr(statement, "decorator_list", None) else statement.lineno for statement in body]
        if any(statement.end_lineno >= first for statement, first in zip(body, firsts[1:])):
            return  # a; b: a piece's first line would hold another's end
        starts = [0, 0, *line_ends(text)]
        if firsts[-1] >= len(starts):
            return
        self._last = (text, list(body), firsts, starts)

    def _in_pieces(self, new: str) -> ast.Module | None:
        last = self._last
        if last is None or _whole_only(new):
            return None
        old, body, firsts, old_starts = last
        if old == new:
            return ast.Module(body=list(body), type_ignores=[])
        starts = [0, 0, *line_ends(new)]  # the offset of line n (from 1) is starts[n]
        count = len(body)
        # A statement is the same when its lines, from the start of its first
        # to the first character of the next statement (the end of the text
        # after the last; from the text's start for the first), are the same
        # text at the same line numbers in both versions.
        same = []
        for k, first in enumerate(firsts):
            if first >= len(starts):
                same.append(False)
                continue
            begin, old_begin = (starts[first], old_starts[first]) if k else (0, 0)
            if k + 1 < count:
                following = firsts[k + 1]
                same.append(following < len(starts) and new[begin : starts[following] + 1] == old[old_begin : old_starts[following] + 1])
            else:
                same.append(new[begin:] == old[old_begin:])
        if not any(same):
            return None
        made: list[ast.stmt] = []
        k = 0
        while k < count:
            if same[k]:
                made.append(body[k])
                k += 1
                continue
            # From the start of this statement (the text's, for the first) to
            # the start of the next same one (the text's end): parsed alone.
            a = k
            while k < count and not same[k]:
                k += 1
            begin = starts[firsts[a]] if a else 0
            end = starts[firsts[k]] if k < count else len(new)
            if k == a + 1 and type(body[a]) in _REBUILT:
                old_begin = old_starts[firsts[a]] if a else 0
                old_end = old_starts[firsts[k]] if k < count else len(old)
                rebuilt = self._rebuilt(body[a], old[old_begin:old_end], new[begin:end], firsts[a] if a else 1)
                if rebuilt is not None:
                    made.append(rebuilt)
                    continue
            # Parsed below as many empty lines as come before it, so CPython
            # gives its nodes their line numbers (no walk moving them after:
            # ``ast.increment_lineno`` over a 740-line function took ~4 ms).
            padding = "\n" * (firsts[a] - 1) if a else ""
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    piece = ast.parse(padding + new[begin:end])
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
            self.parsed += end - begin
            made.extend(piece.body)
        return ast.Module(body=made, type_ignores=[])

    def _rebuilt(self, old: ast.stmt, old_piece: str, piece: str, line: int) -> ast.stmt | None:
        """A new version of a long def or class, ``old``'s piece (starting at
        ``line``) edited into ``piece`` on the same number of lines: the
        statements of its body that the edit did not touch are ``old``'s
        nodes, the others parsed alone. None where that cannot be shown to
        be the whole parse (the piece is then parsed whole).

        The lines before the first changed one and after the last are the
        same text at the same line numbers. The body statements whose lines
        (from the first, decorators included, to the next one's first) are
        all among them are kept; the run between is parsed below a line
        ``if 1:`` and as many empty lines as come before it, so its nodes
        get their own positions. That is the whole parse's: at the run's
        first line the tokenizer is where it was in the version before (a
        new logical line, the block's indent on the stack), the run parses
        alone to its end with nothing left open, its statements stand at the
        block's indent (the same characters), and the next kept statement's
        lines follow as before."""
        if old.end_lineno - old.lineno + 1 < self.inner_lines:
            return None
        old_lines, lines = split_lines(old_piece), split_lines(piece)
        if len(old_lines) != len(lines):
            return None  # a line added or removed: the statements below moved
        count = len(lines)
        low = 0
        while low < count and lines[low] == old_lines[low]:
            low += 1
        high = count
        while high > low and lines[high - 1] == old_lines[high - 1]:
            high -= 1
        if low == count:
            return None
        first_changed, after_changed = line + low, line + high  # absolute; the second exclusive
        body = old.body
        firsts = [s.decorator_list[0].lineno if getattr(s, "decorator_list", None) else s.lineno for s in body]
        if first_changed < firsts[0] or firsts[0] <= old.lineno:
            return None  # the header edited, or a body on the header's line
        i = bisect_right(firsts, first_changed) - 1
        j = bisect_left(firsts, after_changed)
        if (i and body[i - 1].end_lineno >= firsts[i]) or (j < len(body) and body[j - 1].end_lineno >= firsts[j]):
            return None  # a; b across the run's edge
        start = firsts[i] - line
        end = firsts[j] - line if j < len(body) else count
        first_text = old_lines[firsts[0] - line]
        indent = first_text[: len(first_text) - len(first_text.lstrip(" \t"))]
        if not indent:
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = ast.parse("\n" * (firsts[i] - 2) + "if 1:\n" + "".join(lines[start:end]))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if len(run.body) != 1 or type(run.body[0]) is not ast.If or run.body[0].orelse:
            return None  # the run reaches out of the block
        made = run.body[0].body
        for statement in made:
            first = statement.decorator_list[0].lineno if getattr(statement, "decorator_list", None) else statement.lineno
            text = lines[first - line]
            if text[: len(indent)] != indent or text[len(indent) : len(indent) + 1] in (" ", "\t"):
                return None  # not at the block's indent, character for character
        self.parsed += sum(len(text) for text in lines[start:end])
        self.rebuilt += 1
        node = copy.copy(old)
        node.body = [*body[:i], *made, *body[j:]]
        if j == len(body):
            node.end_lineno, node.end_col_offset = made[-1].end_lineno, made[-1].end_col_offset
        return node

    def splice(self, text: str, tree: ast.Module) -> ast.Module:
        """``tree`` (CPython's tree of ``text``) with each top-level statement
        whose lines were seen before at the same line numbers replaced by the
        node then made; a new module node (``tree`` itself is not changed)."""
        body = tree.body
        if not body or text.startswith("\ufeff") or "barry_as_FLUFL" in text:
            return tree
        if len(self.statements) > _STATEMENTS or len(self.children) > _NODES or len(self.memo) > _NODES or self._characters > _CHARACTERS:
            self.statements.clear()
            self.children.clear()
            self.memo.clear()
            self._characters = 0
        starts = [0, 0, *line_ends(text)]  # the offset of line n (from 1) is starts[n]
        lines = len(starts) - 1

        def offset(line: int) -> int:
            return starts[line] if line < len(starts) else len(text)

        new_body: list[ast.stmt] = []
        changed = False
        for i, statement in enumerate(body):
            decorators = getattr(statement, "decorator_list", None)
            first = decorators[0].lineno if decorators else statement.lineno
            last = statement.end_lineno or statement.lineno
            # a line shared with the statement before or after (a; b): not a piece of its own
            if (i and body[i - 1].end_lineno >= first) or (i + 1 < len(body) and body[i + 1].lineno <= last) or last > lines:
                new_body.append(statement)
                continue
            key = (first, text[offset(first) : offset(last + 1)])
            kept = self.statements.get(key)
            if kept is None or type(kept) is not type(statement):
                self.statements[key] = statement
                self._characters += len(key[1])
                new_body.append(statement)
            else:
                self.reused += 1
                new_body.append(kept)
                changed = True
        if not changed:
            return tree
        return ast.Module(body=new_body, type_ignores=tree.type_ignores)


def _whole_only(text: str) -> bool:
    """Texts ``AstReuse.parse`` never cuts (see the module's docstring)."""
    return "\r" in text or "\f" in text or text.startswith("\ufeff") or "barry_as_FLUFL" in text


def parse(text: str, whole: Callable[[str], tuple]) -> tuple:
    """CPython's ``(tree, error)`` of ``text``: ``whole(text)``, or with a
    reuse active ``AstReuse.parse`` (pieces, then ``splice``)."""
    reuse = _CURRENT.get()
    return whole(text) if reuse is None else reuse.parse(text, whole)


def active() -> AstReuse | None:
    """The reuse of the lint in progress, or None (no cache active)."""
    return _CURRENT.get()


def _of_cache() -> AstReuse | None:
    # Not imported at the top: reparse imports libcst (a seventh of a second),
    # which a run whose files are all cached or screened away never needs. A
    # cache is active only through reparse.reusing, so unimported, none is.
    reparse = sys.modules.get("fixdev.engine.reparse")
    cache = reparse.active() if reparse is not None else None
    if cache is None:
        return None
    found = cache.by_node.get(_KEY)
    if not isinstance(found, AstReuse):
        found = cache.by_node[_KEY] = AstReuse()
    return found


@contextmanager
def walking() -> Iterator[None]:
    """Within: one lint, reusing what the versions before kept, when the
    language server's cache is active; else the children of the nodes the
    walks meet are kept for this lint only (a file's tree is walked many
    times: by each function's evidence, each class's, each screen)."""
    reuse = _of_cache()
    if reuse is None:
        children = CHILDREN.set({})
        try:
            yield
        finally:
            CHILDREN.reset(children)
        return
    token, children = _CURRENT.set(reuse), CHILDREN.set(reuse.children)
    try:
        yield
    finally:
        CHILDREN.reset(children)
        _CURRENT.reset(token)


def splice(text: str, tree: ast.Module | None) -> ast.Module | None:
    """``AstReuse.splice`` when a reuse is active, else ``tree``."""
    reuse = _CURRENT.get()
    return tree if reuse is None or tree is None else reuse.splice(text, tree)


def remembered(what: str, node: ast.AST, make: Callable[[], object]):
    """``make()``, kept by ``(what, node)`` across versions when a reuse is
    active: for results read off ``node``'s own syntax only."""
    reuse = _CURRENT.get()
    if reuse is None:
        return make()
    key = (what, node)
    found = reuse.memo.get(key, _MISSING)
    if found is _MISSING:
        found = reuse.memo[key] = make()
    return found


_MISSING = object()


def spans_of(statement: ast.stmt, base: int, offset: Callable[[int, int], int], walked: Callable[[ast.AST, int], dict]) -> dict:
    """``walked(statement, base)``: the spans of a statement's expressions,
    relative to ``base``, each to the first node the walk meets with it
    (``FileFlow._relative_spans``). A def's or class's, in the language
    server, put together from its header's and each body statement's, kept
    by that statement relative to its own first line: a long def typed in
    keeps the statements the edit did not touch (``AstReuse._rebuilt``).
    The parts' spans are disjoint, and a walk of each (breadth first) meets
    its nodes in the order the walk of the whole does: the same node first."""
    if type(statement) not in _REBUILT or _CURRENT.get() is None:
        return walked(statement, base)
    found: dict = {}
    for name in statement._fields:
        value = getattr(statement, name, None)
        if name == "body" or value is None:
            continue
        for item in value if type(value) is list else (value,):
            if isinstance(item, ast.AST):
                for span, node in walked(item, base).items():
                    found.setdefault(span, node)
    for inner in statement.body:
        inner_base = offset(inner.lineno, 0)
        relative = remembered("spans", inner, lambda inner=inner, inner_base=inner_base: spans_of(inner, inner_base, offset, walked))
        shift = inner_base - base
        for (start, end), node in relative.items():
            found.setdefault((start + shift, end + shift), node)
    return found
