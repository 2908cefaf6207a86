"""``--add-noqa``: a ``# noqa: FDVxxx`` on the line of every current finding,
as Ruff's ``--add-noqa`` writes them (merged into an existing ``# noqa:``),
so a team can adopt fixdev on a codebase and fix its findings later."""

from __future__ import annotations

from pathlib import Path

from fixdev.engine.findings import Finding, apply_edits
from fixdev.engine.noqa import noqa_edit
from fixdev.engine.registry import find_rule
from fixdev.engine.source import Source, SourceError
from fixdev.files.writer import write_atomic


def with_noqa(text: str, findings: list[Finding]) -> tuple[str, int]:
    """``text`` with a noqa for each finding (positions in ``text``), and how
    many were added; none for an unused-noqa finding (a rule that judges
    noqa directives). Latest first: an edit goes at the end of a finding's
    line, after the start of every finding before it, so their offsets hold."""
    added = 0
    for finding in sorted(findings, key=lambda f: (f.start, f.end), reverse=True):
        if find_rule(finding.code).judges_noqa:
            continue  # unused-noqa: a noqa to keep an unused noqa would be two; its fix removes the code
        edit = noqa_edit(text, finding.start, finding.end, finding.code)
        if edit is not None:
            text = apply_edits(text, [edit])
            added += 1
    return text, added


def add_noqa(path: Path, original: str, findings: list[Finding]) -> int:
    """Write ``path`` with a noqa for each finding, keeping its encoding, BOM
    and line endings; the number added. Raises ``SourceError`` or
    ``WriteError`` when the file cannot be read back or written, or changed
    since it was checked (then nothing is written)."""
    data = path.read_bytes()
    source = Source.decode(data)
    if source.text != original:
        raise SourceError("changed since it was checked; no noqa added")
    text, added = with_noqa(original, findings)
    if added:
        write_atomic(path, source.encode(text), expected=data)
    return added

