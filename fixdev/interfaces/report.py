"""Where a run's report goes: the findings (in any output format), the
``--statistics``, ``--show-fixes``, ``--show-files`` and ``--show-settings``
listings. Without ``--output-file``, stdout, or stderr for what ``--diff``
and ``--apply`` report beside the changes they print; with it, all of that
to the file, written once when the run ends, whole or not at all. Diffs, the
summary line and errors never go there."""

from __future__ import annotations

from pathlib import Path

import typer

from fixdev.files.writer import WriteError, write_report


class Report:
    def __init__(self, path: Path | None, out_color: bool = False, err_color: bool = False, file_color: bool = False) -> None:
        self.path = path
        self.out_color, self.err_color, self.file_color = out_color, err_color, file_color
        self.parts: list[str] = []

    def color(self, err: bool = False) -> bool:
        """Whether what goes where ``write(..., err)`` sends it is colored."""
        if self.path is not None:
            return self.file_color
        return self.err_color if err else self.out_color

    def write(self, text: str, err: bool = False) -> None:
        """``text`` to the report: stdout (``err``: stderr), or the file."""
        if self.path is None:
            typer.echo(text, nl=False, err=err, color=self.color(err))
        else:
            self.parts.append(text)

    def close(self) -> str | None:
        """Writes the file, if there is one; the error message, if it fails."""
        if self.path is None:
            return None
        try:
            write_report(self.path, "".join(self.parts).encode("utf-8", "surrogateescape"))
        except WriteError as exc:
            return f"{self.path}: error: {exc}"
        return None
