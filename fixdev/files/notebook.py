"""Jupyter notebooks (``.ipynb``) as one Python program, and back.

The rules never learn about notebooks. A notebook's code cells are joined, in
order, into one text that the engine reads as any ``.py`` file, so a device
bound in cell 2 is in scope in cell 7. The text is self-describing, so that it
can be split into cells again with nothing but itself:

- each cell starts with a marker statement, ``"__fixdev_cell__ 7"`` (cell 7,
  counted from 1 over all cells, markdown included); a statement rather than a
  comment, so that a run of imports ends with its cell and a definition placed
  "after the imports" stays in the cell that imports torch;
- a cell not ending in a line break gets one, and its marker says so
  (``"__fixdev_cell__ 7 +nl"``), so it is taken off again;
- each IPython line (``%magic``, ``!shell``, ``x = !cmd``, ``?help``,
  ``obj?``) becomes ``__fixdev_mask__ #`` followed by the line itself, behind
  the line's indentation (and behind ``x = `` for an assignment, so ``x`` is
  still bound): valid Python, the same number of lines, and the original
  restored byte for byte by dropping what comes before the marker;
- a cell's last statement, when it is an expression, is not discarded: the
  kernel shows its value (and binds it to ``_``), unless a ``;`` ends it. It
  is read as ``__fixdev_out__ = EXPR``, so that no rule takes ``x.to(device)``
  or ``y.cpu()`` there for a result thrown away; positions on that line are
  counted without the prefix, which is dropped again.

Cells whose cell magic runs another language (``%%bash``, ``%%writefile``) and
cells that still do not parse are left out (the latter reported by number).
Writing back replaces only the ``source`` values of cells that changed, in the
file's own JSON text: outputs, metadata, key order, indentation and escapes
stay byte for byte as they were.
"""

from __future__ import annotations

import ast
import bisect
import codecs
import json
import re
import warnings
from dataclasses import dataclass
from json.decoder import scanstring
from pathlib import Path
from typing import Iterator, Sequence

from fixdev.engine.source import LineIndex, Source, SourceError, split_lines

SUFFIX = ".ipynb"
CELL_MARKER = "__fixdev_cell__"
MASK = "__fixdev_mask__ #"
SHOWN = "__fixdev_out__ = "
_RESERVED = (CELL_MARKER, MASK.rstrip(" #"), SHOWN.rstrip(" ="))
_SEPARATOR = re.compile(r'^"__fixdev_cell__ (\d+)( \+nl)?"\n', re.MULTILINE)

# Cell magics whose body is Python that runs in the kernel's namespace. Any
# other cell magic (%%bash, %%html, %%writefile, %%sql, unknown ones) runs
# something else, or Python elsewhere (%%script python): the cell is skipped.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})

_CELL_MAGIC = re.compile(r"%%([\w.-]*)")
_HELP_AFTER = re.compile(r"%{0,2}[A-Za-z_*][\w*]*(?:\.[\w*]+)*(?:\(\))?\?{1,2}")
_ASSIGN_FROM = re.compile(r"[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*(?=[!%])")


class NotebookError(SourceError):
    """The file is not a notebook fixdev can read; the message says why."""


def is_notebook(path: Path) -> bool:
    return path.suffix.lower() == SUFFIX


def decode(data: bytes) -> Source:
    """A notebook's bytes as text: JSON is UTF-8 (a BOM is kept as it was)."""
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        text = data[len(codecs.BOM_UTF8) if bom else 0 :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not a valid notebook: not UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start})") from None
    return Source(text, "utf-8", bom, "\n")


# ---------------------------------------------------------------- IPython syntax


class _Scanner:
    """Just enough of Python's tokenizer to know whether a line starts a
    logical line (IPython recognises magics only there): open brackets,
    strings running over lines and backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None
        self.continued = False

    @property
    def at_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        self.continued = False
        body = line.rstrip("\r\n")
        i = 0
        while i < len(body):
            char = body[i]
            if self.quote is not None:
                if char == "\\":
                    i += 2
                elif body.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                else:
                    i += 1
                continue
            if char == "#":
                break
            if char in "\"'":
                self.quote = body[i : i + 3] if body[i : i + 3] in ('"""', "'''") else char
                i += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char == "\\" and i == len(body) - 1:
                self.continued = True
            i += 1
        if self.quote is not None and len(self.quote) == 1 and not body.endswith("\\"):
            self.quote = None  # an unclosed one-line string ends with its line (a syntax error Python reports)


def _ipython_prefix(body: str) -> str | None:
    """For a line that starts a logical line: None when it is Python, else
    what of it stays Python in the placeholder (its indentation, and ``x = ``
    for ``x = !cmd`` / ``x = %magic``)."""
    stripped = body.lstrip(" \t")
    indent = body[: len(body) - len(stripped)]
    if stripped[:1] in ("%", "!", "?"):
        return indent
    if _HELP_AFTER.fullmatch(stripped.rstrip()):
        return indent
    assigned = _ASSIGN_FROM.match(body)
    if assigned:
        return assigned.group()
    return None


def _line_body(line: str) -> tuple[str, str]:
    body = line.rstrip("\r\n")
    return body, line[len(body) :]


def mask(text: str) -> str | None:
    """The cell as Python, IPython lines replaced by placeholders; None when a
    cell magic runs another language."""
    lines = split_lines(text)
    first = next((line for line in lines if line.strip()), "")
    magic = _CELL_MAGIC.match(first)
    if magic and magic.group(1) not in PYTHON_CELL_MAGICS:
        return None
    out: list[str] = []
    scanner = _Scanner()
    magic_indent: str | None = None  # inside a magic continued with a backslash
    for line in lines:
        body, ending = _line_body(line)
        if magic_indent is not None:
            out.append(magic_indent + MASK + line)
            if not body.endswith("\\"):
                magic_indent = None
            continue
        prefix = _ipython_prefix(body) if scanner.at_start else None
        if prefix is None:
            scanner.feed(line)
            out.append(line)
            continue
        out.append(prefix + MASK + line)
        if body.endswith("\\"):
            magic_indent = body[: len(body) - len(body.lstrip(" \t"))]
    return "".join(out)


def unmask(text: str) -> str:
    """Placeholders back to the IPython lines they hold, shown values back to
    plain expressions."""
    if MASK not in text and SHOWN not in text:
        return text
    return "".join(_unmask_line(line) for line in split_lines(text))


def _unmask_line(line: str) -> str:
    if SHOWN in line:
        return line.replace(SHOWN, "", 1)
    return line[line.index(MASK) + len(MASK) :] if MASK in line else line


def cell_program(text: str) -> tuple[str | None, str | None]:
    """(the cell as Python, None), (None, why it does not parse), or (None,
    None) for a cell that runs another language."""
    masked = mask(text)
    if masked is None:
        return None, None
    tree, error = _parse(masked)
    if error is not None:
        return None, error
    if tree is None or not tree.body:
        return masked, None
    last = tree.body[-1]
    if not isinstance(last, ast.Expr):
        return masked, None
    if isinstance(last.value, ast.Name) and last.value.id == MASK.rstrip(" #"):
        return masked, None  # an IPython line
    lines = split_lines(masked)
    after = lines[last.end_lineno - 1].encode("utf-8")[last.end_col_offset :].decode("utf-8", "replace")
    if after.lstrip(" \t").startswith(";"):
        return masked, None  # a trailing ';' keeps the kernel from showing the value
    line = lines[last.lineno - 1]
    column = len(line.encode("utf-8")[: last.col_offset].decode("utf-8", "replace"))  # ast counts UTF-8 bytes
    lines[last.lineno - 1] = line[:column] + SHOWN + line[column:]
    return "".join(lines), None


# ---------------------------------------------------------------- the joined program


def _separator(number: int, added_newline: bool) -> str:
    return f'"{CELL_MARKER} {number}{" +nl" if added_newline else ""}"\n'


def split_code(code: str) -> list[tuple[int, str]]:
    """The joined program back into (cell number, source) pairs, with
    placeholders restored and the added line breaks taken off."""
    marks = list(_SEPARATOR.finditer(code))
    cells = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(code)
        chunk = code[mark.end() : end]
        if mark.group(2) and chunk.endswith("\n"):
            chunk = chunk[:-1]
        cells.append((int(mark.group(1)), unmask(chunk)))
    return cells


class CellIndex:
    """Offsets in the joined program to (line, column) within their cell, as
    ``LineIndex`` does for a file; ``cell`` says which cell (1-based)."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.lines = LineIndex(code)
        found = list(_SEPARATOR.finditer(code))
        self.marks = [(self.lines.position(m.end())[0], int(m.group(1))) for m in found]
        self._first_lines = [line for line, _ in self.marks]
        # Where a cell's added line break ends: a point the cell itself lacks.
        self._added_ends = {found[i + 1].start() if i + 1 < len(found) else len(code) for i, m in enumerate(found) if m.group(2)}

    def edit(self, start: int, end: int, content: str) -> tuple[int, int, str]:
        """An edit of the joined program as one of its cell: an insertion after
        a last line that has no line break (a definition added after the
        imports) goes at the end of that line, its line break first."""
        if start == end and start in self._added_ends and content.endswith("\n"):
            return start - 1, end - 1, "\n" + content[:-1]
        return start, end, content

    def locate(self, offset: int) -> tuple[int, int, int]:
        line, column = self.lines.position(offset)
        i = max(0, bisect.bisect_right(self._first_lines, line) - 1)
        first, number = self.marks[i] if self.marks else (1, 0)
        start = self.lines.starts[line - 1]
        shown = self.code.find(SHOWN, start, self.lines.starts[line] if line < len(self.lines.starts) else len(self.code))
        if shown >= 0 and offset > shown:
            column = max(shown - start + 1, column - len(SHOWN))
        return number, line - first + 1, column

    def shown_line(self, offset: int) -> str:
        """The line holding ``offset`` as the cell has it (without line break)."""
        line, _ = self.lines.position(offset)
        start = self.lines.starts[line - 1]
        end = self.lines.starts[line] if line < len(self.lines.starts) else len(self.code)
        return _unmask_line(self.code[start:end]).rstrip("\r\n")

    def position(self, offset: int) -> tuple[int, int]:
        _, line, column = self.locate(offset)
        return line, column

    def cell(self, offset: int) -> int:
        return self.locate(offset)[0]


# ---------------------------------------------------------------- the file


@dataclass
class Cell:
    kind: str  # "code", "markdown", "raw"
    text: str  # the source, joined
    span: tuple[int, int] | None = None  # the source value in the file's JSON text
    items: tuple[tuple[int, int], ...] | None = None  # its strings, when a list; None for one string
    lines: tuple[str, ...] = ()  # the decoded strings of the list


@dataclass(frozen=True)
class CellError:
    number: int
    message: str


class Notebook:
    """A notebook's cells, the program made of its code cells, and the cells
    left out because they do not parse."""

    def __init__(self, cells: Sequence[Cell], raw: str | None = None, python: bool = True) -> None:
        self.cells = list(cells)
        self.raw = raw
        self.errors: list[CellError] = []
        parts = []
        for number, cell in enumerate(self.cells, 1):
            if cell.kind != "code" or not python:
                continue
            reserved = next((word for word in _RESERVED if word in cell.text), None)
            if reserved is not None:
                raise NotebookError(f"cell {number} contains {reserved!r}, a name fixdev uses to mark cells; left unchanged")
            program, error = cell_program(cell.text)
            if error is not None:
                self.errors.append(CellError(number, error))
            if program is None:
                continue
            added = not program.endswith("\n")
            parts.append(_separator(number, added) + program + ("\n" if added else ""))
        self.code = "".join(parts)

    @classmethod
    def from_json(cls, raw: str) -> "Notebook":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"not a valid notebook: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise NotebookError("not a valid notebook: JSON nested too deeply") from None
        if not isinstance(data, dict):
            raise NotebookError("not a valid notebook: the JSON is not an object")
        version = data.get("nbformat")
        if version is None:
            raise NotebookError("not a valid notebook: no nbformat version")
        if type(version) is not int or version != 4:
            raise NotebookError(f"not a valid notebook: nbformat {version!r}; fixdev reads nbformat 4")
        cells = data.get("cells")
        if not isinstance(cells, list):
            raise NotebookError("not a valid notebook: no list of cells")
        for number, cell in enumerate(cells, 1):
            if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
                raise NotebookError(f"not a valid notebook: cell {number} has no cell_type")
            source = cell.get("source")
            if not isinstance(source, str) and not (isinstance(source, list) and all(isinstance(s, str) for s in source)):
                raise NotebookError(f"not a valid notebook: cell {number} has no source (a string or a list of strings)")
        spans = _source_spans(raw)
        parsed = []
        for cell, (span, items) in zip(cells, spans):
            source = cell["source"]
            lines = tuple(source) if isinstance(source, list) else ()
            parsed.append(Cell(cell["cell_type"], "".join(source) if lines else source if isinstance(source, str) else "", span, items, lines))
        return cls(parsed, raw, python=_is_python(data))

    @classmethod
    def from_cells(cls, cells: Sequence[tuple[str, str]]) -> "Notebook":
        """A notebook known by its cells only (an editor's notebook document)."""
        return cls([Cell(kind, text) for kind, text in cells])

    def changed_sources(self, fixed_code: str) -> dict[int, str]:
        """Cell index (0-based) → new source, for the cells the fixes changed.
        Refuses (``NotebookError``) when a fix crossed a cell boundary or
        touched an IPython line: then nothing must be written."""
        before = _SEPARATOR.findall(self.code)
        after = _SEPARATOR.findall(fixed_code)
        if before != after:
            raise NotebookError("internal error: a fix crossed a cell boundary; left unchanged")
        changed = {}
        for number, text in split_code(fixed_code):
            cell = self.cells[number - 1]
            if text == cell.text:
                continue
            program, _ = cell_program(text)
            added = program is not None and not program.endswith("\n")
            expected = fixed_code_of_cell(fixed_code, number)
            if program is None or program + ("\n" if added else "") != expected:
                raise NotebookError(f"internal error: a fix changed an IPython line in cell {number}; left unchanged")
            changed[number - 1] = text
        return changed

    def to_json(self, changed: dict[int, str]) -> str:
        """The file's JSON text with only the changed cells' sources replaced."""
        assert self.raw is not None
        ascii_only = self.raw.isascii() and _NON_ASCII_ESCAPE.search(self.raw) is not None
        pieces, last = [], 0
        for index in sorted(changed):
            cell = self.cells[index]
            assert cell.span is not None
            start, end = cell.span
            pieces += [self.raw[last:start], self._serialize(cell, changed[index], ascii_only)]
            last = end
        pieces.append(self.raw[last:])
        written = "".join(pieces)
        # What is written must read back as the notebook meant: every source
        # as it was, or as fixed. A slip here must cost the fix, not the file.
        try:
            cells = json.loads(written)["cells"]
        except (ValueError, KeyError, TypeError):
            cells = None
        expected = [changed.get(i, cell.text) for i, cell in enumerate(self.cells)]
        if cells is None or len(cells) != len(expected) or any(
            ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]) != text for c, text in zip(cells, expected)
        ):
            raise NotebookError("internal error: the notebook written back would not read back as fixed; left unchanged")
        return written

    def _serialize(self, cell: Cell, text: str, ascii_only: bool) -> str:
        if cell.items is None:
            return json.dumps(text, ensure_ascii=ascii_only)
        raw = self.raw
        start, end = cell.span
        known: dict[str, str] = {}
        for line, (item_start, item_end) in zip(cell.lines, cell.items):
            known.setdefault(line, raw[item_start:item_end])  # an unchanged line keeps its bytes
        tokens = [known.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in text.splitlines(True)]
        if not tokens:
            return "[]"
        if cell.items:
            first, last = cell.items[0], cell.items[-1]
            opening, closing = raw[start + 1 : first[0]], raw[last[1] : end - 1]
            between = raw[first[1] : cell.items[1][0]] if len(cell.items) > 1 else "," + opening
        else:  # an empty list: lay the strings out as the file lays out its lists
            indent = _INDENT.match(raw, raw.rfind("\n", 0, start) + 1).group()
            unit = _indent_unit(raw)
            newline = "\r\n" if "\r\n" in raw else "\n"
            opening = newline + indent + unit if unit is not None else ""
            closing = newline + indent if unit is not None else ""
            between = "," + opening
        return "[" + opening + between.join(tokens) + closing + "]"

    def raw_offset(self, number: int, line: int, column: int) -> int | None:
        """Where (line, column) of cell ``number`` is in the file's JSON text."""
        cell = self.cells[number - 1]
        if cell.span is None or self.raw is None:
            return None
        offset = LineIndex(cell.text).offset(line, column)
        if cell.items is None:
            start, end = cell.span
            return start + _raw_index(self.raw[start:end], offset)
        for text, (start, end) in zip(cell.lines, cell.items):
            if offset < len(text):
                return start + _raw_index(self.raw[start:end], offset)
            offset -= len(text)
        return cell.items[-1][1] - 1 if cell.items else cell.span[0] + 1


def fixed_code_of_cell(code: str, number: int) -> str:
    """The chunk of the joined program that holds cell ``number``, as the
    engine wrote it (placeholders and added line break included)."""
    marks = list(_SEPARATOR.finditer(code))
    for i, mark in enumerate(marks):
        if int(mark.group(1)) == number:
            return code[mark.end() : marks[i + 1].start() if i + 1 < len(marks) else len(code)]
    return ""


def synthetic(cells: Sequence[tuple[str, str]]) -> str:
    """A minimal nbformat 4 document holding ``cells`` ((cell_type, source)
    pairs): how an editor's notebook document goes through the file path."""
    return json.dumps(
        {
            "cells": [{"cell_type": kind, "metadata": {}, "source": text} for kind, text in cells],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
        ensure_ascii=False,
    )


def _is_python(data: dict) -> bool:
    """An R or Julia notebook has code cells that are not Python; a notebook
    that does not say is taken to be Python."""
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        table = metadata.get(key)
        if isinstance(table, dict) and isinstance(table.get(field), str):
            return table[field].lower() in ("python", "python3", "ipython", "ipython3")
    return True


def _parse(masked: str) -> tuple[ast.Module | None, str | None]:
    """CPython's tree of a cell, or why it does not parse. Its refusal is
    confirmed by the engine's check, as for files: newer syntax than the
    running Python that libcst accepts gives (None, None)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(masked), None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    from fixdev.engine.core import syntax_check  # libcst is loaded only to confirm an error

    try:
        syntax_check(masked)
    except SourceError as exc:
        return None, str(exc)
    return None, None


# ---------------------------------------------------------------- where the sources are in the JSON text

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_INDENT = re.compile(r"[ \t]*")
_STRUCTURE = re.compile(r'["\[\]{}]')
_SCALAR = re.compile(r"[^,\]}\s]+")
_NON_ASCII_ESCAPE = re.compile(r"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})")


def _skip(raw: str, i: int) -> int:
    return _WHITESPACE.match(raw, i).end()


def _value_end(raw: str, i: int) -> int:
    """The end of the JSON value starting at ``i`` (the text is valid JSON)."""
    char = raw[i]
    if char == '"':
        return scanstring(raw, i + 1)[1]
    if char not in "[{":
        return _SCALAR.match(raw, i).end()
    depth = 0
    while True:
        found = _STRUCTURE.search(raw, i)
        i = found.start()
        if found.group() == '"':
            i = scanstring(raw, i + 1)[1]
            continue
        depth += 1 if found.group() in "[{" else -1
        i += 1
        if depth == 0:
            return i


def _members(raw: str, i: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of the object starting at ``i``."""
    i = _skip(raw, i + 1)
    if raw[i] == "}":
        return
    while True:
        key, i = scanstring(raw, i + 1)
        i = _skip(raw, _skip(raw, i) + 1)  # past ':'
        end = _value_end(raw, i)
        yield key, i, end
        i = _skip(raw, end)
        if raw[i] == "}":
            return
        i = _skip(raw, i + 1)


def _elements(raw: str, i: int) -> Iterator[tuple[int, int]]:
    i = _skip(raw, i + 1)
    if raw[i] == "]":
        return
    while True:
        end = _value_end(raw, i)
        yield i, end
        i = _skip(raw, end)
        if raw[i] == "]":
            return
        i = _skip(raw, i + 1)


def _source_spans(raw: str) -> list[tuple[tuple[int, int], tuple[tuple[int, int], ...] | None]]:
    """For each cell, the span of its ``source`` value and, for a list, of its
    strings. A repeated key counts as JSON reads it: the last one."""
    cells_at = None
    for key, start, _ in _members(raw, _skip(raw, 0)):
        if key == "cells":
            cells_at = start
    spans = []
    for cell_start, _ in _elements(raw, cells_at):
        source = None
        for key, start, end in _members(raw, cell_start):
            if key == "source":
                source = (start, end)
        items = tuple(_elements(raw, source[0])) if raw[source[0]] == "[" else None
        spans.append((source, items))
    return spans


def _indent_unit(raw: str) -> str | None:
    """The file's indentation step (nbformat writes 1 space; other tools 2 or
    4); None for a file on one line."""
    found = re.search(r"\n([ \t]+)\S", raw)
    return found.group(1) if found else None


def _raw_index(token: str, count: int) -> int:
    """Index in a JSON string literal (quotes included) of its ``count``-th
    decoded character."""
    i = 1
    for _ in range(count):
        if token[i] != "\\":
            i += 1
        elif token[i + 1] != "u":
            i += 2
        elif 0xD800 <= int(token[i + 2 : i + 6], 16) < 0xDC00 and token[i + 6 : i + 8] == "\\u":
            i += 12  # a surrogate pair is one character
        else:
            i += 6
    return i
