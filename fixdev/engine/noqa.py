"""``# noqa`` comments, the engine's whole dealing with them:

- how one reads (``NOQA``), and which findings a file's comments suppress
  (``suppressed_codes``, ``is_suppressed``: ``# noqa``, ``# noqa: FDV101``,
  a code prefix ``# noqa: FDV1``, ``# fixdev: ignore[like-factory]``);
- the edit that silences one code on a finding's line, merged into a
  ``# noqa: ...`` already there, as Ruff's "Disable for this line" and
  ``--add-noqa`` write it (``noqa_edit``);
- each ``# noqa: CODES`` directive with the codes that silenced a finding of
  the run (``directives``, ``with_usage``), and the edit that takes codes out
  of one (``Directive.removal``), for the rules that judge directives
  (``Rule.judges_noqa``: unused-noqa, as Ruff's RUF100).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

import libcst as cst

from fixdev.engine.findings import Edit, Finding
from fixdev.engine.source import LineIndex, parseable_text

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:\s*,?\s*[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
_FIXDEV_IGNORE = re.compile(r"#\s*fixdev:\s*ignore(?:\[(?P<words>[^\]]*)\])?")
_MARKER = re.compile(r"#.*?(?:noqa|fixdev:)", re.IGNORECASE)


# -- what the comments suppress ------------------------------------------------


def suppressed_codes(text: str, module: cst.Module, whole_file_spans: Callable[[], Mapping[cst.CSTNode, Any]], lines: set[int]) -> dict[int, set[str] | None]:
    """Line number → codes or names suppressed there (None: everything), for
    the given lines. The text is searched first; only when a line with a
    finding carries a marker are real comments (not strings) read from the tree."""
    index = LineIndex(text)
    if not any(index.position(m.start())[0] in lines for m in _MARKER.finditer(text)):
        return {}
    reader = _SuppressionComments(index, whole_file_spans())
    module.visit(reader)
    return reader.result


class _SuppressionComments(cst.CSTVisitor):
    """Collects each line's suppression comments. (A class made anew inside
    ``suppressed_codes`` held the file's spans in a cycle, freed only by the
    cycle collector.)"""

    def __init__(self, index: LineIndex, spans: Mapping[cst.CSTNode, Any]) -> None:
        super().__init__()
        self.index = index
        self.spans = spans
        self.result: dict[int, set[str] | None] = {}

    def visit_Comment(self, node: cst.Comment) -> None:
        line, _ = self.index.position(self.spans[node].start)
        _add_suppressions(self.result, line, node.value)


def _add_suppressions(result: dict[int, set[str] | None], line: int, comment: str) -> None:
    words = _comment_suppressions(comment)
    if words is False:
        return
    current = result.get(line, set())
    result[line] = None if words is None or current is None else current | words


def _comment_suppressions(comment: str) -> set[str] | None | bool:
    """The codes/names a comment suppresses, None for all, False for none."""
    found: set[str] = set()
    hit = False
    for match in NOQA.finditer(comment):
        hit = True
        if not match.group("codes"):
            return None
        found.update(code.upper() for code in _CODE.findall(match.group("codes")))
    for match in _FIXDEV_IGNORE.finditer(comment):
        hit = True
        if match.group("words") is None:
            return None
        found.update(word.strip() for word in match.group("words").split(",") if word.strip())
    return found if hit else False


def _finding_lines(finding: Finding, index: LineIndex) -> set[int]:
    """The lines a suppression for ``finding`` may stand on: its first and its last."""
    return {index.position(finding.start)[0], index.position(max(finding.start, finding.end - 1))[0]}


def is_suppressed(finding: Finding, index: LineIndex, suppressions: dict[int, set[str] | None]) -> bool:
    for line in _finding_lines(finding, index):
        if line not in suppressions:
            continue
        words = suppressions[line]
        if words is None or finding.name in words or any(is_code_prefix(word, finding.code) for word in words):
            return True
    return False


def is_code_prefix(word: str, code: str) -> bool:
    """``FDV1`` covers FDV101, FDV102 …, as flake8 reads ``# noqa: E1``; a word
    must end in a digit, so ``FDV`` alone or a rule name never matches a code."""
    return word[-1:].isdigit() and code.startswith(word.upper())


# -- the edit that adds a code ----------------------------------------------------


def noqa_edit(text: str, start: int, end: int, code: str) -> Edit | None:
    """The edit adding ``code`` to a ``# noqa`` on the first line of the span
    ``start``..``end`` that can end with a comment, else on its last (the
    engine honours a suppression on either). None when neither can: both end
    inside a string or after a backslash, or the text does not tokenize."""
    index = LineIndex(text)
    first, _ = index.position(start)
    last, _ = index.position(max(start, end - 1))
    comments, ends = _line_ends(text)
    for line in dict.fromkeys((first, last)):
        if line not in ends:
            continue
        comment = comments.get(line)
        if comment is not None:
            begin, body = comment
            match = NOQA.search(body)
            if match is not None:
                if not match.group("codes"):
                    return None  # a bare # noqa silences everything already
                codes = _CODE.findall(match.group("codes"))
                if code.upper() in (c.upper() for c in codes):
                    return None
                at = begin + match.end("codes")
                return Edit(at, at, f", {code}")
            at = begin + len(body.rstrip())  # after another comment (# type: ignore …), as Ruff writes it
            return Edit(at, at, f"  # noqa: {code}")
        code_end = ends[line]
        body_start = index.starts[line - 1]
        stripped = body_start + len(text[body_start:code_end].rstrip(" \t\f"))
        return Edit(stripped, code_end, f"  # noqa: {code}")
    return None


def _line_ends(text: str) -> tuple[dict[int, tuple[int, str]], dict[int, int]]:
    """For each 1-based line that can take a comment: its comment (offset,
    text), if any, and the offset where its code ends (its line break, or the
    text's end). A line inside a string, or continued by a backslash, has no
    NEWLINE or NL token of its own, so it is not among them."""
    index = LineIndex(text)
    comments: dict[int, tuple[int, str]] = {}
    ends: dict[int, int] = {}
    # Lone CRs as LFs: tokenize splits at \n only; one character for one keeps offsets.
    readline = io.StringIO(parseable_text(text), newline="").readline
    try:
        for token in tokenize.generate_tokens(readline):
            line, column = token.start
            if token.type == tokenize.COMMENT:
                comments[line] = (index.offset(line, column + 1), token.string)
            elif token.type in (tokenize.NEWLINE, tokenize.NL):
                ends[line] = index.offset(line, column + 1)
    except (tokenize.TokenError, SyntaxError):
        return {}, {}
    return comments, ends


# -- directives, for the rules that judge them ------------------------------------


@dataclass(frozen=True)
class Directive:
    """One ``# noqa: CODES`` in a comment (a bare ``# noqa`` is none: it names
    no code). Offsets are the text's; ``codes`` as written, in order."""

    line: int
    start: int  # the directive's '#'
    end: int  # just after its last code
    codes: tuple[str, ...]
    codes_start: int  # where its first code starts
    comment_start: int  # the comment holding it (one may hold another comment first)
    comment_end: int
    used: frozenset[str] = frozenset()  # its codes (upper case) that silenced a finding of the run

    def removal(self, text: str, codes: Iterable[str]) -> Edit:
        """The edit taking ``codes`` out, as Ruff's RUF100 fix does: the
        others are kept (``# noqa: E501``); when none is left the directive
        goes, with the blanks before it, and what the comment holds besides
        stays (``# keep``, ``# type: ignore``, or ``# reason`` for the text
        after it); a comment left empty goes whole, and a line that held only
        it goes with its line break."""
        gone = {code.upper() for code in codes}
        kept = [code for code in self.codes if code.upper() not in gone]
        if kept:
            return Edit(self.codes_start, self.end, ", ".join(kept))
        before = text[self.comment_start:self.start]
        after = text[self.end:self.comment_end]
        rest = after.lstrip(" \t,")
        if rest.startswith("#"):  # another comment follows: it takes the directive's place
            return Edit(self.start, self.comment_end - len(rest), "")
        if rest:  # words after the codes (a reason): they stay a comment
            return Edit(self.start, self.comment_end - len(rest), "# ")
        if before.strip():  # another comment before it: "# keep  # noqa: X" keeps "# keep"
            return Edit(self.comment_start + len(before.rstrip()), self.comment_end, "")
        index = LineIndex(text)
        line_start = index.starts[self.line - 1]
        code = text[line_start:self.comment_start]
        if not code.strip():  # the line holds only the comment
            next_line = index.starts[self.line] if self.line < len(index.starts) else len(text)
            return Edit(line_start, next_line, "")
        return Edit(line_start + len(code.rstrip(" \t\f")), self.comment_end, "")


def directives(text: str) -> list[Directive]:
    """Every ``# noqa: CODES`` in the text's comments (read by ``tokenize``:
    never one inside a string), in order; none when the text does not tokenize."""
    index = LineIndex(text)
    found = []
    readline = io.StringIO(parseable_text(text), newline="").readline
    try:
        comments = [token for token in tokenize.generate_tokens(readline) if token.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return []
    for token in comments:
        line, column = token.start
        begin = index.offset(line, column + 1)
        for match in NOQA.finditer(token.string):
            if not match.group("codes"):
                continue
            codes_at = begin + match.start("codes")
            found.append(Directive(
                line=line,
                start=begin + match.start(),
                end=begin + match.end(),
                codes=tuple(_CODE.findall(match.group("codes"))),
                codes_start=codes_at,
                comment_start=begin,
                comment_end=begin + len(token.string),
            ))
    return found


def with_usage(found: Sequence[Directive], findings: Iterable[Finding], index: LineIndex) -> list[Directive]:
    """``found`` with, for each directive, its codes that silence one of
    ``findings`` (the rules' findings before suppression), on the finding's
    first or last line, by its code or a prefix of it, as ``is_suppressed``
    reads them."""
    by_line: dict[int, list[int]] = {}
    for number, directive in enumerate(found):
        by_line.setdefault(directive.line, []).append(number)
    used: dict[int, set[str]] = {}
    for finding in findings:
        for line in _finding_lines(finding, index):
            for number in by_line.get(line, ()):
                for code in found[number].codes:
                    if is_code_prefix(code, finding.code):
                        used.setdefault(number, set()).add(code.upper())
    return [replace(directive, used=frozenset(used.get(number, ()))) for number, directive in enumerate(found)]


def comment_suppressions(text: str) -> dict[int, set[str] | None]:
    """``suppressed_codes`` for every line, read by ``tokenize`` (for findings
    made without libcst's tree: those of the rules that judge directives)."""
    result: dict[int, set[str] | None] = {}
    comments, _ = _line_ends(text)
    for line, (_, comment) in comments.items():
        _add_suppressions(result, line, comment)
    return result
