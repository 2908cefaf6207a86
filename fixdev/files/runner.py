"""One file through the pipeline: read → decode → lint or fix → (write)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fixdev.engine.core import Approver, Engine

from fixdev.files import cache
from fixdev.files.config import ConfigError, Settings, nearest
from fixdev.files.globs import glob_matches
from fixdev.engine.findings import Finding
from fixdev.files.notebook import CellError, Notebook, NotebookError, is_notebook
from fixdev.files.notebook import decode as decode_notebook
from fixdev.engine.registry import SelectionError
from fixdev.engine.source import Source, SourceError, SyntaxLocation, TooLargeError
from fixdev.files.writer import WriteError, write_atomic


# libcst's tree takes some 500 bytes of memory per character of source: a
# larger file is reported rather than risk the machine's memory.
MAX_CHARACTERS = 2_000_000
SYNTAX_ERROR = "syntax-error"  # a cache entry holding the message of a text that does not parse


class Mode(str, Enum):
    CHECK = "check"
    DIFF = "diff"
    APPLY = "apply"


@dataclass
class FileResult:
    path: Path
    original: str = ""
    fixed: str | None = None  # the new text, when fixes change it
    findings: list[Finding] = field(default_factory=list)  # positions in ``findings_text``
    applied: list[Finding] = field(default_factory=list)  # positions in ``original``
    error: str | None = None
    error_is_config: bool = False  # the message names a pyproject.toml, not this file
    source: Source | None = None
    findings_in_fixed: bool = False  # --apply: the findings are placed in the text as written
    # A notebook: ``original``/``fixed`` are its JSON; findings are placed in
    # the program its code cells make (fixdev.files.notebook), before and after fixes.
    code: str | None = None
    fixed_code: str | None = None
    cell_errors: list[CellError] = field(default_factory=list)  # cells left out; the others were processed
    syntax_error: SyntaxLocation | None = None  # where ``error`` is, when a parser refused the text
    unsafe_fixes: bool = False  # the file's settings apply unsafe fixes too (what "fixable" means for it)

    @property
    def findings_text(self) -> str:
        """The text the findings' positions refer to: the file as the user
        will find it, unchanged (--check, --diff) or as written (--apply)."""
        if self.code is not None:
            return self.fixed_code if self.findings_in_fixed and self.fixed_code is not None else self.code
        return self.fixed if self.findings_in_fixed and self.fixed is not None else self.original

    @property
    def original_text(self) -> str:
        """The text the applied fixes' positions refer to."""
        return self.code if self.code is not None else self.original


@dataclass(frozen=True)
class Overrides:
    """What the command line says about settings; None means "keep the config's"."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool | None = None  # --unsafe-fixes / --no-unsafe-fixes

    def apply(self, settings: Settings) -> Settings:
        return settings.override(
            select=self.select,
            unsafe_fixes=self.unsafe_fixes,
            extend_select=settings.extend_select + self.extend_select,
            ignore=settings.ignore + self.ignore,
        )


_engines: dict[Any, Engine] = {}


def engine_for(settings: Settings, path: Path) -> "Engine":
    from fixdev.engine.core import Engine  # loads libcst: only when a file needs work

    ignored = frozenset(settings.ignored_for(path))
    key = (settings, ignored)
    if key not in _engines:
        _engines[key] = Engine(settings.rules(), settings.options(), ignored, settings.unsafe_fixes)
    return _engines[key]


_chosen: dict[Any, tuple] = {}


def _triggered(settings: Settings, path: Path, text: str) -> frozenset[str]:
    """The codes of the rules that run on ``path`` whose triggers ``text``
    matches, asked of the registry's table: no rule is imported to answer.
    The engine is handed them, so no trigger is tried twice on a text."""
    ignored = frozenset(settings.ignored_for(path))
    key = (settings, ignored)
    if key not in _chosen:
        _chosen[key] = tuple(rule for rule in settings.rules() if rule.code not in ignored)
    return frozenset(rule.code for rule in _chosen[key] if rule.might_match(text))


def _parses(text: str) -> bool:
    """CPython's parser accepts ``text``, as the engine asks it (warnings
    ignored). Any refusal goes to the engine, which words the error."""
    import ast
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def _selection(settings: Settings, path: Path) -> tuple:
    """Everything in the settings that decides which rules run on ``path``
    and how, as written: the rules themselves are covered by the cache's
    fingerprint of fixdev's code, so nothing needs to be imported to key."""
    per_file = tuple(words for pattern, words in settings.per_file_ignores if glob_matches(pattern, path, settings.root))
    # unsafe_fixes decides which fixes --apply and --diff apply (check mode
    # reports the same either way, but one key per setting is simplest).
    return (settings.select, settings.extend_select, settings.ignore, per_file, settings.rule_options, settings.unsafe_fixes)


def settings_for(path: Path, overrides: Overrides) -> Settings:
    return overrides.apply(nearest(path.absolute().parent))


def process_text(
    path: Path, source: Source, mode: Mode, overrides: Overrides, approve: Approver | None = None, use_cache: bool = False,
    cache_only: bool = False, project: Any = None,
) -> FileResult | None:
    """Lint or fix one text. With ``cache_only``, None unless the cache has it.
    ``project``: facts about the run's files (``fixdev.analysis.project``),
    asked through ``for_file(path)``; what this file asked is kept with its
    cached result, which serves only while every answer stays the same."""
    result = FileResult(path, original=source.text, source=source)
    text, notebook = source.text, None
    if is_notebook(path):
        try:
            notebook = Notebook.from_json(source.text)
        except NotebookError as exc:
            result.error = str(exc)
            return result
        text = result.code = notebook.code  # outputs (images) do not count towards the limit
        result.cell_errors = notebook.errors
    if len(text) > MAX_CHARACTERS:
        # Both counts in full: rounded to millions, 2,000,000 read as "2".
        result.error = f"file too large to analyse ({len(text):,} characters; the limit is {MAX_CHARACTERS:,} characters)"
        return result
    settings: Settings | None = None
    entry = None
    try:
        settings = settings_for(path, overrides)
        result.unsafe_fixes = settings.unsafe_fixes
        facts = project.for_file(path) if project is not None else None
        if use_cache and approve is None:
            entry = cache.key(text.encode("utf-8", "surrogatepass"), mode is Mode.CHECK, _selection(settings, path))
            cached = cache.load(entry)
            if isinstance(cached, tuple) and len(cached) == 5 and _still_holds(cached[4], facts):  # anything else is a miss
                _fill(result, mode, *cached[:4])
                if notebook is not None:
                    _fill_notebook(result, notebook)
                return result
            if isinstance(cached, tuple) and len(cached) == 3 and cached[0] == SYNTAX_ERROR:
                result.error, result.syntax_error = cached[1], cached[2]
                return result
        if cache_only:
            return None
        triggered = _triggered(settings, path, text)
        if not triggered and _parses(text):
            value: tuple = ([], [], [], None)  # what the engine gives such a file, without loading it
        elif mode is Mode.CHECK:
            findings = engine_for(settings, path).lint(text, facts, triggered=triggered)
            value = (findings, findings, [], None)
        else:
            outcome = engine_for(settings, path).fix(text, approve, facts, triggered=triggered)
            value = (outcome.remaining, outcome.remaining_in_original, outcome.applied, outcome.text if outcome.text != text else None)
        # --diff and --apply share cache entries: both placements are kept.
        if entry is not None:
            cache.store(entry, (*value, facts.used() if facts is not None else None))
        _fill(result, mode, *value)
        if notebook is not None:
            _fill_notebook(result, notebook)
    except ConfigError as exc:
        result.error, result.error_is_config = str(exc), True
    except SelectionError as exc:
        # Settings and flags checked one by one, together leaving no rule
        # (the words themselves were checked when read): said once per configuration.
        where = settings.source if settings is not None and settings.source is not None else "fixdev"
        result.error, result.error_is_config = f"{where}: error: with the command-line flags, {exc}", True
    except TooLargeError as exc:
        result.error = str(exc)  # not cached: the limit may differ next time (FIXDEV_MAX_NODES)
    except SourceError as exc:
        result.error, result.syntax_error = str(exc), exc.syntax
        if entry is not None:
            # The text's own fault, the same next time (the key holds the
            # parsers' versions): a warm run does not parse it, or load libcst, again.
            cache.store(entry, (SYNTAX_ERROR, result.error, result.syntax_error))
    except RecursionError:
        result.error = "code is nested too deeply to analyse"
    except Exception as exc:  # a bug in a rule must cost one file, not the run
        if _is_fix_conflict(exc):
            result.error = str(exc)
        else:
            result.error = f"internal error, file left unchanged ({type(exc).__name__}: {exc}); please report it"
    return result


def _is_fix_conflict(exc: Exception) -> bool:
    """The engine's FixConflictError, asked without importing the engine
    (and libcst): only a loaded engine can have raised one."""
    engine = sys.modules.get(f"{__package__}.engine")
    return engine is not None and isinstance(exc, engine.FixConflictError)


def _still_holds(used: Any, facts: Any) -> bool:
    """A cached result made with the answers ``used`` (None: made without
    project facts) serves a run whose facts are ``facts``."""
    if facts is None or used is None:
        return facts is None and used is None
    return facts.agrees(used)


def _fill_notebook(result: FileResult, notebook: Notebook) -> None:
    """``fixed`` holds the fixed program: it becomes the notebook's JSON with
    the changed cells' sources replaced."""
    if result.fixed is None:
        return
    fixed_code, result.fixed = result.fixed, None
    changed = notebook.changed_sources(fixed_code)  # NotebookError: nothing is written
    result.fixed_code = fixed_code
    if changed:
        result.fixed = notebook.to_json(changed)


def _fill(result: FileResult, mode: Mode, in_fixed: list[Finding], in_original: list[Finding], applied: list[Finding], fixed: str | None) -> None:
    result.applied, result.fixed = applied, fixed
    result.findings_in_fixed = mode is Mode.APPLY
    result.findings = in_fixed if result.findings_in_fixed else in_original


def decode(path: Path, data: bytes) -> Source:
    """A file's bytes as text: a notebook is UTF-8 JSON, Python declares its encoding."""
    return decode_notebook(data) if is_notebook(path) else Source.decode(data)


def process_file(
    path: Path, mode: Mode, overrides: Overrides, approve: Approver | None = None, use_cache: bool = False, cache_only: bool = False,
    project: Any = None,
) -> FileResult | None:
    """One file, read to written. With ``cache_only``, None unless the cache
    has its result (so a parent process can keep cheap work to itself)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return FileResult(path, error=f"cannot read: {exc.strerror or exc}")
    try:
        source = decode(path, data)
    except SourceError as exc:
        return FileResult(path, error=str(exc))
    result = process_text(path, source, mode, overrides, approve, use_cache, cache_only, project)
    if result is None:
        return None
    if mode is Mode.APPLY and result.fixed is not None and result.error is None:
        try:
            write_atomic(path, source.encode(result.fixed), expected=data)
        except (WriteError, SourceError) as exc:
            # Not written: the file is reported as it stands on disk, every
            # finding still in it, none counted as fixed and no diff shown.
            result = process_text(path, source, Mode.CHECK, overrides, None, False, False, project) or result
            result.fixed, result.applied, result.error = None, [], str(exc)
    return result
