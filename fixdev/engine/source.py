"""Bytes to text and back, keeping every byte a fix does not touch.

A ``Source`` remembers how its file was written (encoding, BOM, line endings)
so that ``Source.encode`` gives back the original bytes for untouched text.
"""

from __future__ import annotations

import bisect
import codecs
import io
import re
import tokenize
from dataclasses import dataclass
from itertools import accumulate

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LONE_CR = re.compile(r"\r(?!\n)")
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)


@dataclass(frozen=True)
class SyntaxLocation:
    """Where a parser refused the text, for an editor to underline: lines
    count from 1, columns count characters from 1, the end is exclusive;
    ``reason`` is the parser's own words ("'(' was never closed")."""

    line: int
    column: int
    end_line: int
    end_column: int
    reason: str


class SourceError(Exception):
    """The file cannot be read as Python source; the message says why, and
    ``syntax`` where, when a parser refused it."""

    def __init__(self, message: str, syntax: SyntaxLocation | None = None) -> None:
        super().__init__(message)
        self.syntax = syntax


class TooLargeError(SourceError):
    """The file's predicted memory is over the budget (``fixdev.engine.budget``);
    libcst did not parse it."""


@dataclass(frozen=True)
class Source:
    text: str  # decoded, without the BOM
    encoding: str
    bom: bool
    newline: str  # the first line break in the file, "\n" when it has none

    @classmethod
    def decode(cls, data: bytes) -> "Source":
        if b"\x00" in data:
            raise SourceError("binary file (contains NUL bytes)")
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:
            if _COOKIE.search(b"\n".join(data.splitlines()[:2])):
                raise SourceError(f"bad encoding declaration: {exc}") from None
            encoding = "utf-8"  # no cookie, just bytes that are not UTF-8: say which
        bom = data.startswith(codecs.BOM_UTF8)
        body = data[len(codecs.BOM_UTF8) :] if bom else data
        if encoding == "utf-8-sig":
            encoding = "utf-8"
        try:
            text = body.decode(encoding)
        except UnicodeDecodeError as exc:
            raise SourceError(
                f"cannot decode as {encoding}: byte {exc.object[exc.start]:#04x} at offset {exc.start}"
            ) from None
        except LookupError:
            raise SourceError(f"unknown encoding {encoding!r}") from None
        source = cls(text, encoding, bom, _first_newline(text))
        if source.encode(text) != data:
            # Some codecs do not map back byte for byte; refusing is better than
            # silently rewriting bytes the user never asked us to touch.
            raise SourceError(f"encoding {encoding} does not round-trip exactly; left unchanged")
        return source

    @classmethod
    def from_text(cls, text: str) -> "Source":
        bom = text.startswith("\ufeff")
        if bom:
            text = text[1:]
        return cls(text, "utf-8", bom, _first_newline(text))

    def encode(self, text: str) -> bytes:
        try:
            body = text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise SourceError(f"fixed text cannot be encoded as {self.encoding}: {exc.reason}") from None
        return (codecs.BOM_UTF8 if self.bom else b"") + body

    def with_text(self, text: str) -> "Source":
        return Source(text, self.encoding, self.bom, self.newline)


def _first_newline(text: str) -> str:
    match = _LINE_BREAK.search(text)
    return match.group() if match else "\n"


def parseable_text(text: str) -> str:
    """The text libcst is given: lone CRs become LFs.

    libcst does not round-trip files with old Mac line endings. Swapping one
    character for one keeps every offset valid, so spans computed on the
    parseable text apply unchanged to the original.
    """
    return _LONE_CR.sub("\n", text) if "\r" in text else text


# The line ends of the last few texts asked: one version of a file is asked
# for them by the parse in pieces, the splice, libcst's pieces, the flow and
# the spans, each a walk of the whole text.
_ENDS: dict[str, list[int]] = {}


def line_ends(text: str) -> list[int]:
    """The offset just after each line break (CR LF, CR or LF, as
    Python counts lines), in order (a new list: the caller's to change)."""
    found = _ENDS.get(text)
    if found is None:
        if "\r" in text:
            found = [m.end() for m in _LINE_BREAK.finditer(text)]
        else:  # (a third of the time of a match object per line, on long files)
            found = list(accumulate(len(line) + 1 for line in text.split("\n")[:-1]))
        if len(_ENDS) >= 4:
            _ENDS.clear()
        _ENDS[text] = found
    return list(found)


class LineIndex:
    """Maps character offsets to 1-based (line, column) and back."""

    def __init__(self, text: str) -> None:
        self.starts = [0, *line_ends(text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column - 1


def line_start(text: str, offset: int) -> int:
    """Offset of the start of the line holding ``offset`` (after a line feed or a carriage return)."""
    return max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1


class CPythonPositions:
    """Character offsets in ``text`` of the positions CPython's tree gives:
    lines count from 1, columns in UTF-8 bytes, and the text may start with a
    byte-order mark CPython was not given."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, 1 if text.startswith("\ufeff") else 0, *line_ends(text)]

    def offset(self, line: int, byte_column: int) -> int:
        starts, text = self.starts, self.text
        start = starts[line] if line < len(starts) else len(text)
        end = starts[line + 1] if line + 1 < len(starts) else len(text)
        line_text = text[start:end]
        if line_text.isascii():
            return start + byte_column
        return start + len(line_text.encode("utf-8")[:byte_column].decode("utf-8", "replace"))

    def position(self, offset: int) -> tuple[int, int]:
        """(line, UTF-8 column) of a character offset."""
        line = max(bisect.bisect_right(self.starts, offset) - 1, 1)
        prefix = self.text[self.starts[line] : offset]
        return line, len(prefix) if prefix.isascii() else len(prefix.encode("utf-8"))


def split_lines(text: str) -> list[str]:
    """Lines with their breaks, splitting only where Python does (not at form
    feeds or Unicode separators, as ``str.splitlines`` would)."""
    if "\r" not in text:  # the same lines, a tenth of the time
        lines = text.split("\n")
        last = lines.pop()
        found = [line + "\n" for line in lines]
        if last:
            found.append(last)
        return found
    return [line for line in re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text) if line]


# Where each trigger pattern last matched, and the length of that text: a
# language server's next version is the same text with a few characters
# changed, and a match before the change (or after it, moved by the change in
# length) is usually still there. The hint is only tried, never trusted.
_FOUND_AT: dict[re.Pattern[str], tuple[int, int]] = {}


def matches(pattern: re.Pattern[str], text: str) -> bool:
    """``pattern.search(text) is not None``, trying first where the pattern
    matched the text searched before. ``pattern.match(text, pos)`` is the
    search's own attempt at ``pos`` (``^``, ``\\b`` and lookbehind see the
    whole text, not a slice): when it matches, the search would have found
    a match (there or earlier); when not, the text is searched whole."""
    hint = _FOUND_AT.get(pattern)
    if hint is not None:
        start, length = hint
        for at in (start, start + len(text) - length):
            if 0 <= at <= len(text) and pattern.match(text, at) is not None:
                _FOUND_AT[pattern] = (at, len(text))
                return True
    found = pattern.search(text)
    if found is None:
        return False
    if len(_FOUND_AT) > 4096:  # patterns are few (the rules' triggers); a bound all the same
        _FOUND_AT.clear()
    _FOUND_AT[pattern] = (found.start(), len(text))
    return True


# A leading group of global flags (``(?m)``, ``(?i)``): it applies to every branch.
_GLOBAL_FLAGS = re.compile(r"\(\?[aiLmsux]+\)")


def trigger_branches(source: str) -> tuple[re.Pattern[str], ...]:
    """``source`` (one element of a rule's trigger) compiled branch by branch,
    where it is an alternation at its top level (``a|b|c``): the text
    matches it where any branch is found. ``re`` tries every branch at every
    position, and branches that begin with different words leave it no
    literal to scan for, while each branch alone has one: on real code
    FDV110's second element took four times as long whole as split. A
    pattern with no top-level ``|`` is one branch."""
    flags = _GLOBAL_FLAGS.match(source)
    prefix = flags.group() if flags else ""
    body = source[len(prefix) :]
    return tuple(re.compile(prefix + branch) for branch in _top_level_branches(body))


def _top_level_branches(pattern: str) -> list[str]:
    """``pattern`` split at each ``|`` outside groups, character classes and escapes."""
    branches: list[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":  # a class: `]` right after `[` or `[^` is a member, not its end
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
        i += 1
    branches.append(pattern[start:])
    return branches


def matches_any(branches: tuple[re.Pattern[str], ...], text: str) -> bool:
    """Whether one of ``branches`` (``trigger_branches``) is found in ``text``."""
    for branch in branches:
        if matches(branch, text):
            return True
    return False
