"""From a log's frames to the files under PATH (``FileIndex``): never
site-packages; paths from another machine match by their suffix, and the line
the log prints must be the file's line (compared as code, not bytes)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
import re
from pathlib import Path
from typing import Iterable

from fixdev.engine.source import Source, SourceError
from fixdev.files.notebook import is_notebook
from fixdev.diagnose.log import Frame, is_library, path_parts, short

@dataclass
class Mapped:
    frame: Frame
    path: Path | None  # the local file; None when none matches
    problem: str | None = None  # "stale: ..." / "ambiguous: ..."
    line: int | None = None  # a notebook's cell: the line in the program its code cells make

    @property
    def at(self) -> int:
        """The failing line in the text the engine reads (a notebook's program)."""
        return self.line if self.line is not None else self.frame.line


class FileIndex:
    """The Python files under PATH, found by the suffix of a path from any machine."""

    def __init__(self, files: Iterable[Path], notebooks: Iterable[Path] = ()) -> None:
        self.by_name: dict[str, list[tuple[Path, list[str]]]] = {}
        self.notebooks = list(notebooks)
        self._cells: dict[Path, tuple | None] = {}
        for path in files:
            parts = list(path.absolute().parts)
            self.by_name.setdefault(parts[-1], []).append((path, parts))
        self._texts: dict[Path, str | None] = {}

    def text(self, path: Path) -> str | None:
        """The file's text; a notebook's: the program its code cells make."""
        if path not in self._texts:
            if is_notebook(path):
                cells = self.cells(path)
                self._texts[path] = cells[0].code if cells is not None else None
                return self._texts[path]
            try:
                self._texts[path] = Source.decode(path.read_bytes()).text
            except (OSError, SourceError):
                self._texts[path] = None
        return self._texts[path]

    def cells(self, path: Path) -> tuple | None:
        """(the notebook, execution count -> cell number) of a notebook under
        PATH; None for one that cannot be read (its run says why)."""
        if path not in self._cells:
            import json

            from fixdev.files.notebook import Notebook, NotebookError, decode

            try:
                raw = decode(path.read_bytes()).text
                notebook = Notebook.from_json(raw)
                counts = {}
                for number, cell in enumerate(json.loads(raw)["cells"], 1):
                    count = cell.get("execution_count") if cell.get("cell_type") == "code" else None
                    if type(count) is int:
                        counts.setdefault(count, number)
                self._cells[path] = (notebook, counts)
            except (OSError, SourceError, NotebookError, ValueError, RecursionError):
                self._cells[path] = None
        return self._cells[path]

    def map_cell(self, frame: Frame) -> Mapped:
        """A ``Cell In[7]`` frame: the code cell whose execution count is 7 in
        a notebook under PATH, whose line is the line the log shows."""
        from fixdev.files.notebook import CellIndex

        count = frame.execution_count
        found = []  # (notebook path, cell number, program line, agrees)
        for path in self.notebooks if count is not None else ():
            cells = self.cells(path)
            number = cells[1].get(count) if cells is not None else None
            if number is None:
                continue
            notebook = cells[0]
            lines = notebook.cells[number - 1].text.splitlines()
            agrees = 1 <= frame.line <= len(lines) and (frame.source is None or same_code(lines[frame.line - 1], frame.source))
            firsts = {cell: first for first, cell in CellIndex(notebook.code).marks}
            if number in firsts:  # not a cell left out (another language, a syntax error)
                found.append((path, number, firsts[number] + frame.line - 1, agrees, lines))
        agreeing = [item for item in found if item[3]]
        if len(agreeing) == 1:
            path, number, line, _, _ = agreeing[0]
            return Mapped(frame, path, line=line)
        if len(agreeing) > 1:
            names = ", ".join(f"{p.as_posix()} (cell {n})" for p, n, *_ in agreeing[:3])
            return Mapped(frame, None, problem=f"ambiguous: {frame.path} could be {names}; pass the notebook you mean as PATH")
        if found:
            path, number, _, _, lines = found[0]
            current = lines[frame.line - 1].strip() if 1 <= frame.line <= len(lines) else ""
            shown = f"the log shows `{short(frame.source or '', 70)}`, the cell has `{short(current, 70) or '(no such line)'}`"
            where = f"line {frame.line} of cell {number} of {path.as_posix()} ({frame.path})" if len(found) == 1 else f"line {frame.line} of every notebook cell run as {frame.path}"
            return Mapped(frame, None, problem=f"stale: {where} is not the line the log shows: {shown}; the notebook changed since the error; nothing fixed")
        return Mapped(frame, None)

    def map(self, frame: Frame) -> Mapped:
        if frame.cell:
            return self.map_cell(frame)
        if is_library(frame.path):
            return Mapped(frame, None)
        wanted = path_parts(frame.path)
        if not wanted:
            return Mapped(frame, None)
        candidates = self.by_name.get(wanted[-1], [])
        if not candidates:
            return Mapped(frame, None)

        def score(parts: list[str]) -> int:
            n = 0
            while n < min(len(parts), len(wanted)) and parts[-1 - n] == wanted[-1 - n]:
                n += 1
            return n

        scored = sorted(((score(parts), path) for path, parts in candidates), key=lambda item: -item[0])
        best = [path for value, path in scored if value == scored[0][0]]
        if frame.source is not None:
            agreeing = [path for path in best if self.line_matches(path, frame)]
            if len(agreeing) == 1:
                return Mapped(frame, agreeing[0])
            if not agreeing and len(best) == 1:
                return Mapped(frame, best[0], problem="stale")
            if not agreeing:
                return Mapped(frame, None, problem=f"stale in every file that could be {frame.path}")
            best = agreeing
        if len(best) > 1:
            names = ", ".join(p.as_posix() for p in best[:3])
            return Mapped(frame, None, problem=f"ambiguous: {frame.path} could be {names}; pass the one you mean as PATH")
        return Mapped(frame, best[0])

    def line_matches(self, path: Path, frame: Frame) -> bool:
        text = self.text(path)
        if text is None:
            return False
        lines = text.splitlines()
        if not 1 <= frame.line <= len(lines):
            return False
        return same_code(lines[frame.line - 1], frame.source or "")

    def find(self, path: Path, source: str) -> int | None:
        """The line of ``path`` nearest the top that is ``source``, if any."""
        if not source:
            return None
        for number, line in enumerate((self.text(path) or "").splitlines(), 1):
            if same_code(line, source):
                return number
        return None

    def line(self, path: Path, number: int) -> str:
        text = self.text(path) or ""
        lines = text.splitlines()
        return lines[number - 1] if 1 <= number <= len(lines) else ""


def same_code(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def changed_lines(old: str, new: str) -> set[int]:
    """Lines of ``new`` that are not lines of ``old`` (1-based)."""
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(j1 + 1, j2 + 1))
    return changed


def in_cells(code: str, sentence: str) -> str:
    """``line 12`` of a notebook's program said as ``cell 3, line 4``."""
    from fixdev.files.notebook import CellIndex

    index = CellIndex(code)

    def cell_line(match: re.Match) -> str:
        number = int(match.group(1))
        if not 1 <= number <= len(index.lines.starts):
            return match.group(0)
        cell, row, _ = index.locate(index.lines.starts[number - 1])
        return f"line {row} of cell {cell}"

    return re.sub(r"\bline (\d+)\b", cell_line, sentence)
