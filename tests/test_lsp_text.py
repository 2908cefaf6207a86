"""fixdev.interfaces.lsp_text: LSP positions in each encoding, and changes by range."""

from __future__ import annotations

import pytest

from fixdev.interfaces.lsp_text import Positions, apply_change

TEXT = 'a = "é ✓ 😀"\r\nb = "\f\u2028x"\rc = 1\n\nlast 😀'
# The LSP lines, written out: a form feed and U+2028 end none.
LINES = ['a = "é ✓ 😀"', 'b = "\f\u2028x"', "c = 1", "", "last 😀"]
UNITS = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}


def units(chars: str, encoding: str) -> int:
    codec, size = UNITS[encoding]
    return len(chars.encode(codec)) // size


@pytest.mark.parametrize("encoding", sorted(UNITS))
def test_every_character_boundary_maps_both_ways(encoding):
    positions = Positions(TEXT, encoding)
    start = 0
    for number, line in enumerate(LINES):
        assert TEXT.startswith(line, start)
        for column in range(len(line) + 1):
            assert positions.position(start + column) == (number, units(line[:column], encoding))
            assert positions.offset(number, units(line[:column], encoding)) == start + column
        start += len(line) + (2 if TEXT.startswith("\r\n", start + len(line)) else 1)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_position_inside_a_character_is_its_start(encoding):
    positions = Positions(TEXT, encoding)
    emoji = TEXT.index("😀")
    inside = units(TEXT[:emoji], encoding) + 1  # one unit into a 4-byte, 2-unit character
    assert positions.offset(0, inside) == emoji


def test_positions_past_a_line_or_the_text_are_clamped():
    positions = Positions(TEXT, "utf-16")
    assert positions.offset(0, 999) == TEXT.index("\r\n")
    assert positions.offset(99, 0) == len(TEXT)
    assert positions.at_column(2, 999) == TEXT.index('x"\r') + 2  # 1-based, as Python's parsers count
    assert positions.at_column(99, 1) == len(TEXT)


@pytest.mark.parametrize("encoding", sorted(UNITS))
def test_a_change_by_range_counts_lsp_lines(encoding):
    line = LINES[2]
    at = (2, units(line[: line.index("1")], encoding))
    assert apply_change(TEXT, "2", (at, (at[0], at[1] + 1)), encoding) == TEXT.replace("c = 1", "c = 2")
    assert apply_change(TEXT, "whole", None, encoding) == "whole"
