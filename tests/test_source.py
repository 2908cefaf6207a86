import codecs
import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixdev.engine.source import LineIndex, Source, SourceError, matches_any, parseable_text, split_lines, trigger_branches


@pytest.mark.parametrize(
    "data",
    [
        b"x = 1\n",
        b"x = 1\r\ny = 2\r\n",
        b"x = 1\ry = 2\r",
        codecs.BOM_UTF8 + b"x = '\xc3\xa9'\n",
        b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",
        b"if x:\n\ty = 1",
        b"",
    ],
)
def test_decode_encode_round_trips_bytes(data):
    source = Source.decode(data)
    assert source.encode(source.text) == data


def test_bom_and_cookie_are_remembered():
    source = Source.decode(codecs.BOM_UTF8 + b"x = 1\r\n")
    assert source.bom and source.encoding == "utf-8" and source.newline == "\r\n"
    latin = Source.decode(b"# coding: latin-1\nx = '\xe9'\n")
    assert latin.encoding == "iso-8859-1" and "\xe9" in latin.text


@pytest.mark.parametrize(
    "data, message",
    [
        (b"\x00\x01binary", "binary"),
        (b"x = '\xff\xfe'\n", "cannot decode as utf-8"),
        (b"# coding: nonsense-codec\nx = 1\n", "encoding"),
    ],
)
def test_bad_input_is_a_source_error(data, message):
    with pytest.raises(SourceError, match=message):
        Source.decode(data)


def test_encoding_a_character_the_codec_lacks_is_an_error():
    source = Source.decode(b"# coding: latin-1\nx = 1\n")
    with pytest.raises(SourceError, match="cannot be encoded"):
        source.encode("x = '\u20ac'\n")


def test_parseable_text_keeps_offsets():
    text = "a\rb\r\nc\r"
    assert parseable_text(text) == "a\nb\r\nc\n"
    assert len(parseable_text(text)) == len(text)


def test_line_index_counts_only_python_line_breaks():
    text = "ab\r\ncd\x0cef\rg"
    index = LineIndex(text)
    assert index.position(0) == (1, 1)
    assert index.position(4) == (2, 1)
    assert index.position(7) == (2, 4)  # a form feed is not a line break
    assert index.position(10) == (3, 1)
    assert index.offset(3, 1) == 10
    assert split_lines(text) == ["ab\r\n", "cd\x0cef\r", "g"]


@given(st.text(alphabet="ab\n\r\x0c\u2028é", max_size=40))
def test_line_ends_are_after_each_python_line_break(text):
    """Both ways of finding them (the fast one for text without ``\\r``)
    agree with the lines Python splits ``text`` into."""
    from fixdev.engine.source import line_ends

    lines = split_lines(text)
    expected = list(itertools.accumulate(len(line) for line in lines))
    if lines and not lines[-1].endswith(("\n", "\r")):
        expected.pop()  # the last line has no break
    assert line_ends(text) == expected
    assert line_ends(text.replace("\r", "")) == [m.end() for m in re.finditer(r"\n", text.replace("\r", ""))]


@given(st.text(alphabet="ab\n\r\x0c\x0b\x1c\x85\u2028é", max_size=40))
def test_split_lines_without_a_carriage_return_is_the_regular_expressions_split(text):
    """The fast way (no ``\\r``) gives the lines the general one does: a
    line break is ``\\n`` only, not a form feed or a Unicode separator."""
    general = [line for line in re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text) if line]
    assert split_lines(text) == general
    plain = text.replace("\r", "")
    assert split_lines(plain) == [line for line in re.split(r"(?<=\n)", plain) if line]
    assert "".join(split_lines(plain)) == plain


def test_line_ends_kept_for_a_text_are_a_new_list_each_time():
    from fixdev.engine.source import line_ends

    text = "a\nb\nc"
    first = line_ends(text)
    first.append(99)
    assert line_ends(text) == [2, 4] and line_ends(text) is not line_ends(text)
    for other in ("x\n" * n for n in range(8)):  # more texts than are kept
        assert line_ends(other) == [2 * (k + 1) for k in range(other.count("\n"))]
    assert line_ends(text) == [2, 4]


@pytest.mark.parametrize(
    "pattern, branches",
    [
        (r"abc", [r"abc"]),
        (r"a|b(?:c|d)|e", [r"a", r"b(?:c|d)", r"e"]),
        (r"x\|y|z", [r"x\|y", r"z"]),  # an escaped bar is a character
        (r"[|]a|[^]|]b|[]x]c", [r"[|]a", r"[^]|]b", r"[]x]c"]),  # bars and brackets inside classes
        (r"(?m)^a|^b", [r"(?m)^a", r"(?m)^b"]),  # global flags go to every branch
    ],
)
def test_a_trigger_is_split_at_its_top_level_bars_only(pattern, branches):
    assert [branch.pattern for branch in trigger_branches(pattern)] == branches


_TRIGGER_TEXTS = st.text(alphabet="ab|()[]^x\n ", max_size=12)


@given(_TRIGGER_TEXTS)
def test_searching_the_branches_finds_what_the_whole_pattern_finds(text):
    for pattern in (r"a|b(?:a|x)|\(", r"[|]a|[^]|]b|x\|", r"(?m)^a|b$", r"\bab\b|x+a|\[\]"):
        assert matches_any(trigger_branches(pattern), text) == (re.search(pattern, text) is not None)
