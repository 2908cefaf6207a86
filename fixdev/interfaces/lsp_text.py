"""The language server's view of an editor's text: LSP positions in the
encoding the client and server agreed on, and the documents as the editor
holds them.

A position is a 0-based line and a count of code units into it: UTF-8 bytes,
UTF-16 code units (LSP's default) or UTF-32 ones (characters), as negotiated
in ``initialize`` (``general.positionEncodings``; Neovim 0.11 lists UTF-8
first). Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` only (LSP 3.17, "Text
Documents"), the breaks Python itself counts: a form feed or U+2028 ends no
line, although ``str.splitlines`` splits there. Nothing here imports pygls."""

from __future__ import annotations

from fixdev.engine.source import LineIndex

# Bytes per code unit, and the codec that counts them without a byte-order mark.
_UNITS = {"utf-8": (1, "utf-8"), "utf-16": (2, "utf-16-le"), "utf-32": (4, "utf-32-le")}


def _units(encoding: str) -> tuple[int, str]:
    encoding = getattr(encoding, "value", encoding)  # lsprotocol's PositionEncodingKind is a str enum
    if encoding not in _UNITS:
        raise ValueError(f"unknown position encoding {encoding!r}")
    return _UNITS[encoding]


class Positions:
    """Character offsets in ``text`` to LSP positions and back."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.size, self.codec = _units(encoding)
        self.index = LineIndex(text)

    def _line_body(self, line: int) -> tuple[int, int]:
        """Offsets of a 0-based line's first character and of its line break."""
        starts = self.index.starts
        start = starts[line]
        end = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        while end > start and self.text[end - 1] in "\r\n":
            end -= 1
        return start, end

    def _count(self, chars: str) -> int:
        if self.size == 4 or chars.isascii():
            return len(chars)
        # surrogatepass: a lone surrogate (JSON allows one) still counts as a unit.
        return len(chars.encode(self.codec, "surrogatepass")) // self.size

    def position(self, offset: int) -> tuple[int, int]:
        """(line, character) of a character offset, both 0-based."""
        offset = max(0, min(offset, len(self.text)))
        line = self.index.position(offset)[0] - 1
        start, _ = self._line_body(line)
        return line, self._count(self.text[start:offset])

    def offset(self, line: int, character: int) -> int:
        """The character offset of a position. As LSP asks, a character past
        the line's end means its end, and a line past the last the text's end;
        a position inside a character (half a UTF-16 pair, a UTF-8 byte of a
        longer sequence) is taken as the start of that character."""
        if line < 0:
            return 0
        if line >= len(self.index.starts):
            return len(self.text)
        start, end = self._line_body(line)
        body = self.text[start:end]
        if self.size == 4 or body.isascii():
            return start + min(max(character, 0), len(body))
        units = 0
        for number, char in enumerate(body):
            units += self._count(char)
            if units > character:
                return start + number
        return end

    def at_column(self, line: int, column: int) -> int:
        """The offset of a 1-based line and character column, as Python's
        parsers give them, kept within the line (an error "at" the line break
        or past the last line is shown at the end)."""
        if line > len(self.index.starts):
            return len(self.text)
        start, end = self._line_body(max(line, 1) - 1)
        return min(start + max(column, 1) - 1, end)

    def span(self, start: tuple[int, int], end: tuple[int, int]) -> tuple[int, int]:
        """Offsets of a range given as two (line, character) pairs."""
        first, last = self.offset(*start), self.offset(*end)
        return first, max(first, last)


def apply_change(text: str, new_text: str, range_: tuple[tuple[int, int], tuple[int, int]] | None, encoding: str) -> str:
    """``text`` after one ``TextDocumentContentChangeEvent``: the whole text
    (no range) or a range replaced, counted with LSP's line breaks (pygls
    counts them with ``str.splitlines`` and lands a line early after a form
    feed or U+2028)."""
    if range_ is None:
        return new_text
    start, end = Positions(text, encoding).span(*range_)
    return text[:start] + new_text + text[end:]
