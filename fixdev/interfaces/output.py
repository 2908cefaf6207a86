"""Everything a run prints: diffs, findings in each output format, errors."""

from __future__ import annotations

import difflib
import json
import os
import unicodedata
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from fixdev import __version__
from fixdev.engine.findings import Finding
from fixdev.files.notebook import CellIndex, is_notebook, split_code
from fixdev.files.runner import FileResult
from fixdev.engine.source import LineIndex, split_lines

FORMATS = ("full", "concise", "json", "github", "sarif")

_RED, _GREEN, _CYAN, _BOLD, _RESET = "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[1m", "\x1b[0m"


def display(path: Path) -> str:
    return path.as_posix()


def unified_diff(path: Path, old: str, new: str, color: bool = False) -> str:
    name = display(path)
    lines = list(difflib.unified_diff(split_lines(old), split_lines(new), f"a/{name.lstrip('/')}", f"b/{name.lstrip('/')}"))
    out = []
    for line in lines:
        if not line.endswith(("\n", "\r")):
            line += "\n\\ No newline at end of file\n"
        if color:
            if line.startswith(("---", "+++")):
                line = f"{_BOLD}{line.rstrip()}{_RESET}\n"
            elif line.startswith("@@"):
                line = f"{_CYAN}{line.rstrip()}{_RESET}\n"
            elif line.startswith("-"):
                line = f"{_RED}{line.rstrip(chr(10))}{_RESET}\n"
            elif line.startswith("+"):
                line = f"{_GREEN}{line.rstrip(chr(10))}{_RESET}\n"
        out.append(line)
    return "".join(out)


def index_for(path: Path, text: str) -> LineIndex | CellIndex:
    """Positions in ``text``: lines of the file, or of a notebook's cells."""
    return CellIndex(text) if is_notebook(path) else LineIndex(text)


def code_diff(path: Path, old: str, new: str, color: bool = False) -> str:
    """A unified diff of the file, or for a notebook (``old`` and ``new`` its
    joined programs) one diff per changed cell, named ``PATH:cell N``."""
    if not is_notebook(path):
        return unified_diff(path, old, new, color)
    after = dict(split_code(new))
    parts = []
    for number, text in split_code(old):
        changed = after.get(number, text)
        if changed != text:
            if not text.endswith("\n") and not changed.endswith("\n"):  # a cell's last line has no break: no "No newline" noise
                text, changed = text + "\n", changed + "\n"
            parts.append(unified_diff(Path(f"{display(path)}:cell {number}"), text, changed, color))
    return "".join(parts)


def patch(result: FileResult, color: bool = False) -> bytes:
    """A Python file's diff as the bytes ``git apply`` needs: each line in
    the file's own encoding, with its own line break, and the BOM on the
    first line when the file has one (the text fixdev works on has none).
    Headers name the path as given (git apply run in a sub-folder takes
    paths relative to it)."""
    source = result.source
    encoding = source.encoding if source is not None else "utf-8"
    bom = "\ufeff" if source is not None and source.bom else ""
    old, new = bom + result.original, bom + (result.fixed if result.fixed is not None else result.original)
    name = display(result.path).lstrip("/")
    out = []
    for line in difflib.unified_diff(split_lines(old), split_lines(new), f"a/{name}", f"b/{name}"):
        if line.startswith(("---", "+++")):
            data = os.fsencode(line)  # the path's bytes as the file system has them
        else:
            # A fix that cannot be encoded is refused when written; the patch
            # shows it all the same rather than fail.
            data = line.encode("ascii" if line.startswith("@@") else encoding, "replace")
        ending = b"" if line.endswith(("\n", "\r")) else b"\n\\ No newline at end of file\n"
        if color:
            style = _BOLD if line.startswith(("---", "+++")) else _CYAN if line.startswith("@@") else _RED if line[:1] == "-" else _GREEN if line[:1] == "+" else ""
            if style:
                body = data.rstrip(b"\r\n")
                data = style.encode() + body + _RESET.encode() + data[len(body):]
        out.append(data + ending)
    return b"".join(out)


def result_diff(result: FileResult, color: bool = False) -> str:
    if result.code is not None:
        return code_diff(result.path, result.code, result.fixed_code or result.code, color)
    return unified_diff(result.path, result.original, result.fixed, color)


def cell_error_line(path: Path, error) -> str:
    return f"{display(path)}:cell {error.number}: error: {error.message}"


def json_location(index: LineIndex | CellIndex, offset: int) -> dict[str, int]:
    if isinstance(index, CellIndex):
        cell, row, column = index.locate(offset)
        return {"row": row, "column": column, "cell": cell}
    row, column = index.position(offset)
    return {"row": row, "column": column}


def _edit(index: LineIndex | CellIndex, edit) -> tuple[int, int, str]:
    return index.edit(edit.start, edit.end, edit.content) if isinstance(index, CellIndex) else (edit.start, edit.end, edit.content)


def where(path: Path, index: LineIndex | CellIndex, offset: int) -> str:
    """``path:row:column``, or ``path:cell N:row:column`` in a notebook (as Ruff writes it)."""
    if isinstance(index, CellIndex):
        cell, row, column = index.locate(offset)
        return f"{display(path)}:cell {cell}:{row}:{column}"
    row, column = index.position(offset)
    return f"{display(path)}:{row}:{column}"


def _paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color and text else text


def applicable(finding: Finding, unsafe_fixes: bool) -> bool:
    """Whether ``--apply`` applies the finding's fix: a safe fix, or an unsafe
    one with ``--unsafe-fixes`` (what ``[*]`` marks, as in Ruff)."""
    return finding.fix is not None and (finding.fix.safe or unsafe_fixes)


def finding_line(path: Path, index: LineIndex, finding: Finding, concise: bool = False, color: bool = False, unsafe_fixes: bool = False) -> str:
    """``path:row:col: CODE [name] [*] message``; with ``color``, as Ruff
    paints it: the path bold, the code red, the fix mark cyan. ``[*]`` marks a
    fix ``--apply`` applies (an unsafe one only with ``unsafe_fixes``)."""
    place = where(path, index, finding.start)
    name = display(path)
    if color and place.startswith(name):
        place = _paint(name, _BOLD, color) + place[len(name):]
    code = _paint(finding.code, _BOLD + _RED, color)
    mark = " " + _paint("[*]", _CYAN, color) if applicable(finding, unsafe_fixes) else ""
    if concise:
        return f"{place}: {code}{mark} {finding.message}"
    return f"{place}: {code} [{finding.name}]{mark} {finding.message}"


def finding_full(path: Path, text: str, index: LineIndex, finding: Finding, color: bool = False, unsafe_fixes: bool = False) -> str:
    """The ``full`` format, as Ruff's: the finding's line, the source line with
    carets under the finding (to the end of that line when it spans several),
    and the fix's message. Ends with a blank line that separates findings."""
    row, column = index.position(finding.start)
    if isinstance(index, CellIndex):
        line = index.shown_line(finding.start)
    else:
        start = index.starts[row - 1]
        end = index.starts[row] if row < len(index.starts) else len(text)
        line = text[start:end].rstrip("\r\n")
    before = _width(line[: column - 1])
    marked = max(1, _width(line[: column - 1 + finding.end - finding.start]) - before)
    number = str(row)
    gutter = " " * len(number)
    bar = _paint("|", _CYAN, color)
    out = [
        finding_line(path, index, finding, color=color, unsafe_fixes=unsafe_fixes),
        f"{gutter} {bar}",
        f"{_paint(number, _CYAN, color)} {bar} {line.expandtabs(TAB)}".rstrip(),
        f"{gutter} {bar} {' ' * before}{_paint('^' * marked + ' ' + finding.code, _BOLD + _RED, color)}",
        f"{gutter} {bar}",
    ]
    if finding.fix is not None:
        unsafe = "" if finding.fix.safe else " (unsafe fix: applied with --unsafe-fixes)" if not unsafe_fixes else " (unsafe fix)"
        out.append(f"{gutter} {_paint('=', _CYAN, color)} {_paint('help', _BOLD, color)}: {finding.fix.message}{unsafe}")
    return "\n".join(out) + "\n\n"


TAB = 4  # a tab in a shown source line is this many columns, as in Ruff


def _width(text: str) -> int:
    """Terminal columns ``text`` takes: tabs expanded, wide characters count two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text.expandtabs(TAB))


def as_json(results: Iterable[FileResult]) -> list[dict[str, Any]]:
    return [item for result in results for item, _ in _items(result)]


def _items(result: FileResult) -> Iterator[tuple[dict[str, Any], bool]]:
    """Each finding of ``result`` as a JSON item, and whether its positions
    are in the original text (a fix made or to be made) or in ``findings_text``."""
    index = index_for(result.path, result.findings_text)
    original = index_for(result.path, result.original_text)
    for finding, idx, fixed in [(f, original, True) for f in result.applied] + [(f, index, False) for f in result.findings]:
        fix = None
        if finding.fix is not None:
            fix = {
                "applicability": finding.fix.applicability,
                "message": finding.fix.message,
                "applied": fixed,
                "edits": [
                    {"content": content, "location": json_location(idx, start), "end_location": json_location(idx, end)}
                    for start, end, content in (_edit(idx, e) for e in finding.fix.edits)
                ],
            }
        item = {
            "code": finding.code,
            "name": finding.name,
            "message": finding.message,
            "filename": display(result.path),
            "location": json_location(idx, finding.start),
            "end_location": json_location(idx, finding.end),
            "fix": fix,
        }
        if isinstance(idx, CellIndex):
            item["cell"] = item["location"]["cell"]
        yield item, fixed


class _NotebookText:
    """Cell positions as positions in the ``.ipynb`` file's own JSON text,
    for viewers that know files, not cells (GitHub's annotations and code
    scanning): the place in the JSON string that holds the cell's line."""

    def __init__(self, result: FileResult) -> None:
        from fixdev.files.notebook import Notebook, NotebookError

        self.texts: dict[bool, tuple[Any, LineIndex] | None] = {}
        # Applied fixes are placed in the notebook as read; the other findings
        # in the one the user will find (as written, after --apply).
        for in_original, raw in ((True, result.original), (False, result.fixed if result.findings_in_fixed and result.fixed else result.original)):
            try:
                self.texts[in_original] = (Notebook.from_json(raw), LineIndex(raw))
            except NotebookError:
                self.texts[in_original] = None

    def region(self, item: dict[str, Any], in_original: bool) -> dict[str, int] | None:
        found = self.texts.get(in_original)
        if found is None:
            return None
        notebook, lines = found
        loc, end = item["location"], item["end_location"]
        first = notebook.raw_offset(loc["cell"], loc["row"], loc["column"])
        if first is None:
            return None
        row, column = lines.position(first)
        last = notebook.raw_offset(end["cell"], end["row"], end["column"]) if end.get("cell") == loc["cell"] else None
        end_row, end_column = lines.position(last) if last is not None and last >= first else (row, column)
        return {"startLine": row, "startColumn": column, "endLine": end_row, "endColumn": end_column}


def _regions(results: Iterable[FileResult]) -> Iterator[tuple[dict[str, Any], dict[str, int] | None]]:
    """Every finding's JSON item and, for a notebook, its region in the .ipynb text."""
    for result in results:
        text = _NotebookText(result) if is_notebook(result.path) and result.code is not None else None
        for item, in_original in _items(result):
            yield item, text.region(item, in_original) if text is not None else None


def github(results: Iterable[FileResult], level: str = "error") -> str:
    """Workflow commands, one a finding, as Ruff prints them: ``::error``
    (``level`` ``warning`` where findings do not fail the run)."""
    lines = []
    for item, region in _regions(results):
        loc, end = item["location"], item["end_location"]
        title = f"{item['code']} {item['name']}"
        message = item["message"].replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        if "cell" in item:
            # The annotation goes on the line of the .ipynb's JSON that holds
            # the cell's line; the message says where in the cell.
            place = f",line={region['startLine']},col={region['startColumn']}" if region else ""
            lines.append(f"::{level} title={title},file={item['filename']}{place}::cell {item['cell']}:{loc['row']}:{loc['column']}: {item['code']} {message}")
            continue
        lines.append(
            f"::{level} title={title},file={item['filename']},line={loc['row']},col={loc['column']},"
            f"endLine={end['row']},endColumn={end['column']}::{item['code']} {message}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def sarif(results: Iterable[FileResult]) -> str:
    """SARIF 2.1.0, for GitHub code scanning. Columns count code points
    (``columnKind``). SARIF has no notebook cells: a notebook's region is in
    the ``.ipynb`` JSON text, the cell in the result's properties and message,
    and its fix is left out (edits of the JSON text would have to be JSON)."""
    from fixdev.engine.registry import all_rules

    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.message},
            "fullDescription": {"text": rule.doc()},
            "help": {"text": rule.doc(), "markdown": rule.doc()},
            "properties": {"fixable": rule.fixable(), "group": rule.group},
        }
        for rule in all_rules()
    ]
    order = {rule["id"]: i for i, rule in enumerate(rules)}
    results_out = []
    for item, notebook_region in _regions(results):
        region = notebook_region or {
            "startLine": item["location"]["row"],
            "startColumn": item["location"]["column"],
            "endLine": item["end_location"]["row"],
            "endColumn": item["end_location"]["column"],
        }
        properties: dict[str, Any] = {}
        result = {
            "ruleId": item["code"],
            "ruleIndex": order[item["code"]],
            "level": "warning",
            "message": {"text": item["message"]},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": item["filename"]}, "region": region}}],
        }
        if "cell" in item:
            result["message"]["text"] = f"cell {item['cell']}:{item['location']['row']}:{item['location']['column']}: {item['message']}"
            properties.update(cell=item["cell"], cellRegion={
                "startLine": item["location"]["row"], "startColumn": item["location"]["column"],
                "endLine": item["end_location"]["row"], "endColumn": item["end_location"]["column"],
            })
        if item["fix"] is not None:
            properties.update(applicability=item["fix"]["applicability"], fixApplied=item["fix"]["applied"])
        if item["fix"] is not None and "cell" not in item:
            result["fixes"] = [
                {
                    "description": {"text": item["fix"]["message"]},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": item["filename"]},
                            "replacements": [
                                {
                                    "deletedRegion": {
                                        "startLine": e["location"]["row"],
                                        "startColumn": e["location"]["column"],
                                        "endLine": e["end_location"]["row"],
                                        "endColumn": e["end_location"]["column"],
                                    },
                                    "insertedContent": {"text": e["content"]},
                                }
                                for e in item["fix"]["edits"]
                            ],
                        }
                    ],
                }
            ]
        if properties:
            result["properties"] = properties
        results_out.append(result)
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "fixdev", "version": __version__, "informationUri": "https://pypi.org/project/fixdev/", "rules": rules}},
                "results": results_out,
                "columnKind": "unicodeCodePoints",  # columns count characters, as everywhere in fixdev
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def statistics(results: Iterable[FileResult], as_json: bool = False) -> str:
    """``--statistics``, as Ruff prints it: one line a rule with findings,
    the most frequent first (``   12  FDV104  [*]  cuda-call``; ``[*]`` when
    ``--apply`` applies some of its fixes), or the same as JSON."""
    counts: dict[tuple[str, str], list[int]] = {}
    for result in results:
        for finding in result.findings:
            row = counts.setdefault((finding.code, finding.name), [0, 0])
            row[0] += 1
            row[1] += applicable(finding, result.unsafe_fixes)
    rows = sorted(counts.items(), key=lambda item: (-item[1][0], item[0][0]))
    if as_json:
        return json.dumps([{"code": code, "name": name, "count": n, "fixable": fixable} for (code, name), (n, fixable) in rows], indent=2) + "\n"
    width = max((len(str(n)) for _, (n, _) in rows), default=1)
    return "".join(f"{n:>{width}}  {code}  {'[*]' if fixable else '   '}  {name}\n" for (code, name), (n, fixable) in rows)


def fix_summary(results: Iterable[FileResult], mode: str, color: bool = False) -> str:
    """``--show-fixes``, as Ruff prints its fixes: the fixes a file at a time
    (sorted by path), a line a rule, the most frequent first
    (``    2 × FDV104 (cuda-call)``). With ``--check`` those ``--apply`` would
    apply; with ``--diff`` and ``--apply`` those applied. Unsafe fixes the
    settings leave out come apart, under the hint for ``--unsafe-fixes``.
    Empty when there is no fix of either kind."""
    fixed: list[tuple[str, Finding]] = []
    hidden: list[tuple[str, Finding]] = []
    for result in results:
        name = display(result.path)
        if mode == "check":
            fixed += [(name, f) for f in result.findings if applicable(f, result.unsafe_fixes)]
        else:
            fixed += [(name, f) for f in result.applied]
        hidden += [(name, f) for f in result.findings if f.fix is not None and not applicable(f, result.unsafe_fixes)]
    n = len(fixed)
    title = {"check": f"{n} fixable with --apply:", "diff": f"Would fix {n} finding{'' if n == 1 else 's'}:"}.get(mode, f"Fixed {n} finding{'' if n == 1 else 's'}:")
    m = len(hidden)
    parts = []
    if fixed:
        parts.append(_fix_table(title, fixed, color))
    if hidden:
        parts.append(_fix_table(f"{m} hidden fix{'' if m == 1 else 'es'} can be enabled with --unsafe-fixes:", hidden, color))
    return "".join(parts)


def _fix_table(title: str, fixes: list[tuple[str, Finding]], color: bool) -> str:
    counts: dict[str, dict[tuple[str, str], int]] = {}
    for name, finding in fixes:
        table = counts.setdefault(name, {})
        table[(finding.code, finding.name)] = table.get((finding.code, finding.name), 0) + 1
    width = max(len(str(n)) for table in counts.values() for n in table.values())
    lines = [_paint(title, _BOLD + _GREEN, color)]
    for name in sorted(counts):
        lines.append(f"{_paint('-', _CYAN, color)} {_paint(name, _BOLD, color)}{_paint(':', _CYAN, color)}")
        for (code, rule), n in sorted(counts[name].items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"    {n:>{width}} × {_paint(code, _BOLD + _RED, color)} ({rule})")
    return "\n".join(lines) + "\n"
