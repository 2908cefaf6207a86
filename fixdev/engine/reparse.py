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
from typing import Iterator, Sequence

import libcst as cst

from fixdev.engine.source import CPythonPositions, line_start, split_lines

_ACTIVE: ContextVar["ParseCache | None"] = ContextVar("fixdev_parse_cache", default=None)

# Beyond this many pieces kept, the cache starts over (an editor's file is
# small; a cache must not grow with every version of every file ever open).
_LIMIT = 20_000
# Nor hold more text than this, counted over the pieces kept: each version of
# an edited statement is a piece, and libcst's tree takes some 500 bytes a
# character (a keystroke in a 700-line function keeps another 15 MB).
_CHARACTERS = 1_000_000
_NEWLINE = re.compile(r"\r\n|\r|\n")
# A compound piece of at least this many lines is made from its last version
# (a smaller one is parsed whole: as fast, and nothing to prove).
_INNER_LINES = 40


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
        # The last version of each large compound piece, by its first line:
        # (its text, CPython's tree of its statement, the line it starts at).
        self._before: dict[str, tuple[str, ast.stmt, int]] = {}
        self.parsed = 0  # pieces parsed (the rest were reused): for tests and benchmarks
        self.parsed_inner = 0  # statements parsed inside them: for tests and benchmarks
        self.inner_lines = _INNER_LINES  # the size from which a compound piece is made from its last version
        self.inner = 0  # pieces made from their last version, parsing only the statements that changed
        self.checked_whole = 0  # modules whose code was generated whole to check it: for tests
        self.last: cst.Module | None = None  # the last module put together: its code is the text it was put together from

    def parse(self, text: str, tree: ast.Module) -> cst.Module | None:
        """The module of ``text`` (libcst's parseable text: no lone CRs), or
        None where it cannot be put together (the caller parses it whole)."""
        if "\f" in text or text.startswith("\ufeff") or "print_function" in text or not tree.body:
            return None  # libcst and CPython may place such lines differently: not worth the doubt
        offset = CPythonPositions(text).offset  # (line, column) -> offset, made once for both
        found = _cuts(text, tree, offset)
        if found is None:
            return None
        cuts, first_lines = found
        pieces = [text[start:end] for start, end in zip(cuts, cuts[1:] + [len(text)])]
        if len(self._pieces) > _LIMIT or self._characters > _CHARACTERS:
            self._characters = 0
            self._pieces.clear()
            self._joined.clear()
            self.by_node.clear()
            self._before.clear()
        seen: set[str] = set()
        modules = []
        defaults = None
        for piece, statement, first_line in zip(pieces, tree.body, first_lines):
            # a piece twice in one text is parsed twice: no node may stand twice in one tree
            entry = self._pieces.get(piece) if piece not in seen else None
            if entry is None:
                if defaults is None:
                    defaults = (_default_indent(text, tree, offset), _default_newline(text))
                module = self._from_before(piece, statement, first_line, *defaults) if piece not in seen else None
                if module is not None:
                    self.inner += 1
                    entry = (module, True)  # its parts were each checked (see _Rebuild)
                    # it shares most of its nodes with its last version: what it
                    # adds (the path down to the statements parsed, the index's
                    # walks of the statements on it) counts as half its text
                    size = len(piece) // 2
                else:
                    try:
                        module = cst.parse_module(piece)
                    except (cst.ParserSyntaxError, RecursionError):
                        return None
                    self.parsed += 1
                    entry = (module, module.code == piece)
                    size = len(piece)
                if piece not in seen:
                    self._pieces[piece] = entry
                    self._characters += size
            else:
                entry = (*entry, True)  # (module, code is the piece, kept): its joins may be kept too
            seen.add(piece)
            modules.append(entry)
            if entry[1] and type(statement) in _BLOCKS and piece.count("\n") >= self.inner_lines:
                # the piece's last version, its tree and CPython's: the next version is made from it
                self._before[_first_line(piece)] = (piece, statement, first_line)
        body: list[cst.CSTNode] = []
        carried: list[cst.EmptyLine] = []  # the previous piece's footer: the next statement's leading lines
        default_indent, default_newline = defaults or (_default_indent(text, tree, offset), _default_newline(text))
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


    def _from_before(self, piece: str, statement: ast.stmt, first_line: int, default_indent: str, default_newline: str) -> cst.Module | None:
        """The module of ``piece``, a new version of a large compound
        statement, made from the tree of its last version: the statements
        inside it that the edit did not touch are that tree's nodes, the
        touched ones parsed anew (``_Rebuild``); None where that cannot be
        shown exact (the piece is then parsed whole)."""
        before = self._before.get(_first_line(piece))
        if before is None:
            return None
        old_piece, old_statement, old_first_line = before
        entry = self._pieces.get(old_piece)
        if entry is None or not entry[1] or old_piece == piece or len(entry[0].body) != 1 or type(old_statement) is not type(statement):
            return None
        if entry[0].default_indent != default_indent or entry[0].default_newline != default_newline:
            return None
        rebuild = _Rebuild(piece, first_line, old_piece, old_first_line, default_indent, default_newline)
        try:
            made = rebuild.top(statement, old_statement, entry[0].body[0])
        except (cst.ParserSyntaxError, RecursionError):
            return None
        if made is None:
            return None
        self.parsed_inner += rebuild.parsed
        return entry[0].with_changes(body=[made])

def _cuts(text: str, tree: ast.Module, offset) -> tuple[list[int], list[int]] | None:
    """Where each piece starts: offset 0, then the start of the first line of
    each top-level statement after the first (its first decorator's line);
    and the line each starts at."""
    cuts = [0]
    lines = [1]
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
            lines.append(line)
        previous_end = statement.end_lineno
    return cuts, lines


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



# The compound statements a new version is made inside, by CPython's node
# type: libcst's. The block made inside is the statement's first (``body``);
# what follows it (``else``, ``except``, ``finally``) is kept as it was.
_BLOCKS: dict[type, type] = {
    ast.FunctionDef: cst.FunctionDef, ast.AsyncFunctionDef: cst.FunctionDef, ast.ClassDef: cst.ClassDef,
    ast.For: cst.For, ast.AsyncFor: cst.For, ast.While: cst.While, ast.If: cst.If,
    ast.With: cst.With, ast.AsyncWith: cst.With, ast.Try: cst.Try,
    **({ast.TryStar: cst.TryStar} if hasattr(ast, "TryStar") else {}),
}
_COMPOUND = (*_BLOCKS, ast.Match)
_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()


class _Rebuild:
    """A new version of a compound piece from the tree of its last version.

    The lines the edit changed are those between the two versions' common
    first and last lines. Inside the innermost block that holds them, the
    statements from the first one the edit may have changed to the first
    one after it that starts among the common last lines are parsed anew,
    as they stand (their own text, indented as it is, after a first block
    indented by the file's default indent, so that libcst takes the same
    defaults), followed by a ``pass`` at their indent: what libcst gives the
    statement after them in the whole text (its leading lines, the footers
    of the blocks before it) it gives the ``pass``. The rest of the block,
    and of the blocks around it, are the old tree's nodes: the same text, in
    the same place. Each step checks what it relies on (CPython's lines of
    the statements before and after, in both versions; the parsed text's
    code) and gives up (None) on any doubt.

    Why the parsed statements are libcst's own: libcst's nodes hold no
    absolute indent and no position; what a statement's node holds depends
    on its text, the indent it stands at (whether a comment or a line
    inside brackets starts with it), the module's default indent (a nested
    block's ``indent`` is None when it is the default) and the lines after
    it up to the next statement (a nested block's footer takes the lines
    indented to it). The first statement parsed takes its leading lines
    either from the old node (it starts on a line common to both versions,
    after the same lines) or from the parse, when it follows a simple
    statement (all the lines after a simple statement are the next one's).
    """

    def __init__(self, piece: str, first_line: int, old_piece: str, old_first_line: int, default_indent: str, default_newline: str) -> None:
        self.lines, self.old_lines = split_lines(piece), split_lines(old_piece)
        old_lines = self.old_lines
        n, m = len(self.lines), len(old_lines)
        limit = min(n, m)
        start = 0
        while start < limit and self.lines[start] == old_lines[start]:
            start += 1
        common_end = 0
        while common_end < limit - start and self.lines[n - 1 - common_end] == old_lines[m - 1 - common_end]:
            common_end += 1
        self.start, self.end = start, n - common_end  # the new version's changed lines (0-based, end exclusive)
        self.shift = m - n  # from a line among the common last ones to the same line in the old version
        self.first_line, self.old_first_line = first_line, old_first_line
        self.indent, self.newline = default_indent, default_newline
        self.parsed = 0

    def top(self, new: ast.stmt, old: ast.stmt, node: cst.CSTNode) -> cst.CSTNode | None:
        """The piece's statement. libcst takes a piece's default indent from
        its first indented line, the first line of the statement's block:
        kept only when that is the file's default (the piece stands in the
        file) in both versions."""
        body = getattr(new, "body", None)
        if not body or not isinstance(body, list):
            return None
        first = _groups(body, self.first_line)[0][0]
        if first >= len(self.lines) or _indent_of(self.lines[first]) != self.indent:
            return None
        return self.statement(new, old, node)

    def statement(self, new: ast.stmt, old: ast.stmt, node: cst.CSTNode) -> cst.CSTNode | None:
        """``node`` (the old version's) made anew inside the block that holds
        the edit's start: its body, or an ``else``, ``except`` or ``finally``
        clause's."""
        kind = _BLOCKS.get(type(new))
        if kind is None or type(old) is not type(new) or type(node) is not kind:
            return None
        found = None
        for new_body, old_body, block, remake in _clauses(new, old, node) or ():
            if type(block) is not cst.IndentedBlock or not new_body or not old_body:
                return None
            groups = _groups(new_body, self.first_line)
            if groups[0][0] > self.start:
                break
            found = (groups, old_body, block, remake)
        if found is None:
            return None  # the edit starts in the header or before the block's first statement
        groups, old_body, block, remake = found
        made = self.block(groups, _groups(old_body, self.old_first_line), block)
        return None if made is None else remake(made)

    def block(self, groups: list, old_groups: list, block: cst.IndentedBlock) -> cst.IndentedBlock | None:
        statements = block.body
        if len(statements) != len(old_groups):
            return None
        start, end = self.start, self.end
        k = -1
        while k + 1 < len(groups) and groups[k + 1][0] <= start:
            k += 1
        if k < 0:
            return None  # the edit starts in the header or before the block's first statement
        first, last, members = groups[k]
        # the edit inside one compound statement (or in the lines after it,
        # which the footers of its blocks may take): made inside it
        before_next = k + 1 == len(groups) or end <= groups[k + 1][0]
        if first < start and before_next and len(members) == 1 and _aligned(groups, old_groups, k, k + 1, k + 1, self.shift):
            old_first, old_last, old_members = old_groups[k]
            same_end = old_last == last if last < start else (old_last == last + self.shift if last >= end else True)
            if old_first == first and same_end and len(old_members) == 1:
                inner = self.statement(members[0], old_members[0], statements[k])
                if inner is not None:
                    return block.with_changes(body=(*statements[:k], inner, *statements[k + 1 :]))
        # the first statement parsed anew, and whether it keeps its old node's leading lines
        if start > last and _simple(members) and k + 1 < len(groups):
            a, own = k + 1, False
        elif k < len(old_groups) and old_groups[k][0] == first and _indent_of(self.old_lines[first]) == _indent_of(self.lines[first]):
            a, own = k, True
        elif k >= 1 and _simple(groups[k - 1][2]):
            a, own = k, False
        elif k >= 1:
            a, own = k - 1, True
        else:
            return None
        j = next((i for i in range(a + 1, len(groups)) if groups[i][0] >= end), None)  # the first statement kept after them
        if j is None:
            return self._to_the_end(block, groups, old_groups, a, own)
        old_j = j + len(old_groups) - len(groups)
        if old_j < a + own or not _aligned(groups, old_groups, a, j, old_j, self.shift) or not self._own(groups, old_groups, a, own):
            return None
        # the statements, then a stand-in for the one after them at its indent
        following_line = groups[j][0]
        parsed = self._parse(groups, a, own, following_line, _indent_of(self.lines[following_line]) + "pass" + self.newline)
        if parsed is None:
            return None
        module, holder, made = parsed
        if module.footer or len(module.body) != 2 or holder.body.footer or len(made) != j - a + 1:
            return None
        stand_in = made.pop()
        if not _is_pass(stand_in):
            return None
        made = self._lead(made, statements, a, own)
        if made is None:
            return None
        following = statements[old_j]
        if not _same_lines(following.leading_lines, stand_in.leading_lines):
            following = following.with_changes(leading_lines=stand_in.leading_lines)
        return block.with_changes(body=(*statements[:a], *made, following, *statements[old_j + 1 :]))

    def _to_the_end(self, block: cst.IndentedBlock, groups: list, old_groups: list, a: int, own: bool) -> cst.IndentedBlock | None:
        """The statements from ``a`` to the end of the block parsed anew, and
        the block's footer (the lines after them indented to the block, up
        to the last one that is: libcst's rule, which looks at those lines
        only). What follows the block is kept: the lines after its footer,
        which libcst gives to what comes next, must be the same lines in
        both versions, and are when the line before them is a common last
        line that ends the block (its last line, or one indented to it) in
        both."""
        lines, old_lines, shift = self.lines, self.old_lines, self.shift
        if not groups or not old_groups or len(old_groups) < a + own or not _aligned(groups, old_groups, a, len(groups), len(old_groups), shift):
            return None
        if not self._own(groups, old_groups, a, own):
            return None
        last, indent = groups[-1][1], _indent_of(lines[groups[-1][0]])
        after = last + 1  # the line of the next token after the block: what follows it
        while after < len(lines) and _no_token(lines[after]):
            after += 1
        if after < len(lines) and lines[after].lstrip(" \t").startswith("\\"):
            return None
        at_end = after == len(lines)
        parsed = self._parse(groups, a, own, after, "" if at_end else "pass" + self.newline)
        if parsed is None:
            return None
        module, holder, made = parsed
        if len(module.body) != (2 if at_end else 3) or len(made) != len(groups) - a:
            return None
        if at_end:
            rest = module.footer
        else:
            stand_in = module.body[2]
            if module.footer or not _is_pass(stand_in):
                return None
            rest = stand_in.leading_lines
        # The block's last line: its last statement's, or the last of its
        # footer; the lines after it are common last lines, and so is the
        # block's end in the old version: its last statement's last line
        # there, or a line indented to the block among blank and comment
        # lines after it.
        ends = after - len(rest) - 1
        if ends + 1 < self.end or ends < last or (ends > last and not lines[ends].startswith(indent)):
            return None
        old_last, old_ends = old_groups[-1][1], ends + shift
        if not (old_ends == old_last or (old_ends > old_last and old_lines[old_ends].startswith(indent))):
            return None
        if not all(_no_token(old_lines[i]) for i in range(old_last + 1, after + shift)):
            return None
        made = self._lead(made, block.body, a, own)
        if made is None:
            return None
        return block.with_changes(body=(*block.body[:a], *made), footer=holder.body.footer)

    def _own(self, groups: list, old_groups: list, a: int, own: bool) -> bool:
        """The first statement parsed may take its old node's leading lines:
        it starts on the same line as that node did, indented alike."""
        if not own:
            return True
        line = groups[a][0]
        return a < len(old_groups) and old_groups[a][0] == line and _indent_of(self.old_lines[line]) == _indent_of(self.lines[line])

    def _parse(self, groups: list, a: int, own: bool, until: int, after: str) -> tuple | None:
        """libcst's parse of the lines from statement ``a`` (or from the end
        of the simple statement before it) to line ``until``, in a block of
        their own indent after one of the file's default indent, then
        ``after``: (the module, the block holding them, its statements)."""
        region_start = groups[a][0] if own else groups[a - 1][1] + 1
        newline = self.newline
        wrapped = f"if 1:{newline}{self.indent}pass{newline}if 1:{newline}{''.join(self.lines[region_start:until])}{after}"
        self.parsed += 1
        try:
            module = cst.parse_module(wrapped)
        except cst.ParserSyntaxError:
            return None  # (the lines stand in the block of a statement that holds them)
        if module.default_indent != self.indent or module.default_newline != newline or module.header or len(module.body) < 2:
            return None
        holder = module.body[1]
        if type(holder) is not cst.If or type(holder.body) is not cst.IndentedBlock or holder.orelse is not None or module.code != wrapped:
            return None
        return module, holder, list(holder.body.body)

    @staticmethod
    def _lead(made: list, statements: Sequence[cst.CSTNode], a: int, own: bool) -> list | None:
        """With ``own``, the first statement parsed with its old node's leading lines."""
        if own:
            if not made or made[0].leading_lines:
                return None
            made[0] = made[0].with_changes(leading_lines=statements[a].leading_lines)
        return made


def _clauses(new: ast.stmt, old: ast.stmt, node: cst.CSTNode) -> list | None:
    """The blocks of a compound statement in the order of the text: (its
    statements in CPython's new tree, in the old one, libcst's old block, a
    function from a new block to the node holding it); None where the two
    versions do not have the same clauses (then nothing is made inside)."""
    found = [(new.body, old.body, node.body, lambda block: node.with_changes(body=block))]
    if isinstance(new, (ast.Try, *_TRY_STAR)):
        if len(new.handlers) != len(old.handlers) or len(node.handlers) != len(new.handlers):
            return None
        for i, handler in enumerate(node.handlers):
            found.append((new.handlers[i].body, old.handlers[i].body, handler.body, lambda block, i=i, handler=handler: node.with_changes(handlers=(*node.handlers[:i], handler.with_changes(body=block), *node.handlers[i + 1 :]))))
    orelse = getattr(new, "orelse", None)
    if orelse:
        clause = node.orelse
        if type(clause) is cst.If and type(new) is ast.If:
            return found  # an elif: only the first branch is made inside (an edit after it is not)
        if type(clause) is not cst.Else or not old.orelse:
            return None
        found.append((orelse, old.orelse, clause.body, lambda block, clause=clause: node.with_changes(orelse=clause.with_changes(body=block))))
    elif getattr(node, "orelse", None) is not None or getattr(old, "orelse", None):
        return None
    if getattr(new, "finalbody", None):
        clause = node.finalbody
        if clause is None or not old.finalbody:
            return None
        found.append((new.finalbody, old.finalbody, clause.body, lambda block, clause=clause: node.with_changes(finalbody=clause.with_changes(body=block))))
    elif getattr(node, "finalbody", None) is not None or getattr(old, "finalbody", None):
        return None
    return found


def _groups(body: list[ast.stmt], first_line: int) -> list[tuple[int, int, list[ast.stmt]]]:
    """A block's statements as libcst has them (statements sharing a line,
    ``a; b``, are one): (first line, last line, CPython's statements), the
    lines counted from 0 at ``first_line``; a statement's first line is its
    first decorator's."""
    groups: list[tuple[int, int, list[ast.stmt]]] = []
    for statement in body:
        decorators = getattr(statement, "decorator_list", None)
        first = (decorators[0].lineno if decorators else statement.lineno) - first_line
        last = statement.end_lineno - first_line
        if groups and first <= groups[-1][1]:
            groups[-1] = (groups[-1][0], max(last, groups[-1][1]), [*groups[-1][2], statement])
        else:
            groups.append((first, last, [statement]))
    return groups


def _aligned(groups: list, old_groups: list, before: int, after: int, old_after: int, shift: int) -> bool:
    """The statements before ``before`` are on the same lines in both
    versions, and those from ``after`` (``old_after`` in the old version)
    on lines ``shift`` apart, as many in each."""
    if len(groups) - after != len(old_groups) - old_after or before > len(old_groups):
        return False
    if any(groups[i][:2] != old_groups[i][:2] for i in range(before)):
        return False
    return all(groups[after + i][0] + shift == old_groups[old_after + i][0] and groups[after + i][1] + shift == old_groups[old_after + i][1] for i in range(len(groups) - after))


def _simple(statements: list[ast.stmt]) -> bool:
    return not any(isinstance(statement, _COMPOUND) for statement in statements)


def _is_pass(statement: cst.CSTNode) -> bool:
    return type(statement) is cst.SimpleStatementLine and len(statement.body) == 1 and type(statement.body[0]) is cst.Pass


def _no_token(line: str) -> bool:
    """A blank or comment line: no token of the code on it."""
    stripped = line.lstrip(" \t")
    return not stripped.strip("\r\n") or stripped.startswith("#")


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _first_line(piece: str) -> str:
    end = piece.find("\n")
    return piece if end < 0 else piece[:end]


def _same_lines(one: tuple, other: tuple) -> bool:
    return len(one) == len(other) and all(a.deep_equals(b) for a, b in zip(one, other))


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
