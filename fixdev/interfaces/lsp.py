"""``fixdev --lsp``: the Language Server Protocol over stdio (needs pygls:
``pip install "fixdev[lsp]"``). The same engine and configuration as the CLI:
diagnostics on open, change and save; a quick fix per fixable diagnostic; and a
``source.fixAll.fixdev`` action.

Notebooks come two ways. A client with LSP 3.17's notebook document sync (VS
Code's Jupyter) sends the cells as documents of their own: diagnostics and
fixes go to the cells. A client without it opens the ``.ipynb`` as JSON text:
diagnostics are placed on the cell's strings in that text, and a fix replaces
the text with the notebook as ``--apply`` would write it."""

from __future__ import annotations

import asyncio
import gc
import threading
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fixdev import __version__
from fixdev.engine.findings import Finding, apply_edits
from fixdev.files.notebook import CellIndex, Notebook, NotebookError, is_notebook, split_code, synthetic
from fixdev.files.runner import FileResult, Mode, Overrides, process_text
from fixdev.engine.noqa import noqa_edit
from fixdev.engine.reparse import ParseCache, reusing
from fixdev.engine.registry import SelectionError, find_rule
from fixdev.engine.source import LineIndex, Source, SyntaxLocation
from fixdev.engine.stop import Superseded, stoppable
from fixdev.files.config import Settings, nearest
from fixdev.files.discovery import force_excluded
from fixdev.interfaces.lsp_text import Positions, apply_change

FIX_ALL = "source.fixAll.fixdev"
NOTEBOOK_FIX_ALL = "notebook.source.fixAll.fixdev"
# How long a document is left without changes before its diagnostics are
# sent (a notebook's: before it is analysed): keys typed faster than this get
# diagnostics once, for the last. A plain document's analysis begins at each
# change and stops when a newer one comes (``publish_in_worker``).
DEBOUNCE_SECONDS = 0.03  # VS Code's notebook.codeActionsOnSave asks for notebook.source.*


@lru_cache(maxsize=16)  # one text's index serves all its diagnostics and edits
def _positions(text: str, encoding: str) -> Positions:
    return Positions(text, encoding)


def _range(text: str, encoding: str, start: int, end: int):
    """The LSP range of a span of ``text``, in the negotiated encoding."""
    from lsprotocol import types as lsp

    positions = _positions(text, encoding)
    (line, character), (end_line, end_character) = positions.position(start), positions.position(end)
    return lsp.Range(start=lsp.Position(line=line, character=character), end=lsp.Position(line=end_line, character=end_character))


EDITOR_FIRST, FILESYSTEM_FIRST = "editorFirst", "filesystemFirst"


class EditorSettingsError(ValueError):
    """Editor settings of the wrong shape, or naming no rule fixdev knows."""


@dataclass(frozen=True)
class EditorSettings:
    """What the editor says (``initializationOptions``, then each
    ``workspace/didChangeConfiguration``): ``select``, ``ignore`` and
    ``unsafeFixes`` as the command line's ``--select``, ``--ignore`` and
    ``--[no-]unsafe-fixes``, and which wins against ``[tool.fixdev]``.

    ``configurationPreference`` is Ruff's: ``editorFirst`` (the default) lays
    the editor's settings over the file's, as flags over it on the command
    line; ``filesystemFirst`` uses them only for a file that no
    ``pyproject.toml`` with a ``[tool.fixdev]`` table governs."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool | None = None
    preference: str = EDITOR_FIRST

    @classmethod
    def parse(cls, options: Any) -> "EditorSettings":
        """From a client's JSON: ``{"select": [...], ...}`` or that under a
        ``"fixdev"`` key (a ``workspace/didChangeConfiguration`` sends the
        section by name). Absent or null keys keep fixdev's own."""
        if options is None:
            return cls()
        if not isinstance(options, dict):
            raise EditorSettingsError(f"settings must be an object, not {type(options).__name__}")
        if isinstance(options.get("fixdev"), dict):
            options = options["fixdev"]

        def words(key: str) -> tuple[str, ...] | None:
            value = options.get(key)
            if value is None:
                return None
            if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
                raise EditorSettingsError(f"fixdev.{key} must be a list of rule codes, prefixes, names or groups")
            return tuple(value)

        unsafe = options.get("unsafeFixes")
        if unsafe is not None and not isinstance(unsafe, bool):
            raise EditorSettingsError("fixdev.unsafeFixes must be true, false or null")
        preference = options.get("configurationPreference") or EDITOR_FIRST
        if preference not in (EDITOR_FIRST, FILESYSTEM_FIRST):
            raise EditorSettingsError(f"fixdev.configurationPreference must be {EDITOR_FIRST!r} or {FILESYSTEM_FIRST!r}, not {preference!r}")
        # An empty select list in a settings UI means "not set", not "no rule".
        settings = cls(select=words("select") or None, ignore=words("ignore") or (), unsafe_fixes=unsafe, preference=preference)
        try:  # an unknown rule is told now, once, not as an error on every file
            settings.overrides(None).apply(Settings(root=Path.cwd())).rules()
        except SelectionError as exc:
            raise EditorSettingsError(f"fixdev.select / fixdev.ignore: {exc}") from None
        return settings

    def overrides(self, path: Path | None) -> Overrides:
        """The overrides for one file: none under ``filesystemFirst`` when a
        ``[tool.fixdev]`` table governs it."""
        if self.preference == FILESYSTEM_FIRST and path is not None and nearest(path.absolute().parent).source is not None:
            return Overrides()
        return Overrides(select=self.select, ignore=self.ignore, unsafe_fixes=self.unsafe_fixes)


def _span(text: str, encoding: str, range_) -> tuple[int, int]:
    """The offsets in ``text`` of an LSP range the client sent."""
    return _positions(text, encoding).span((range_.start.line, range_.start.character), (range_.end.line, range_.end.character))


@dataclass(frozen=True)
class _Cell:
    uri: str
    text: str


class _Placement:
    """Where a result's findings and fixes land in the editor's documents: the
    file itself, a notebook's JSON text, or a notebook's cell documents."""

    def __init__(self, uri: str, text: str, result: FileResult, cells: list[_Cell] | None = None) -> None:
        self.uri, self.text, self.result, self.cells = uri, text, result, cells
        self.code_index = CellIndex(result.code) if result.code is not None else None
        self.notebook = None
        if result.code is not None and cells is None:
            self.notebook = Notebook.from_json(text)
        self._indexes: dict[str, LineIndex] = {}

    def _index(self, text: str) -> LineIndex:
        if text not in self._indexes:
            self._indexes[text] = LineIndex(text)
        return self._indexes[text]

    def locate(self, start: int, end: int) -> tuple[str, str, int, int] | None:
        """(uri, text, start, end) of a span of the analysed text."""
        if self.code_index is None:
            return self.uri, self.text, start, end
        cell, line, column = self.code_index.locate(start)
        end_cell, end_line, end_column = self.code_index.locate(end)
        if self.cells is not None:
            text = self.cells[cell - 1].text
            index = self._index(text)
            first = min(len(text), index.offset(line, column)) if line <= len(index.starts) else len(text)
            last = min(len(text), index.offset(end_line, end_column)) if end_cell == cell and end_line <= len(index.starts) else len(text)
            return self.cells[cell - 1].uri, text, first, max(first, last)
        first = self.notebook.raw_offset(cell, line, column)
        last = self.notebook.raw_offset(end_cell, end_line, end_column) if end_cell == cell else None
        if first is None:
            return None
        return self.uri, self.text, first, max(first, last if last is not None else first)

    def edits(self, fixed_code: str) -> dict[str, list[tuple[int, int, str]]]:
        """The changes that turn what the editor holds into ``fixed_code``'s:
        whole cells, or the whole notebook text."""
        if self.cells is not None:
            old = dict(split_code(self.result.code))
            return {
                self.cells[number - 1].uri: [(0, len(self.cells[number - 1].text), text)]
                for number, text in split_code(fixed_code)
                if text != old.get(number)
            }
        fixed = self.notebook.to_json(self.notebook.changed_sources(fixed_code))
        return {self.uri: [(0, len(self.text), fixed)]} if fixed != self.text else {}


# How often a running thread offers the interpreter's lock to another (the
# default is 5 ms). The analysis runs on a worker thread while the event loop
# reads the next change; at 5 ms each hand-over of the lock made the loop wait,
# and a keystroke's diagnostics came tens of milliseconds later than its
# analysis was done (lsp_latency.py: main.py 84 -> 46 ms median, train.py 97
# -> 75 ms). Half a millisecond costs the analysis a few context switches more.
SWITCH_INTERVAL_SECONDS = 0.0005


def serve() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)  # this process is the server's alone
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer
    from pygls.uris import to_fs_path

    server = LanguageServer(
        "fixdev",
        __version__,
        # The editor sends whole texts: pygls's incremental edits split lines
        # with str.splitlines (at form feeds and U+2028 too, which end no LSP
        # line) and would land a line early after one.
        text_document_sync_kind=lsp.TextDocumentSyncKind.Full,
        notebook_document_sync=lsp.NotebookDocumentSyncOptions(
            notebook_selector=[lsp.NotebookDocumentFilterWithCells(cells=[lsp.NotebookCellLanguage(language="python")], notebook="jupyter-notebook")]
        ),
    )
    # The editor's text of each open document and notebook cell, kept here
    # rather than read from pygls: a notebook's cell changes may still come as
    # ranges (the document sync kind is not theirs), applied by apply_change
    # with LSP's line breaks.
    texts: dict[str, str] = {}
    results: dict[tuple[str, Mode], tuple[str, FileResult | None]] = {}  # the last analysis of each document's text
    # Top-level statements' libcst trees, reused from one version of a text
    # to the next: a keystroke re-parses the statement it changed.
    pieces = ParseCache()
    # A burst of edits is analysed once, after its last change: a change
    # arriving while one waits replaces it (its timer is cancelled).
    waiting: dict[str, asyncio.TimerHandle] = {}
    # Each open document's version, given with its diagnostics: a client
    # then knows which text they are for.
    versions: dict[str, int] = {}
    editor = [EditorSettings()]  # replaced whole by each settings message
    # A document's diagnostics after a change are made on a worker thread,
    # off the event loop, which keeps reading the editor's messages: a
    # result is sent only while its version is still the document's (one
    # for an older text is dropped, never sent after a newer one's).
    # Analyses take the lock: the caches above are shared.
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fixdev-analysis")
    lock = threading.RLock()
    loop_thread = threading.current_thread()
    loop: list[asyncio.AbstractEventLoop] = []  # the server's, once running

    def configure(options: Any) -> bool:
        """Take the editor's settings; on bad ones keep the last good ones and
        say so where the user sees it (a log line would go unread)."""
        try:
            editor[0] = EditorSettings.parse(options)
        except EditorSettingsError as exc:
            server.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"fixdev: {exc}"))
            return False
        with lock:
            results.clear()  # analysed under the old settings
        return True

    def encoding() -> str:
        """The position encoding pygls chose from the client's offered list
        (the client's first it knows; UTF-16 when it offers none)."""
        return getattr(server.workspace, "position_encoding", None) or lsp.PositionEncodingKind.Utf16

    def text_of(uri: str) -> str:
        if uri in texts:
            return texts[uri]
        return server.workspace.get_text_document(uri).source  # not open: pygls reads the file

    def change(uri: str, changes) -> None:
        text = text_of(uri)
        for event in changes:
            where = getattr(event, "range", None)
            if where is not None:
                where = ((where.start.line, where.start.character), (where.end.line, where.end.character))
            text = apply_change(text, event.text, where, encoding())
        texts[uri] = text

    def path_of(uri: str) -> Path | None:
        path = to_fs_path(uri)
        return Path(path) if path else None

    def excluded(path: Path | None) -> bool:
        """``[tool.fixdev] exclude`` and the default excludes, as a walk of the
        workspace would apply them (a file outside it: the default excludes
        match any folder above it, site-packages among them)."""
        if path is None:
            return False
        root = server.workspace.root_path if server.workspace is not None else None
        anchor = Path(root) if root and Path(path).absolute().is_relative_to(Path(root).absolute()) else Path(Path(path).absolute().anchor)
        return force_excluded(path, anchor)

    def warn(path: Path, error: str) -> None:
        on_loop(server.window_log_message, lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"fixdev: {path}: {error}"))

    def on_loop(send, *args) -> None:
        """``send(*args)`` on the event loop's thread (messages go out from there only)."""
        if threading.current_thread() is loop_thread or not loop:
            send(*args)
        else:
            loop[0].call_soon_threadsafe(send, *args)

    def checked(path: Path, result: FileResult) -> FileResult | None:
        for cell_error in result.cell_errors:
            warn(path, f"cell {cell_error.number}: {cell_error.message}")
        if result.error:
            warn(path, result.error)
            return None
        return result

    def analyse(uri: str, mode: Mode) -> FileResult | None:
        """The result for a document, None when there is nothing to show (an
        excluded file, an error told in the log). A syntax error is kept: it
        is shown as a diagnostic, as Ruff shows one."""
        return analyse_text(uri, text_of(uri), mode)

    def analyse_text(uri: str, text: str, mode: Mode) -> FileResult | None:
        """``analyse`` of a given text of ``uri`` (the worker's, taken on the loop)."""
        path = path_of(uri)
        if excluded(path):
            return None
        with lock:
            cached = results.get((uri, mode))
            if cached is not None and cached[0] == text:
                return cached[1]
            path = path or Path("untitled.py")
            with reusing(pieces):
                result = process_text(path, Source.from_text(text), mode, editor[0].overrides(path))
            if not (result.error and result.syntax_error is not None and not is_notebook(path)):
                result = checked(path, result)
            results[(uri, mode)] = (text, result)
            return result

    def notebook_of(uri: str):
        """The notebook document ``uri`` names, or the one holding cell ``uri``."""
        return server.workspace.get_notebook_document(notebook_uri=uri) or server.workspace.get_notebook_document(cell_uri=uri)

    def cells_of(notebook) -> list[tuple[str, _Cell]]:
        cells = []
        for cell in notebook.cells:
            document = server.workspace.get_text_document(cell.document)
            if cell.kind == lsp.NotebookCellKind.Markup:
                kind = "markdown"
            else:  # a cell in another language (SQL, R) is no Python: kept for the numbering only
                kind = "code" if document.language_id in (None, "python") else "raw"
            cells.append((kind, _Cell(cell.document, text_of(cell.document))))
        return cells

    def analyse_notebook(notebook, mode: Mode) -> _Placement | None:
        path = Path(to_fs_path(notebook.uri) or "untitled.ipynb")
        if excluded(path):
            return None
        cells = cells_of(notebook)
        if not is_notebook(path):
            path = path.with_name(path.name + ".ipynb")
        source = Source.from_text(synthetic([(kind, cell.text) for kind, cell in cells]))
        with lock, reusing(pieces):
            result = checked(path, process_text(path, source, mode, editor[0].overrides(path)))
        return _Placement(notebook.uri, source.text, result, [cell for _, cell in cells]) if result else None

    def placement(uri: str, mode: Mode) -> _Placement | None:
        notebook = notebook_of(uri)
        if notebook is not None:
            return analyse_notebook(notebook, mode)
        result = analyse(uri, mode)
        if result is None or result.error:
            return None
        try:
            return _Placement(uri, text_of(uri), result)
        except NotebookError:
            return None

    def text_edit(text: str, start: int, end: int, content: str):
        return lsp.TextEdit(range=_range(text, encoding(), start, end), new_text=content)

    def text_edits(changes: dict[str, list[tuple[int, int, str]]], texts: dict[str, str]) -> dict:
        return {uri: [text_edit(texts[uri], start, end, content) for start, end, content in edits] for uri, edits in changes.items()}

    def diagnostic(text: str, finding: Finding, start: int | None = None, end: int | None = None):
        return lsp.Diagnostic(
            range=_range(text, encoding(), finding.start if start is None else start, finding.end if end is None else end),
            message=finding.message,
            severity=lsp.DiagnosticSeverity.Warning,
            code=finding.code,
            source="fixdev",
            data={"name": finding.name, "fixable": finding.fix is not None},
        )

    def syntax_diagnostic(text: str, where: SyntaxLocation):
        positions = _positions(text, encoding())
        start, end = positions.at_column(where.line, where.column), positions.at_column(where.end_line, where.end_column)
        return lsp.Diagnostic(
            range=_range(text, encoding(), start, max(start, end)),
            message=f"SyntaxError: {where.reason}",
            severity=lsp.DiagnosticSeverity.Error,
            source="fixdev",
        )

    def publish(uri: str) -> None:
        notebook = notebook_of(uri)
        if notebook is not None:
            return publish_notebook(notebook)
        text = text_of(uri)
        if is_notebook(Path(uri)):
            diagnostics = [diagnostic(text, finding, start, end) for finding, (_, _, start, end) in placed(placement(uri, Mode.CHECK))]
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))
            return
        server.text_document_publish_diagnostics(document_diagnostics(uri, text, versions.get(uri)))

    def document_diagnostics(uri: str, text: str, version: int | None):
        result = analyse_text(uri, text, Mode.CHECK)
        diagnostics = [diagnostic(text, f) for f in result.findings] if result else []
        if result is not None and result.syntax_error is not None:
            diagnostics.append(syntax_diagnostic(text, result.syntax_error))
        return lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)

    analysed = [0]

    def frozen(whole: bool = True) -> None:
        """After an analysis, what it made and keeps for the next version
        (the parsed statements) is moved out of the cycle collector's walks
        (``gc.freeze``): made while the engine had the collector paused, it
        was all still young, and each collection walked it again; a full
        one, over every kept tree, took hundreds of milliseconds. Objects
        frozen are still freed by reference counting; every 500th analysis
        unfreezes them so that cycles among them are collected too (an
        analysis stopped by a newer change, ``whole`` false, is not counted:
        typing fast would otherwise collect five times as often)."""
        analysed[0] += whole
        if whole and analysed[0] % 500 == 0:
            gc.unfreeze()
            gc.collect()
        gc.freeze()

    def publish_in_worker(uri: str) -> None:
        """``publish`` of a plain document, its analysis on the worker thread,
        begun at once: it stops at its next step (``fixdev.engine.stop``)
        when a newer change comes, and its result is sent only if the
        document still has that text and version ``DEBOUNCE_SECONDS`` after
        the change (held until then when ready sooner): a burst of keys
        typed faster than that gets diagnostics once, for its last text."""
        text, version = texts[uri], versions.get(uri)
        quiet_at = loop[0].time() + DEBOUNCE_SECONDS if loop else 0.0

        def current() -> bool:
            return texts.get(uri) == text and versions.get(uri) == version

        def work() -> None:
            if not current():  # a newer change came while this waited: its own analysis is queued
                return
            whole = False
            try:
                with stoppable(lambda: not current()):
                    params = document_diagnostics(uri, text, version)
                whole = True
            except Superseded:  # stopped between two steps: the newer text's analysis is next
                return
            except Exception:  # noqa: BLE001 - on the loop's thread pygls would have logged it; a worker's future would keep it unseen
                on_loop(server.window_log_message, lsp.LogMessageParams(type=lsp.MessageType.Error, message=f"fixdev: {uri}: internal error\n{traceback.format_exc()}"))
                return
            finally:
                frozen(whole)
            on_loop(send, params)

        def send(params) -> None:
            if not current():
                return
            wait = quiet_at - loop[0].time() if loop else 0.0
            if wait > 0:  # ready before the burst can be known to have ended
                loop[0].call_later(wait, send, params)
                return
            server.text_document_publish_diagnostics(params)

        worker.submit(work)

    def placed(found: _Placement | None):
        """(finding, (uri, text, start, end)) for each finding that has a place."""
        if found is None:
            return []
        pairs = []
        for finding in found.result.findings:
            where = found.locate(finding.start, finding.end)
            if where is not None:
                pairs.append((finding, where))
        return pairs

    def publish_notebook(notebook) -> None:
        found = analyse_notebook(notebook, Mode.CHECK)
        per_cell: dict[str, list] = {cell.document: [] for cell in notebook.cells}
        for finding, (uri, text, start, end) in placed(found):
            per_cell.setdefault(uri, []).append(diagnostic(text, finding, start, end))
        for uri, diagnostics in per_cell.items():
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    init_options: list[Any] = [None]

    @server.feature(lsp.INITIALIZE)
    def initialize(params: lsp.InitializeParams) -> None:
        init_options[0] = params.initialization_options

    @server.feature(lsp.INITIALIZED)
    def initialized(params: lsp.InitializedParams) -> None:
        # Taken here, not in initialize: a message to the user (bad settings)
        # may only follow the answer to initialize, and nothing is analysed
        # before initialized anyway.
        configure(init_options[0])

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(params: lsp.DidChangeConfigurationParams) -> None:
        # null settings is a pull client's "ask me" (workspace/configuration),
        # not "back to the defaults": the settings stay as they are.
        if params.settings is not None and configure(params.settings):
            for uri in list(texts):  # cells included: publish finds their notebook
                publish(uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(params: lsp.DidOpenNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            texts[cell.uri] = cell.text
        publish_notebook(notebook_of(params.notebook_document.uri))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(params: lsp.DidChangeNotebookDocumentParams) -> None:
        cells = params.change.cells
        structure = cells.structure if cells else None
        for opened in (structure.did_open or []) if structure else []:
            texts[opened.uri] = opened.text
        for edited in (cells.text_content or []) if cells else []:
            change(edited.document.uri, edited.changes)
        for closed in (structure.did_close or []) if structure else []:
            texts.pop(closed.uri, None)
        publish_soon(params.notebook_document.uri)
        for closed in (structure.did_close or []) if structure else []:  # a deleted cell keeps no diagnostics
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=closed.uri, diagnostics=[]))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(params: lsp.DidSaveNotebookDocumentParams) -> None:
        publish_notebook(notebook_of(params.notebook_document.uri))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(params: lsp.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            texts.pop(cell.uri, None)
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        texts[params.text_document.uri] = params.text_document.text
        versions[params.text_document.uri] = params.text_document.version
        publish(params.text_document.uri)

    def publish_soon(uri: str) -> None:
        """A plain document: analysed at once on the worker, published once
        ``DEBOUNCE_SECONDS`` passed without another change (``publish_in_worker``).
        A notebook (its cells count as its own): published after
        ``DEBOUNCE_SECONDS`` without another change. The server's messages are
        handled in order, so changes that came while an analysis ran are all
        taken before the timer fires: one analysis for them, of the newest text."""
        handle = waiting.pop(uri, None)
        if handle is not None:
            handle.cancel()

        if not loop:
            loop.append(asyncio.get_running_loop())
        if uri in texts and notebook_of(uri) is None and not is_notebook(Path(uri)):
            publish_in_worker(uri)  # analysed at once; a newer change stops it
            return

        def fire() -> None:
            waiting.pop(uri, None)
            if uri in texts or notebook_of(uri) is not None:
                publish(uri)

        waiting[uri] = loop[0].call_later(DEBOUNCE_SECONDS, fire)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        change(params.text_document.uri, params.content_changes)
        versions[params.text_document.uri] = params.text_document.version
        publish_soon(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        texts.pop(uri, None)
        versions.pop(uri, None)
        handle = waiting.pop(uri, None)
        if handle is not None:
            handle.cancel()
        for mode in Mode:
            results.pop((uri, mode), None)
        server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def quick_fix(finding: Finding, found, changes: dict) -> lsp.CodeAction:
        # An unsafe fix is offered too (the user picks it by hand, reading its
        # title), but never preferred; fix-all applies it only with unsafe-fixes.
        unsafe = "" if finding.fix.safe else " (unsafe)"
        return lsp.CodeAction(
            title=f"{finding.fix.message} ({finding.code}){unsafe}", kind=lsp.CodeActionKind.QuickFix, diagnostics=[found],
            is_preferred=finding.fix.safe, edit=lsp.WorkspaceEdit(changes=changes),
        )

    def disable(uri: str, text: str, finding: Finding, start: int, end: int, found, offered: set) -> list[lsp.CodeAction]:
        """"Disable FDVxxx for this line": a ``# noqa: FDVxxx`` on the
        finding's line, merged into one already there; once per line and code."""
        edit = noqa_edit(text, start, end, finding.code)
        if edit is None or (uri, finding.code, edit) in offered:
            return []
        offered.add((uri, finding.code, edit))
        changes = {uri: [text_edit(text, edit.start, edit.end, edit.content)]}
        return [lsp.CodeAction(title=f"Disable {finding.code} for this line", kind=lsp.CodeActionKind.QuickFix, diagnostics=[found], edit=lsp.WorkspaceEdit(changes=changes))]

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL], resolve_provider=False),
    )
    def code_action(params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        if notebook_of(uri) is not None or is_notebook(Path(uri)):
            return notebook_actions(uri, params)
        result = analyse(uri, Mode.CHECK)
        if result is None or result.error:
            return []
        text = text_of(uri)
        asked = _span(text, encoding(), params.range)
        wanted = params.context.only
        actions: list[lsp.CodeAction] = []
        offered: set = set()
        if _wanted(lsp.CodeActionKind.QuickFix, wanted):
            for finding in result.findings:
                if not _touches((finding.start, finding.end), asked):
                    continue
                found = diagnostic(text, finding)
                if finding.fix is not None:
                    actions.append(quick_fix(finding, found, {uri: [text_edit(text, e.start, e.end, e.content) for e in finding.fix.edits]}))
                actions.extend(disable(uri, text, finding, finding.start, finding.end, found, offered))
        if _wanted(FIX_ALL, wanted):
            fixed = analyse(uri, Mode.DIFF)
            if fixed is not None and fixed.fixed is not None:
                whole = text_edit(text, 0, len(text), fixed.fixed)
                actions.append(lsp.CodeAction(title="fixdev: fix all device bugs", kind=FIX_ALL, edit=lsp.WorkspaceEdit(changes={uri: [whole]})))
        return actions

    def notebook_actions(uri: str, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        """Quick fixes and fix-all for a notebook: each fix is applied to the
        whole program (a definition it adds may go to another cell) and sent
        as the cells, or the notebook text, it changes."""
        found = placement(uri, Mode.CHECK)
        if found is None:
            return []
        texts_now = {cell.uri: cell.text for cell in found.cells} if found.cells is not None else {found.uri: found.text}
        wanted = params.context.only
        actions: list[lsp.CodeAction] = []
        offered: set = set()
        if _wanted(lsp.CodeActionKind.QuickFix, wanted):
            for finding, (where, text, start, end) in placed(found):
                if where != uri or not _touches((start, end), _span(text, encoding(), params.range)):
                    continue
                found_diagnostic = diagnostic(text, finding, start, end)
                if finding.fix is not None:
                    try:
                        changes = found.edits(apply_edits(found.result.code, finding.fix.edits))
                    except NotebookError:
                        changes = None
                    if changes is not None:
                        actions.append(quick_fix(finding, found_diagnostic, text_edits(changes, texts_now)))
                if found.cells is not None:  # a cell is Python text; in a notebook's JSON the comment would go inside a string
                    actions.extend(disable(where, text, finding, start, end, found_diagnostic, offered))
        kinds = [FIX_ALL] if _wanted(FIX_ALL, wanted) else []
        if wanted and _wanted(NOTEBOOK_FIX_ALL, wanted):  # asked by name only: one fix-all in a light bulb is enough
            kinds.append(NOTEBOOK_FIX_ALL)
        if kinds:
            # The whole notebook, whichever cell asks: a fix in one cell may
            # need the definition another fix adds to the cell importing torch.
            fixed = placement(uri, Mode.DIFF)
            if fixed is not None and fixed.result.fixed_code is not None and fixed.result.fixed is not None:
                changes = fixed.edits(fixed.result.fixed_code)
                for kind in kinds if changes else ():
                    actions.append(lsp.CodeAction(title="fixdev: fix all device bugs", kind=kind, edit=lsp.WorkspaceEdit(changes=text_edits(changes, texts_now))))
        return actions

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(params: lsp.HoverParams) -> lsp.Hover | None:
        """The documentation of each rule reported where the pointer is, as
        ``fixdev --explain`` prints it (from the rule class)."""
        uri = params.text_document.uri
        if notebook_of(uri) is not None or is_notebook(Path(uri)):
            spans = [(finding, text, start, end) for finding, (where, text, start, end) in placed(placement(uri, Mode.CHECK)) if where == uri]
        else:
            result = analyse(uri, Mode.CHECK)
            spans = [(finding, text_of(uri), finding.start, finding.end) for finding in (result.findings if result else [])]
        if not spans:
            return None
        text = spans[0][1]
        at = _positions(text, encoding()).offset(params.position.line, params.position.character)
        under = [(finding, start, end) for finding, _, start, end in spans if start <= at < end or start == end == at]
        if not under:
            return None
        codes = list(dict.fromkeys(finding.code for finding, _, _ in under))
        value = "\n\n---\n\n".join(find_rule(code).explanation() for code in codes)
        _, start, end = under[0]
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=value), range=_range(text, encoding(), start, end))

    server.start_io()


def _wanted(kind: str, only) -> bool:
    """Code action kinds are hierarchical (LSP 3.17, CodeActionKind): asking
    for ``source.fixAll`` or ``source`` (what VS Code's codeActionsOnSave
    sends) asks for ``source.fixAll.fixdev`` too. No ``only``: everything."""
    def plain(value) -> str:  # lsprotocol gives known kinds as str enums, others as str
        return getattr(value, "value", value)

    kind = plain(kind)
    return not only or any(kind == plain(asked) or kind.startswith(plain(asked) + ".") for asked in only)


def _touches(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Two spans of offsets overlap or touch: a cursor just after a finding
    (an empty range at its end) still asks for its fixes."""
    return a[0] <= b[1] and b[0] <= a[1]
