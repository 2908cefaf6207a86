"""The ``fixdev`` command. Thin: it reads options and hands them to the engine.

Listing and explaining rules are flags (``--list-rules``, ``--explain``), not
subcommands, so a folder called ``rules`` is never mistaken for a command.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from fixdev import __version__
from fixdev.interfaces import output
from fixdev.interfaces.report import Report
from fixdev.files import parallel
from fixdev.files.config import ConfigError, nearest
from fixdev.files.discovery import Missing, discover, named_path_excluded
from fixdev.engine.findings import Finding, apply_edits
from fixdev.engine.registry import SelectionError, all_rules, find_rule, matching
from fixdev.files.runner import FileResult, Mode, Overrides, decode, process_file, process_text
from fixdev.engine.source import SourceError
from fixdev.files.writer import remove_stale_temps

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class Color(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


class Format(str, Enum):
    full = "full"
    concise = "concise"
    json = "json"
    github = "github"
    sarif = "sarif"


app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def _words(values: Optional[List[str]]) -> tuple[str, ...]:
    return tuple(w.strip() for v in values or () for w in v.split(",") if w.strip())


def _fail(message: str) -> None:
    typer.echo(f"fixdev: error: {message}", err=True)
    raise typer.Exit(EXIT_ERROR)


def _use_color(choice: Color, stream=None) -> bool:
    """Colour for what goes to ``stream`` (stdout by default): with auto,
    only a terminal gets it, so a pipe or a file never holds escape codes."""
    if choice is Color.always:
        return True
    if choice is Color.never or os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or (stream or sys.stdout).isatty()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fixdev {__version__}")
        raise typer.Exit()


def _rule_lines(rules) -> list[str]:
    width = max(len(rule.name) for rule in rules)
    return [f"  {rule.code}  {'[*]' if rule.fixable() else '   '}  {rule.name:<{width}}  {rule.message}" for rule in rules]


def _list_rules(value: bool) -> None:
    if value:
        from fixdev.engine.rule import GROUPS

        rules = all_rules()
        for number, group in enumerate(dict.fromkeys([*GROUPS, *(rule.group for rule in rules)])):
            members = [rule for rule in rules if rule.group == group]
            if members:
                typer.echo(f"{'' if number == 0 else chr(10)}{GROUPS.get(group, group)} ({group})")
                typer.echo("\n".join(_rule_lines(members)))
        raise typer.Exit()


def _explain(value: Optional[str]) -> None:
    if value:
        try:
            rule = find_rule(value)
        except SelectionError as exc:
            try:
                rules = [info.load() for info in matching(value)]  # a prefix (FDV1) or a group: which rules it names
            except SelectionError:
                _fail(str(exc))
            typer.echo(f"{value} names {len(rules)} rule{'s' if len(rules) != 1 else ''} (fixdev --explain CODE for one):")
            typer.echo("\n".join(_rule_lines(rules)))
            raise typer.Exit()
        typer.echo(rule.explanation())
        raise typer.Exit()


def _lsp(value: bool) -> None:
    if value:
        try:
            from fixdev.interfaces import lsp
            import pygls  # noqa: F401
        except ImportError:
            _fail('the language server needs pygls: pip install "fixdev[lsp]"')
        lsp.serve()
        raise typer.Exit()


class Progress:
    """``[n/N files]`` on stderr, on a terminal only, for runs long enough to
    want it; cleared before anything else is printed, so output stays clean."""

    MIN_FILES = 200

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self.done, self.shown = total, enabled, 0, False

    def step(self) -> None:
        self.done += 1
        if self.enabled and (self.done % 25 == 0 or self.done == self.total):
            sys.stderr.write(f"\r[{self.done}/{self.total} files]")
            sys.stderr.flush()
            self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


class Interaction:
    """``--interactive``: asks about each fix, like ``git add -p``. Enter
    means no: a fix is written only when asked for."""

    PROMPT = "Apply this fix? [y/N/a/q]"
    HINT = "Answer y (apply it), n or Enter (skip it), a (apply it and every fix after it) or q (skip it and every fix after it)."
    ANSWERS = {"y": "y", "yes": "y", "n": "n", "no": "n", "": "n", "a": "a", "all": "a", "q": "q", "quit": "q"}

    def __init__(self, color: bool) -> None:
        self.color = color
        self.answer_all: bool | None = None  # True after [a]ll, False after [q]uit

    def __call__(self, path: Path, text: str, finding: Finding) -> bool:
        if self.answer_all is False:
            return False
        where = output.where(path, output.index_for(path, text), finding.start)
        typer.echo(f"{where}: {finding.code} [{finding.name}] {finding.fix.message}")
        typer.echo(output.code_diff(path, text, apply_edits(text, finding.fix.edits), self.color), nl=False, color=self.color)
        if self.answer_all:
            typer.echo("Applied (a: all).")  # shown, so that the run's output says what was written
            return True
        answer = self._ask()
        if answer == "a":
            self.answer_all = True
        elif answer == "q":
            self.answer_all = False
        return answer in "ya"

    def _ask(self) -> str:
        while True:
            try:
                reply = typer.prompt(self.PROMPT, default="", show_default=False)
            except (typer.Abort, EOFError, KeyboardInterrupt):
                # Ctrl-C or Ctrl-D at the prompt: quit, as q does (the prompt
                # turns both into Abort, which the runner would report as a bug).
                typer.echo()
                return "q"
            answer = self.ANSWERS.get(reply.strip().lower())
            if answer is not None:
                return answer
            typer.echo(self.HINT)


EPILOG = """\b
Configuration: [tool.fixdev] in the nearest pyproject.toml above each file
(select, extend-select, ignore, exclude, include, extend-include,
per-file-ignores, rules.NAME.OPTION);
--select replaces select, --extend-select and --ignore add to the configured ones.

\b
Exit codes:
  0  nothing to fix or report (--apply: everything fixable was fixed)
  1  findings or fixes exist (--apply: findings without a fix remain)
  2  usage error, bad configuration, or a file that could not be processed
"""


@app.command(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
def main_command(
    # readable=False: click would end the whole run at an unreadable path;
    # discovery and the runner report it as one line and go on with the rest.
    # hidden: typer's table would show it as "PATH... <list[Path]>"; the
    # command's help text describes it instead.
    paths: Optional[List[Path]] = typer.Argument(None, show_default=False, metavar="PATH", readable=False, hidden=True),
    check: bool = typer.Option(False, "--check", help="Report findings, change nothing (the default)."),
    diff: bool = typer.Option(False, "--diff", help="Print the fixes as unified diffs, change nothing."),
    apply: bool = typer.Option(False, "--apply", help="Print each file's diff, then write the fixes."),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="With --apply: ask before each fix."),
    select: Optional[List[str]] = typer.Option(None, "--select", metavar="RULES", help="Rules to run: codes, prefixes, names or ALL (comma-separated)."),
    extend_select: Optional[List[str]] = typer.Option(None, "--extend-select", metavar="RULES", help="Rules to add to the selection."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", metavar="RULES", help="Rules to leave out."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", metavar="GLOB", help="Gitignore-style glob of paths to skip (repeatable)."),
    add_noqa: bool = typer.Option(False, "--add-noqa", help="Add a # noqa: FDVxxx to the line of every current finding (merged into an existing # noqa:); notebooks are left out."),
    statistics: bool = typer.Option(False, "--statistics", help="With --check: print the count of findings of each rule instead of the findings (json with --output-format json)."),
    show_fixes: bool = typer.Option(False, "--show-fixes", help="After the findings, list the fixes a file at a time, a line a rule: those --apply would apply (with --check), or applied (--diff, --apply)."),
    show_files: bool = typer.Option(False, "--show-files", help="Print the files a check would look at, one a line, sorted; check nothing."),
    show_settings: bool = typer.Option(False, "--show-settings", help="Print the settings that govern the first file found (its pyproject.toml, the keys after the flags, the rules that run on it); check nothing."),
    unsafe_fixes: Optional[bool] = typer.Option(
        None, "--unsafe-fixes/--no-unsafe-fixes",
        help="Apply fixes that may change more than the device (dtype, RNG stream, state-dict keys); overrides [tool.fixdev] unsafe-fixes.",
    ),
    force_exclude: bool = typer.Option(False, "--force-exclude", help="Skip paths named on the command line (and --stdin-filename) that --exclude or [tool.fixdev] exclude match."),
    no_notebooks: bool = typer.Option(False, "--no-notebooks", help="Walk folders for Python files only, not Jupyter notebooks (.ipynb)."),
    output_format: Format = typer.Option(Format.full, "--output-format", metavar="FORMAT", help="full, concise, json, github or sarif."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", metavar="PATH", help="Write the findings (any format) and the listings to PATH instead of stdout; diffs stay on stdout.", dir_okay=False, writable=False, readable=False),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", metavar="NAME", help="Name for source read from stdin ('-')."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings remain (errors still exit 2)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print findings and errors only."),
    color: Color = typer.Option(Color.auto, "--color", metavar="WHEN", help="Color diffs and findings: auto (on a terminal), always, never."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache (.fixdev_cache/)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, metavar="N", help="Worker processes (default: the number of CPUs)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    list_rules: bool = typer.Option(False, "--list-rules", callback=_list_rules, is_eager=True, help="List the rules."),
    explain: Optional[str] = typer.Option(None, "--explain", callback=_explain, is_eager=True, help="Print a rule's documentation.", metavar="RULE"),
    lsp: bool = typer.Option(False, "--lsp", callback=_lsp, is_eager=True, help="Serve the Language Server Protocol on stdio (needs fixdev[lsp])."),
    traceback_log: Optional[str] = typer.Option(None, "--traceback", metavar="LOG", help="Explain and fix the device errors in a traceback (a log file, or '-' for stdin); PATH... holds the code it ran (default: .)."),
    probe: Optional[str] = typer.Option(None, "--probe", metavar="FILE:CLASS", help="Build the module, move it and its inputs to a fake GPU and run forward (needs fixdev[probe])."),
    probe_inputs: Optional[List[str]] = typer.Option(None, "--input", metavar="SHAPE", help="With --probe: an input's shape, 8,3,32,32 (8,16:long for integers); repeatable."),
    probe_init: Optional[str] = typer.Option(None, "--init", metavar="JSON", help="With --probe: the constructor's arguments, a JSON object (keywords) or list."),
    run_command: bool = typer.Option(False, "--run", help="Run the command after -- on a virtual GPU (real values on the CPU); on a device error, say why and the fix (--apply: write it, run again)."),
    gpus: int = typer.Option(1, "--gpus", min=0, metavar="N", help="With --run: the virtual GPUs (0: a CPU-only machine, where CUDA calls fail)."),
    max_rounds: int = typer.Option(5, "--max-rounds", min=1, metavar="N", help="With --run --apply: at most N runs."),
    round_timeout: Optional[float] = typer.Option(None, "--round-timeout", min=0.001, metavar="SECONDS",
                                                  help="With --run: a run that lasts SECONDS without a device error is stopped and ends the rounds (default with --apply: 120; without: none)."),
    probe_train: bool = typer.Option(False, "--train", help="With --probe: train mode, then the loss and backward where the fake GPU allows."),
    probe_real: bool = typer.Option(False, "--real", help="With --probe: run on the virtual GPU of --run (real values, backward runs; no compiler needed)."),
    probe_input_from: Optional[str] = typer.Option(None, "--input-from", metavar="MODULE:FUNCTION",
                                                   help="With --probe: forward's inputs from your function (a tensor, a tuple of tensors or a dict), instead of --input."),
) -> None:
    """Find and fix PyTorch device bugs (CPU/CUDA mismatches).

    \b
    PATH...  files or folders to check (default: .); '-' reads stdin
    """
    if sum((check, diff, apply)) > 1:
        _fail("choose one of --check, --diff, --apply")
    mode = Mode.APPLY if apply else Mode.DIFF if diff else Mode.CHECK
    if interactive and mode is not Mode.APPLY:
        _fail("--interactive goes with --apply")
    if interactive and not sys.stdin.isatty():
        _fail("--interactive needs a terminal on stdin; use --apply or --diff instead")
    for word in (*_words(select), *_words(extend_select), *_words(ignore)):
        try:
            matching(word)
        except SelectionError as exc:
            _fail(f"{exc} (see fixdev --list-rules)")
    overrides = Overrides(select=_words(select) or None, extend_select=_words(extend_select), ignore=_words(ignore), unsafe_fixes=unsafe_fixes)
    if select or extend_select or ignore:
        _check_selection(overrides)
    use_color = _use_color(color)
    err_color = _use_color(color, sys.stderr)  # --diff and --apply report findings on stderr
    # A file is no terminal: colored only with --color always (or FORCE_COLOR).
    report = Report(output_file, use_color, err_color, _use_color(color, _NO_TERMINAL))
    if output_file is not None and (run_command or traceback_log is not None or probe is not None or add_noqa):
        _fail("--output-file goes with checking files (--check, --diff, --apply), --show-files and --show-settings: not with --run, --traceback, --probe or --add-noqa")
    if show_files or show_settings:
        if show_files and show_settings:
            _fail("choose one of --show-files and --show-settings")
        if mode is not Mode.CHECK or interactive or add_noqa or statistics or show_fixes or run_command or traceback_log is not None or probe is not None:
            _fail("--show-files and --show-settings print and exit: not with --diff, --apply, -i, --add-noqa, --statistics, --show-fixes, --run, --traceback or --probe")
        if stdin_filename is not None or any(str(p) == "-" for p in paths or ()):
            _fail("--show-files and --show-settings take files and folders, not '-' (stdin)")
        raise typer.Exit(_finish(report, _show(paths or [Path(".")], show_files, overrides, _words(exclude), not no_notebooks, force_exclude, report)))
    if run_command:
        if traceback_log is not None or probe is not None or interactive or diff:
            _fail("--run goes with --gpus, --apply, --max-rounds, --round-timeout and --unsafe-fixes, not with --traceback, --probe, --diff or -i")
        raise typer.Exit(_run(paths, gpus, mode is Mode.APPLY, max_rounds, round_timeout, overrides, output_format, use_color))
    if round_timeout is not None:
        _fail("--round-timeout goes with --run")
    if (probe_inputs or probe_init is not None or probe_train or probe_real or probe_input_from is not None) and probe is None:
        _fail("--input, --input-from, --init, --train and --real go with --probe FILE:CLASS")
    if traceback_log is not None or probe is not None:
        if interactive:
            _fail("--interactive goes with files, not with --traceback or --probe")
        raise typer.Exit(_diagnose(traceback_log, probe, paths, mode, overrides, output_format, quiet, exit_zero, use_color, _words(exclude),
                                   probe_inputs or [], probe_init, probe_train, probe_real, probe_input_from))
    paths = paths or [Path(".")]

    if show_fixes and output_format not in (Format.full, Format.concise):
        _fail("--show-fixes goes with the full and concise output formats")
    if any(str(p) == "-" for p in paths):
        if len(paths) > 1:
            _fail("'-' (stdin) cannot be combined with other paths")
        name = Path(stdin_filename or "stdin.py")
        if force_exclude and stdin_filename is not None and named_path_excluded(name, _words(exclude)):
            # As Ruff does: an editor piping an excluded file gets it back as it was.
            if mode is Mode.APPLY:
                sys.stdout.buffer.write(sys.stdin.buffer.read())
            raise typer.Exit(EXIT_CLEAN)
        raise typer.Exit(_finish(report, _run_stdin(name, mode, overrides, output_format, quiet, exit_zero, report, show_fixes)))
    if stdin_filename is not None:
        # Reading stdin only because a name was given would hang a run that
        # meant to scan folders; scanning them would ignore what was piped.
        _fail("--stdin-filename goes with the path '-' (fixdev --stdin-filename NAME -)")

    if add_noqa and (mode is not Mode.CHECK or statistics or interactive):
        _fail("--add-noqa goes with --check (the default), not with --diff, --apply, -i or --statistics")
    if statistics and (mode is not Mode.CHECK or output_format not in (Format.full, Format.concise, Format.json)):
        _fail("--statistics goes with --check and the full, concise or json output format")
    if show_fixes and (statistics or add_noqa):
        _fail("--show-fixes lists fixes after the findings: not with --statistics or --add-noqa")
    ask = Interaction(use_color) if interactive else None
    results: list[FileResult] = []
    errors = 0
    printed_config_errors: set[str] = set()
    found = list(discover(paths, _words(exclude), notebooks=not no_notebooks, force_exclude=force_exclude))
    for item in found:
        if isinstance(item, Missing):
            typer.echo(f"{output.display(item.path)}: error: {item.message}", err=True)
            errors += 1
    files = [item for item in found if not isinstance(item, Missing)]
    if mode is Mode.APPLY:
        remove_stale_temps({path.parent for path in files})
    if ask is not None:
        project = parallel.project_of(files)  # the files of the run together, as without -i
        processed = (process_file(path, mode, overrides, lambda text, finding, path=path: ask(path, text, finding), project=project) for path in files)
    else:
        processed = parallel.process_files(files, mode, overrides, jobs or os.cpu_count() or 1, use_cache=not no_cache)
    progress = Progress(len(files), enabled=not quiet and sys.stderr.isatty() and len(files) >= Progress.MIN_FILES)
    for item, result in zip(files, processed):
        progress.step()
        if result.error:
            errors += 1
            line = result.error if result.error_is_config else f"{output.display(item)}: error: {result.error}"
            if line not in printed_config_errors:
                progress.clear()
                typer.echo(line, err=True)
                printed_config_errors.add(line)
        for cell_error in result.cell_errors:
            errors += 1
            progress.clear()
            typer.echo(output.cell_error_line(item, cell_error), err=True)
        results.append(result)
        if not statistics and not add_noqa and (output_format is Format.full or output_format is Format.concise) and (result.findings or result.fixed is not None):
            progress.clear()
            _print_file(result, mode, output_format, quiet, report, diff_printed=bool(ask))

    progress.clear()
    if add_noqa:
        raise typer.Exit(_add_noqa(results, errors))
    if show_fixes:
        _show_fixes(results, mode, output_format, report)
    if statistics:
        report.write(output.statistics(results, output_format is Format.json))
    elif output_format in (Format.json, Format.github, Format.sarif):
        report.write(_machine_output([r for r in results if not r.error], output_format, exit_zero))
    if not quiet:
        _summary(results, mode, errors)
    raise typer.Exit(_finish(report, _exit_code(results, mode, errors, exit_zero)))


class _NoTerminal:
    @staticmethod
    def isatty() -> bool:
        return False


_NO_TERMINAL = _NoTerminal()


def _finish(report: Report, code: int) -> int:
    """The run's exit code, once the report is written (2 if it cannot be)."""
    error = report.close()
    if error is not None:
        typer.echo(error, err=True)
        return EXIT_ERROR
    return code


def _show_fixes(results: list[FileResult], mode: Mode, fmt: Format, report: Report) -> None:
    """--show-fixes' list, where the findings went: stdout with --check,
    stderr with --diff and --apply (stdout carries the changes), or the
    --output-file. In the concise format a blank line sets it apart (full
    findings end with one)."""
    err = mode is not Mode.CHECK
    listing = output.fix_summary(results, mode.value, report.color(err))
    if listing:
        gap = "\n" if fmt is Format.concise and any(r.findings for r in results) else ""
        report.write(gap + listing, err=err)


def _show(paths: List[Path], files_only: bool, overrides: Overrides, excludes: tuple[str, ...], notebooks: bool, force_exclude: bool, report: Report) -> int:
    """--show-files: the files discovery finds, sorted. --show-settings: the
    settings of the first of them, as Ruff takes it (several paths may be
    given; sorted, the first file found is the one shown). Exit 0, or 2 for
    a missing path, a bad configuration, or no file to show settings for."""
    from fixdev.interfaces import show

    errors = 0
    found = list(discover(paths, excludes, notebooks=notebooks, force_exclude=force_exclude))
    for item in found:
        if isinstance(item, Missing):
            typer.echo(f"{output.display(item.path)}: error: {item.message}", err=True)
            errors += 1
    files = [item for item in found if not isinstance(item, Missing)]
    if files_only:
        report.write(show.files_listing(files))
        if not files and not errors:
            typer.echo("No Python files found.", err=True)
        return EXIT_ERROR if errors else EXIT_CLEAN
    if not files:
        _fail("--show-settings found no Python file under the given paths")
    first = min(files, key=output.display)
    try:
        text = show.settings_report(first, overrides, excludes, notebooks, force_exclude)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        return EXIT_ERROR
    except SelectionError as exc:
        _fail(f"with the command-line flags, {exc} (see fixdev --list-rules)")
    report.write(text)
    return EXIT_ERROR if errors else EXIT_CLEAN


def _add_noqa(results: list[FileResult], errors: int) -> int:
    """Suppress every current finding where it is; 0 when all went in (as
    Ruff's --add-noqa), 2 when a file could not be written."""
    from fixdev.files.add_noqa import add_noqa
    from fixdev.files.writer import WriteError

    added = files = 0
    for result in results:
        if result.error or not result.findings or result.code is not None:  # result.code: a notebook
            continue
        try:
            count = add_noqa(result.path, result.original, result.findings)
        except (OSError, SourceError, WriteError) as exc:
            typer.echo(f"{output.display(result.path)}: error: {exc}", err=True)
            errors += 1
            continue
        added += count
        files += count > 0
    typer.echo(f"Added {_plural(added, 'noqa directive')} in {_plural(files, 'file')}.", err=True)
    return EXIT_ERROR if errors else EXIT_CLEAN


def _machine_output(results: list[FileResult], fmt: Format, exit_zero: bool) -> str:
    if fmt is Format.json:
        return json.dumps(output.as_json(results), indent=2) + "\n"
    if fmt is Format.github:
        # ::error, as Ruff prints them; with --exit-zero findings do not fail the run.
        return output.github(results, "warning" if exit_zero else "error")
    return output.sarif(results)


def _diagnose(log: str | None, probe: str | None, paths: Optional[List[Path]], mode: Mode, overrides: Overrides, fmt: Format, quiet: bool,
              exit_zero: bool, color: bool, excludes: tuple[str, ...], inputs: List[str], init: str | None, train: bool,
              real: bool = False, input_from: str | None = None) -> int:
    """--traceback and --probe: from an error (a log, or one the fake GPU
    raises) to the line, the why and the fix. Their modules load only here."""
    if log is not None and probe is not None:
        _fail("choose one of --traceback and --probe")
    if fmt not in (Format.full, Format.concise, Format.json):
        _fail(f"--{'traceback' if log is not None else 'probe'} prints full, concise or json output")
    if any(str(p) == "-" for p in paths or ()):
        _fail("with --traceback and --probe, '-' is not a PATH (--traceback - reads the log from stdin)")
    if probe is not None:
        from fixdev.gpu import probe as probing

        if paths:
            _fail("--probe takes no PATH: the file is in FILE:CLASS")
        return probing.run(probe, inputs, init, train, mode.value, overrides, fmt.value, quiet, exit_zero, color, typer.echo,
                           real=real, input_from=input_from)
    from fixdev.diagnose import traceback as tracebacks
    from fixdev.diagnose.log import decode_log

    if log == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(log).read_bytes()
        except OSError as exc:
            _fail(f"cannot read the log {log}: {exc.strerror or exc}")
    text = decode_log(data)
    return tracebacks.run(text, paths or [Path(".")], mode.value, overrides, fmt.value, quiet, exit_zero, color, typer.echo, excludes)


def _run(paths: Optional[List[Path]], gpus: int, apply: bool, max_rounds: int, round_timeout: Optional[float], overrides: Overrides, fmt: Format,
         color: bool) -> int:
    """--run -- COMMAND: the command's words as typed (after the first --),
    not as PATH's Path objects spell them."""
    from fixdev.gpu import run as running

    command = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else [str(p) for p in paths or []]
    if fmt.value not in ("full", "concise", "json"):
        _fail("--run prints full, concise or json output")
    try:
        return running.run(command, gpus, apply, max_rounds, overrides, fmt.value, color, typer.echo, round_timeout)
    except running.RunError as exc:
        _fail(str(exc))
        return EXIT_ERROR


def _check_selection(overrides: Overrides) -> None:
    """Flags that leave no rule to run are a usage error, said before any work.
    Checked against the configuration of the current folder; a file governed
    by another one that, with the flags, leaves none is reported as it is met."""
    try:
        overrides.apply(nearest(Path.cwd().absolute())).rules()
    except SelectionError as exc:
        _fail(f"{exc} (see fixdev --list-rules)")
    except ConfigError:
        pass  # reported, naming the file, when the files it governs are processed


def _print_file(result: FileResult, mode: Mode, fmt: Format, quiet: bool, report: Report, diff_printed: bool) -> None:
    color, err_color = report.out_color, report.err_color
    if mode is not Mode.CHECK and result.fixed is not None and fmt is Format.full and not quiet and not diff_printed:
        if result.code is not None:
            # A notebook's diff is one per cell, for reading: git apply cannot
            # take it, so it goes to stderr and stdout stays a patch.
            typer.echo(output.result_diff(result, err_color), nl=False, color=err_color, err=True)
        else:
            # Bytes, in the file's own encoding, BOM and line breaks: what
            # `fixdev --diff | git apply` needs.
            sys.stdout.flush()
            sys.stdout.buffer.write(output.patch(result, color))
            sys.stdout.buffer.flush()
    _print_findings(result, mode, fmt, report)


def _print_findings(result: FileResult, mode: Mode, fmt: Format, report: Report) -> None:
    """--check reports findings on stdout: they are its output. With --diff and
    --apply, stdout carries the changes (a patch that ``git apply`` can take,
    or the fixed source from stdin), so what remains to report goes to stderr
    with the summary and the errors. --output-file takes them either way."""
    err = mode is not Mode.CHECK
    color = report.color(err)
    text = result.findings_text
    index = output.index_for(result.path, text)
    for finding in result.findings:
        if fmt is Format.full:
            shown = output.finding_full(result.path, text, index, finding, color, result.unsafe_fixes)
        else:
            shown = output.finding_line(result.path, index, finding, concise=True, color=color, unsafe_fixes=result.unsafe_fixes) + "\n"
        report.write(shown, err=err)


def _summary(results: list[FileResult], mode: Mode, errors: int) -> None:
    remaining = sum(len(r.findings) for r in results)
    applied = sum(len(r.applied) for r in results)
    files = sum(r.fixed is not None for r in results)
    if not remaining and not applied:
        if not errors:  # the error lines said what went wrong; this says all is well
            typer.echo("No device bugs found." if results else "No Python files found.", err=True)
        return
    # Unsafe fixes left out by the settings, as Ruff counts its hidden fixes.
    hidden = sum(1 for r in results for f in r.findings if f.fix is not None and not output.applicable(f, r.unsafe_fixes))
    hint = f" ({hidden} hidden fix{'' if hidden == 1 else 'es'} can be enabled with --unsafe-fixes)" if hidden else ""
    if mode is Mode.CHECK:
        fixable = sum(1 for r in results for f in r.findings if output.applicable(f, r.unsafe_fixes))
        if remaining:
            typer.echo(f"Found {_plural(remaining, 'finding')} ({fixable} fixable with --apply){hint}.", err=True)
    elif mode is Mode.DIFF:
        if applied or remaining:
            typer.echo(f"Would fix {_plural(applied, 'finding')} in {_plural(files, 'file')}; {remaining - hidden} without a fix{hint}.", err=True)
    else:
        if applied or remaining:
            typer.echo(f"Fixed {_plural(applied, 'finding')} in {_plural(files, 'file')}; {remaining} remaining{hint}.", err=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _exit_code(results: list[FileResult], mode: Mode, errors: int, exit_zero: bool) -> int:
    if errors:
        return EXIT_ERROR
    if exit_zero:
        return EXIT_CLEAN
    remaining = any(r.findings for r in results)
    changes = any(r.fixed is not None for r in results)
    if mode is Mode.APPLY:
        return EXIT_FINDINGS if remaining else EXIT_CLEAN
    return EXIT_FINDINGS if remaining or changes else EXIT_CLEAN


def _run_stdin(name: Path, mode: Mode, overrides: Overrides, fmt: Format, quiet: bool, exit_zero: bool, report: Report, show_fixes: bool = False) -> int:
    data = sys.stdin.buffer.read()
    try:
        source = decode(name, data)
    except SourceError as exc:
        typer.echo(f"{output.display(name)}: error: {exc}", err=True)
        if mode is Mode.APPLY:
            sys.stdout.buffer.write(data)
        return EXIT_ERROR
    # process_text never writes: with APPLY it places the remaining findings
    # in the fixed text, which is what stdout receives.
    result = process_text(name, source, mode, overrides)
    if result.error:
        typer.echo(result.error if result.error_is_config else f"{output.display(name)}: error: {result.error}", err=True)
        if mode is Mode.APPLY:
            sys.stdout.buffer.write(data)
        return EXIT_ERROR
    for cell_error in result.cell_errors:
        typer.echo(output.cell_error_line(name, cell_error), err=True)
    if mode is Mode.APPLY:
        sys.stdout.buffer.write(source.encode(result.fixed if result.fixed is not None else result.original))
        sys.stdout.flush()
        # No summary: an editor filtering its buffer through this command may
        # read stderr into the buffer too.
        _print_findings(result, mode, Format.concise if fmt is Format.concise else Format.full, report)
        if show_fixes:
            _show_fixes([result], mode, fmt, report)
    elif fmt in (Format.json, Format.github, Format.sarif):
        report.write(_machine_output([result], fmt, exit_zero))
    else:
        _print_file(result, mode, fmt, quiet, report, diff_printed=False)
        if show_fixes:
            _show_fixes([result], mode, fmt, report)
        if not quiet:
            _summary([result], mode, len(result.cell_errors))
    return _exit_code([result], mode, len(result.cell_errors), exit_zero)


try:  # typer 0.2x carries its own copy of click
    from typer._click.exceptions import ClickException, NoSuchOption
except ImportError:
    from click.exceptions import ClickException, NoSuchOption


def _usage_error(exc: ClickException) -> str:
    """A command-line error as one line, in the style of fixdev's other
    errors. click's own suggestion is dropped (``--jobs`` for ``--bogus``):
    one is made only for a close spelling."""
    if isinstance(exc, NoSuchOption):
        import difflib

        # Compared without the dashes every option shares, and closely.
        options = {name[2:]: name for param in typer.main.get_command(app).params for name in param.opts if name.startswith("--")}
        close = difflib.get_close_matches(exc.option_name.lstrip("-"), options, n=1, cutoff=0.75)
        hint = f"; did you mean {options[close[0]]}?" if close else ""
        return f"no such option: {exc.option_name}{hint} (see fixdev --help)"
    message = exc.format_message()
    return message[:1].lower() + message[1:].rstrip(".")


def main() -> None:
    command = typer.main.get_command(app)
    try:
        code = command.main(prog_name="fixdev", standalone_mode=False)
    except ClickException as exc:
        typer.echo(f"fixdev: error: {_usage_error(exc)}", err=True)
        code = EXIT_ERROR
    except typer.Abort:
        code = EXIT_ERROR
    sys.exit(code or 0)
