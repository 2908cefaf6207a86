"""``--traceback LOG``: from a device error's traceback to the line, the why and the fix.

The steps, each with one home:

1. **Read the log** (``parse_log``): a terminal paste, a CI log, a Jupyter
   error with ANSI colours, pytest's report; several tracebacks and chained
   exceptions. Each traceback becomes a list of frames (path, line, function,
   the source line the log prints) and the exception text after them.
2. **Recognise the error** (``FAMILIES``): a table, as data, of the messages
   torch has used for device errors over the years, what each says about the
   two devices, and the rule codes whose findings can explain it. The table
   is the only rule knowledge here; a code absent from the registry is not used.
3. **Map** (``FileIndex``): frames to files under PATH (never
   site-packages; paths from another machine match by their suffix, and the
   line the log prints must be the file's line). ``explain.py`` then runs the
   engine on the file and says why, with the findings that fix it.
4. **Run** (``run``): the errors, explained, and the kept findings' fixes
   applied as the engine applies any fix; printed in every mode and format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from fixdev.engine.findings import Finding
from fixdev.files.notebook import is_notebook
from fixdev.engine.source import LineIndex, Source, SourceError

from fixdev.diagnose.explain import Explained, FileFacts
from fixdev.diagnose.log import MISMATCH_CODES, exception_lines, is_library, known_families, parse_log, posix, short
from fixdev.diagnose.statements import scope_path
from fixdev.diagnose.mapping import FileIndex, changed_lines

# ---------------------------------------------------------------------------
# From a log to output: what ``fixdev --traceback LOG [PATH...]`` does
# ---------------------------------------------------------------------------


@dataclass
class _FileFix:
    facts: FileFacts
    data: bytes
    kept: list[Finding] = field(default_factory=list)
    fixed: str | None = None
    applied: list[Finding] = field(default_factory=list)
    error: str | None = None
    remaining: list[Finding] = field(default_factory=list)  # in the fixed text, in the failing lines' functions
    unsafe_fixes: bool = False  # the file's settings apply unsafe fixes (what [*] marks)


class Run:
    """One ``--traceback`` run: the log, the files under PATH, the engine."""

    def __init__(self, paths: Sequence[Path], overrides, excludes: Sequence[str] = ()) -> None:
        from fixdev.files.discovery import Missing, discover

        self.overrides = overrides
        found = list(discover(paths, excludes))
        self.missing = [item for item in found if isinstance(item, Missing)]
        files = [item for item in found if not isinstance(item, Missing)]
        # a traceback names .py files, and a notebook's cells by their execution count ("Cell In[n]")
        self.index = FileIndex((path for path in files if path.suffix == ".py"), (path for path in files if is_notebook(path)))
        self.files: dict[Path, _FileFix] = {}
        from fixdev.files.parallel import project_of

        # the files under PATH analysed together, as a run over PATH does
        self.project = project_of(files)
        self.told_facts: dict[tuple, FileFacts] = {}  # (path, evidence) -> the file as the error's message places it

    def load(self, path: Path, told: Sequence[tuple] = ()) -> FileFacts:
        """The file's findings and flow; with ``told`` (``explain.Told.items``),
        as the error's message places values the analysis could not."""
        if told:
            return self._load_told(path, tuple(told))
        if path in self.files:
            return self.files[path].facts
        from fixdev.analysis.flow import FileFlow
        from fixdev.files.config import ConfigError
        from fixdev.diagnose.explain import FileFacts
        from fixdev.engine.core import FixConflictError
        from fixdev.engine.registry import SelectionError
        from fixdev.files.runner import engine_for, settings_for

        error, findings, data, source, text, unsafe = None, [], b"", None, "", False
        try:
            data = path.read_bytes()
            if is_notebook(path):  # the engine reads the program its code cells make, as for --apply nb.ipynb
                from fixdev.files.notebook import Notebook, decode

                source = decode(data)
                text = Notebook.from_json(source.text).code
            else:
                source = Source.decode(data)
                text = source.text
            settings = settings_for(path, self.overrides)
            unsafe = settings.unsafe_fixes
            findings = engine_for(settings, path).lint(text, self.project.for_file(path))
        except OSError as exc:
            error = f"cannot read: {exc.strerror or exc}"
        except (SourceError, ConfigError, SelectionError, FixConflictError) as exc:
            error = str(exc)
        except RecursionError:
            error = "code is nested too deeply to analyse"
        except Exception as exc:  # a bug in a rule costs this file, not the run
            error = f"internal error, file left unchanged ({type(exc).__name__}: {exc}); please report it"
        facts = FileFacts(path, text, source, findings, FileFlow(text, project=self.project.for_file(path)), LineIndex(text), error)
        self.files[path] = _FileFix(facts, data, unsafe_fixes=unsafe)
        return facts

    def _load_told(self, path: Path, told: tuple) -> FileFacts:
        from fixdev.analysis.flow import Evidence, FileFlow
        from fixdev.diagnose.explain import FileFacts
        from fixdev.files.runner import engine_for, settings_for

        key = (path, told)
        if key not in self.told_facts:
            plain = self.load(path)
            evidence = Evidence(self.project.for_file(path), plain.text, told)
            try:
                findings = engine_for(settings_for(path, self.overrides), path).lint(plain.text, evidence, triggers=False)
            except Exception:  # the plain run read this file; evidence that breaks a rule is dropped
                return plain
            self.told_facts[key] = FileFacts(path, plain.text, plain.source, findings, FileFlow(plain.text, project=evidence), plain.lines, plain.error)
        return self.told_facts[key]

    def fix(self, explained: Sequence[Explained], write: bool) -> None:
        """Apply the kept findings' fixes, file by file, as the engine
        applies any fix (rounds until settled, re-parse check)."""
        from fixdev.engine.core import FixConflictError
        from fixdev.files.runner import engine_for, settings_for
        from fixdev.files.writer import WriteError, write_atomic

        told: dict[Path, list[tuple]] = {}  # what the messages placed, per file, for the engine's flow
        for item in explained:
            if item.path is not None and item.findings:
                entry = self.files[item.path]
                # what fails next in the same function rides with a fix of the error, never alone
                # (an unsafe fix left out without --unsafe-fixes is no fix here)
                also = item.also if any(_applicable(self, item.path, f) for f in item.findings) else []
                entry.kept.extend(f for f in [*item.findings, *also] if f not in entry.kept)
                told.setdefault(item.path, []).extend(t for t in item.told if t not in told.get(item.path, ()))
        for path, entry in self.files.items():
            if not entry.kept or entry.facts.error:
                continue
            original = entry.facts.text
            wanted = {(f.code, f.start, f.end) for f in entry.kept}
            changed_cache: dict[str, set[int]] = {}

            def approve(text: str, finding: Finding, original=original, wanted=wanted, cache=changed_cache) -> bool:
                if text == original:
                    return (finding.code, finding.start, finding.end) in wanted
                # A later round: a fix on code an approved fix just wrote
                # composes with it (torch.zeros(x.shape).cuda()); others wait.
                if text not in cache:
                    cache.clear()
                    cache[text] = changed_lines(original, text)
                line = LineIndex(text).position(finding.start)[0]
                return line in cache[text]

            project = self.project.for_file(path)
            if told.get(path):
                from fixdev.analysis.flow import Evidence

                # the first round's text only: positions in later rounds' text say nothing
                project = Evidence(project, original, _consistent(told[path]))
            try:
                outcome = engine_for(settings_for(path, self.overrides), path).fix(original, approve, project, triggers=not told.get(path))
            except FixConflictError as exc:
                entry.error = str(exc)
                continue
            except Exception as exc:  # a bug in a rule costs this file, not the run (as in load)
                entry.error = f"internal error, file left unchanged ({type(exc).__name__}: {exc}); please report it"
                continue
            if outcome.text != original:
                entry.fixed, entry.applied = outcome.text, outcome.applied
                # what the fixed file still has on the failing lines' flow, as plain --check would find it
                scopes = {scope_path(entry.facts.flow.tree, item.line) for item in explained if item.path == path and item.line is not None}
                try:
                    after = engine_for(settings_for(path, self.overrides), path).lint(outcome.text, self.project.for_file(path))
                except Exception:  # a rule that fails on the fixed text: nothing said about what is left
                    after = []
                entry.remaining = _left_in_flow(outcome.text, after, scopes)
                if write:
                    try:
                        written = outcome.text
                        if is_notebook(path):  # only the changed cells' sources, as --apply writes a notebook
                            from fixdev.files.notebook import Notebook

                            notebook = Notebook.from_json(entry.facts.source.text)
                            written = notebook.to_json(notebook.changed_sources(outcome.text))
                        write_atomic(path, entry.facts.source.encode(written), expected=entry.data)
                    except (WriteError, SourceError) as exc:
                        entry.error = str(exc)
        for item in explained:
            if item.path is None or item.status not in ("fixable", "explained"):
                continue
            entry = self.files[item.path]
            if entry.error:
                item.status, item.problem = "error", f"{item.path.as_posix()}: error: {entry.error}"
            elif write and any(f in entry.applied for f in item.findings):
                item.status = "fixed"


def same_flow(facts: FileFacts, line: int, kept: Sequence[Finding]) -> list[Finding]:
    """The file's other findings of a value on the wrong device (the mismatch
    group's codes) that have a fix, in the failing line's function (at module
    level: outside every function): the run stopped at the failing line, and
    on the GPU the code fails at each of these in turn once that line is
    fixed. The analysis's own findings only (no evidence from the message),
    as plain ``fixdev --check`` reports them."""
    if facts.error or facts.flow is None:
        return []
    tree = facts.flow.tree
    scope = scope_path(tree, line)
    taken = {(f.code, f.start, f.end) for f in kept}
    return [
        finding for finding in facts.findings
        if finding.code in MISMATCH_CODES and finding.fix is not None and (finding.code, finding.start, finding.end) not in taken
        and scope_path(tree, facts.line_of(finding.start)) == scope
    ]


def _left_in_flow(text: str, findings: Sequence[Finding], scopes: set[tuple[str, ...]]) -> list[Finding]:
    """Of the findings in a fixed file, those of the mismatch group in the
    failing lines' functions: what still fails there on the GPU."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):  # a notebook's magics: nothing said
        return []
    lines = LineIndex(text)
    return [f for f in findings if f.code in MISMATCH_CODES and scope_path(tree, lines.position(f.start)[0]) in scopes]


def _consistent(told: Sequence[tuple]) -> list[tuple]:
    """Several errors' evidence for one file: an expression two of them
    place apart is placed by neither."""
    places: dict[tuple, set[str]] = {}
    for span, placement, _origin in told:
        places.setdefault(tuple(span), set()).add(placement)
    return [item for item in told if len(places[tuple(item[0])]) == 1]


def _applicable(run: "Run", path: Path | None, finding: Finding) -> bool:
    """Whether the run applies the finding's fix: a safe one, or an unsafe one
    where the file's settings (or --unsafe-fixes) enable them, as the engine
    decides (``output.applicable`` for the file's settings)."""
    entry = run.files.get(path) if path is not None else None
    return finding.fix is not None and (finding.fix.safe or bool(entry and entry.unsafe_fixes))


def _finding_words(facts: FileFacts, finding: Finding, applicable: bool = True) -> str:
    # [*] marks a fix --apply applies, as for files: an unsafe fix without
    # --unsafe-fixes is named but not applied (it was marked, and counted as
    # fixed, while --apply left it out)
    what = finding.fix.message if finding.fix is not None else finding.message
    mark = " [*]" if finding.fix and applicable else ""
    unsafe = " (unsafe fix: applied with --unsafe-fixes)" if finding.fix and not applicable else ""
    return f"{finding.code} [{finding.name}]{mark} {what}{unsafe} ({_line_words(facts.path, facts.text, facts.line_of(finding.start))})"


def _cell_row(path: Path, text: str, line: int) -> tuple[int | None, int]:
    """(cell, row) of ``line`` of a notebook's program; (None, line) for a file."""
    if not is_notebook(path) or not text:
        return None, line
    from fixdev.files.notebook import CellIndex

    index = CellIndex(text)
    cell, row, _ = index.locate(index.lines.starts[min(line, len(index.lines.starts)) - 1])
    return cell, row


def _line_words(path: Path, text: str, line: int) -> str:
    cell, row = _cell_row(path, text, line)
    return f"line {row}" if cell is None else f"line {row} of cell {cell}"


def _where(run: "Run", path: Path, line: int) -> str:
    """``train.py:12``, or ``nb.ipynb:cell 3:4`` in a notebook."""
    from fixdev.interfaces.output import display

    cell, row = _cell_row(path, run.index.text(path) or "", line)
    return f"{display(path)}:{row}" if cell is None else f"{display(path)}:cell {cell}:{row}"


def render_full(item: Explained, run: Run) -> str:
    """One report, as the terminal shows it."""
    from fixdev.interfaces.output import display

    out = []
    where = f"{_where(run, item.path, item.line)}: " if item.path is not None else ""
    out.append(f"{where}{item.report.exception}")
    frame = item.frame
    if frame is not None:
        mark = f"{frame.path}, line {frame.line}" if frame.cell else f"File \"{frame.path}\", line {frame.line}" + (f", in {frame.function}" if frame.function else "")
        if item.path is not None and posix(frame.path) != item.path.as_posix():
            cell = _cell_row(item.path, run.index.text(item.path) or "", item.line or 1)[0]
            mark += f" → {display(item.path)}" + (f" (cell {cell})" if cell is not None else "")
        out.append(f"  frame: {mark}")
    inner = item.inner
    if inner is not None and frame is not None and inner != frame and (inner.cell or is_library(inner.path) or item.path is None):
        out.append(f"  raised in: {inner.path}, line {inner.line}" + (f", in {inner.function}" if inner.function else ""))
    if item.path is not None and item.line is not None and item.status != "stale":
        number = str(_cell_row(item.path, run.index.text(item.path) or "", item.line)[1])
        gutter = " " * len(number)
        code = run.index.line(item.path, item.line).rstrip()
        if is_notebook(item.path):
            from fixdev.files.notebook import CellIndex

            text = run.index.text(item.path) or ""
            code = CellIndex(text).shown_line(LineIndex(text).offset(item.line, 1)).rstrip()
        out.extend([f"  {gutter} |", f"  {number} | {code}", f"  {gutter} |"])
    elif frame is not None and frame.source:
        out.append(f"    {frame.source}")
    out.append(f"  error: {item.report.meaning()}")
    for sentence in item.why:
        out.append(f"  why: {sentence}")
    if item.problem:
        out.append(f"  note: {item.problem}")
    facts = run.files[item.path].facts if item.path is not None and item.path in run.files else None
    fixes = [f for f in item.findings if f.fix is not None]
    if facts is not None:
        for finding in item.findings:
            out.append(f"  {'fix' if finding.fix else 'finding'}: {_finding_words(facts, finding, _applicable(run, item.path, finding))}")
        for finding in item.also:
            out.append(f"  next: {_finding_words(facts, finding, _applicable(run, item.path, finding))}")
    if not fixes and item.change and item.status not in ("stale", "error", "ambiguous"):
        out.append(f"  change: {item.change}")
    return "\n".join(out) + "\n\n"


def render_concise(item: Explained, run: "Run") -> str:
    where = _where(run, item.path, item.line) if item.path is not None else (item.frame.path + f":{item.frame.line}" if item.frame else "-")
    codes = ", ".join(sorted({f.code for f in item.findings if f.fix}))
    tail = f" [fix: {codes}]" if codes else f" [{item.status}]"
    return f"{where}: {item.report.family.name}: {item.report.exception}{tail}\n"


def as_json(explained: Sequence[Explained], run: Run) -> list[dict]:
    from fixdev.interfaces.output import code_diff, display, index_for

    items = []
    for item in explained:
        facts = run.files[item.path].facts if item.path is not None and item.path in run.files else None
        entry = run.files.get(item.path) if item.path is not None else None
        findings, also = [], []
        if facts is not None:
            index = index_for(item.path, facts.text)  # a notebook's positions are its cells'
            for finding in [*item.findings, *item.also]:
                (findings if finding in item.findings else also).append(
                    {
                        "code": finding.code,
                        "name": finding.name,
                        "message": finding.message,
                        "filename": display(item.path),
                        "location": _loc(index, finding.start),
                        "end_location": _loc(index, finding.end),
                        "fix": None
                        if finding.fix is None
                        else {
                            "applicability": finding.fix.applicability,
                            "message": finding.fix.message,
                            "applied": bool(entry and finding in entry.applied and item.status == "fixed"),
                            "edits": [
                                {"content": e.content, "location": _loc(index, e.start), "end_location": _loc(index, e.end)} for e in finding.fix.edits
                            ],
                        },
                    }
                )
        frame = item.frame
        items.append(
            {
                "error": item.report.exception,
                "family": item.report.family.name,
                "devices": list(item.report.devices() or ()),
                "meaning": item.report.meaning(),
                "frame": None
                if frame is None
                else {"log_path": frame.path, "line": frame.line, "function": frame.function, "source": frame.source, "file": display(item.path) if item.path else None},
                "status": item.status,
                "explanation": item.why,
                "change": item.change if not any(f.fix for f in item.findings) else None,
                "problem": item.problem,
                "findings": findings,
                "next": also,
                "diff": code_diff(item.path, entry.facts.text, entry.fixed) if entry is not None and entry.fixed is not None else None,
            }
        )
    return items


def _loc(index, offset: int) -> dict[str, int]:
    from fixdev.interfaces.output import json_location

    return json_location(index, offset)


@dataclass
class Diagnosis:
    """What ``--traceback`` found in a log: the run over PATH, each device
    error explained (fixes made, written with ``apply``), and the findings
    left in the failing lines' functions."""

    job: Run
    explained: list[Explained]
    remaining: list[Finding]
    mode: str

    def as_json(self) -> list[dict]:
        return as_json(self.explained, self.job)

    def exit_code(self, exit_zero: bool = False) -> int:
        if self.job.missing or any(item.status in ("stale", "error", "ambiguous") for item in self.explained):
            return 2
        if exit_zero:
            return 0
        if self.mode == "apply":
            return 0 if all(item.status == "fixed" for item in self.explained) and not self.remaining else 1
        return 1


def diagnose(log_text: str, paths: Sequence[Path], mode: str, overrides, excludes: Sequence[str] = ()) -> Diagnosis | None:
    """The log's device errors explained and fixed (written with ``mode``
    ``apply``), printing nothing; None when the log holds no device error."""
    from fixdev.diagnose.explain import analyse

    reports = parse_log(log_text)
    if not reports:
        return None
    job = Run(paths, overrides, excludes)
    explained = [analyse(report, job.index, job.load) for report in reports]
    for item in explained:
        if item.path is not None and item.line is not None and item.status in ("fixable", "explained"):
            item.also = same_flow(job.load(item.path), item.line, item.findings)
            if item.also:
                item.why.append(_next_words(item, job))
    job.fix(explained, write=mode == "apply")
    remaining = [f for entry in job.files.values() if entry.fixed is not None and not entry.error for f in entry.remaining]
    return Diagnosis(job, explained, remaining, mode)


def run(log_text: str, paths: Sequence[Path], mode: str, overrides, fmt: str, quiet: bool, exit_zero: bool, color: bool,
        echo: Callable[..., None], excludes: Sequence[str] = (), source: str = "the log") -> int:
    """Print what ``--traceback`` says and return the exit code."""
    import json

    from fixdev.interfaces.output import code_diff, display

    found = diagnose(log_text, paths, mode, overrides, excludes)
    if found is None:
        shown = exception_lines(log_text)
        said = f" (it shows: {short(shown[-1], 100)})" if shown else ""
        echo(f"fixdev: error: no device error recognised in the log{said}. Known error families:\n" + known_families(), err=True)
        return 2
    job, explained, remaining = found.job, found.explained, found.remaining
    for missing in job.missing:
        echo(f"{display(missing.path)}: error: {missing.message}", err=True)
    to_err = mode != "check"
    # -q with --apply, as for files: what was fixed is not shown (no report, no
    # diff), only what is left: the errors not fixed and the findings that remain
    terse = quiet and mode == "apply"
    if fmt == "json":
        echo(json.dumps(as_json(explained, job), indent=2))
    else:
        for item in explained:
            if not (terse and item.status == "fixed"):
                echo(render_full(item, job) if fmt == "full" else render_concise(item, job), nl=False, err=to_err)
        if fmt == "full" and not terse:
            for path, entry in job.files.items():
                if entry.fixed is not None:
                    echo(code_diff(path, entry.facts.text, entry.fixed, color), nl=False, color=color)
        if terse:
            from fixdev.interfaces.output import finding_line, index_for

            for path, entry in job.files.items():
                if entry.fixed is not None and not entry.error and entry.remaining:
                    index = index_for(path, entry.fixed)  # positions in the file as written
                    for finding in entry.remaining:
                        echo(finding_line(path, index, finding, concise=True), err=True)
    if not quiet and fmt != "json":
        echo(_summary(explained, job, mode, source, remaining), err=True)
    return found.exit_code(exit_zero)


def _next_words(item: Explained, job: "Run") -> str:
    """Why the same-flow findings are shown (and fixed) with the error."""
    path = scope_path(job.load(item.path).flow.tree, item.line)
    where = f"`{'.'.join(path)}`" if path else "the module's top level"
    more = "1 more value" if len(item.also) == 1 else f"{len(item.also)} more values"
    tail = "fixed with this line" if any(f.fix for f in item.findings) else "shown, not fixed: this line has no fix"
    return f"{where} has {more} on the wrong device, the next to fail on the GPU once this line is fixed: {tail}"


def _summary(explained: Sequence[Explained], job: Run, mode: str, source: str, remaining: Sequence[Finding] = ()) -> str:
    n = len(explained)
    fixed_files = sum(1 for entry in job.files.values() if entry.fixed is not None)
    # an error whose fixes are all unsafe, without --unsafe-fixes, is not fixed by --apply
    hidden = [item for item in explained if item.status == "fixable" and not any(_applicable(job, item.path, f) for f in item.findings)]
    with_fix = sum(1 for item in explained if item.status in ("fixable", "fixed")) - len(hidden)
    failed = sum(1 for item in explained if item.status in ("stale", "error", "ambiguous"))
    errors = "1 device error" if n == 1 else f"{n} device errors"
    verb = {"check": "fixable with --apply", "diff": "would be fixed", "apply": "fixed"}[mode]
    files = f" in {fixed_files} file{'s' if fixed_files != 1 else ''}" if fixed_files else ""
    tail = f"; {failed} not processed (see the notes)" if failed else ""
    if remaining:
        left = len(remaining)
        tail += f"; {left} finding{'s' if left != 1 else ''} of a value on the wrong device remain{'s' if left == 1 else ''} in the failing lines' functions after the fix (see fixdev --check)"
    if hidden:
        tail += f"; {len(hidden)} with only unsafe fixes, applied with --unsafe-fixes"
    return f"{errors} in {source}: {with_fix} {verb}{files}; {n - with_fix - failed - len(hidden)} without a fix{tail}."
