"""``# noqa`` comments: how one reads (``NOQA``, what the engine's suppression
matches), and the edit that silences one code on a finding's line, merged
into a ``# noqa: ...`` already there, as Ruff's "Disable for this line" and
``--add-noqa`` write it."""

from __future__ import annotations

import io
import re
import tokenize

from fixdev.engine.findings import Edit
from fixdev.engine.source import LineIndex, parseable_text

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]+(?:\s*,?\s*[A-Za-z]+[0-9]+)*))?", re.IGNORECASE)


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
                codes = re.findall(r"[A-Za-z]+[0-9]+", match.group("codes"))
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
