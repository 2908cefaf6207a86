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

from dataclasses import dataclass
from pathlib import Path

from fixdev import __version__
from fixdev.engine.findings import Finding, apply_edits
from fixdev.files.notebook import CellIndex, Notebook, NotebookError, is_notebook, split_code, synthetic
from fixdev.files.runner import FileResult, Mode, Overrides, process_text
from fixdev.engine.source import LineIndex, Source

FIX_ALL = "source.fixAll.fixdev"
NOTEBOOK_FIX_ALL = "notebook.source.fixAll.fixdev"  # VS Code's notebook.codeActionsOnSave asks for notebook.source.*


def _utf16_position(text: str, index: LineIndex, offset: int):
    """LSP positions count UTF-16 code units, 0-based."""
    from lsprotocol import types as lsp

    line, column = index.position(offset)
    start = index.starts[line - 1]
    prefix = text[start : start + column - 1]
    return lsp.Position(line=line - 1, character=len(prefix.encode("utf-16-le")) // 2)


def _range(text: str, index: LineIndex, start: int, end: int):
    from lsprotocol import types as lsp

    return lsp.Range(start=_utf16_position(text, index, start), end=_utf16_position(text, index, end))


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


def serve() -> None:
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer
    from pygls.uris import to_fs_path

    server = LanguageServer(
        "fixdev",
        __version__,
        notebook_document_sync=lsp.NotebookDocumentSyncOptions(
            notebook_selector=[lsp.NotebookDocumentFilterWithCells(cells=[lsp.NotebookCellLanguage(language="python")], notebook="jupyter-notebook")]
        ),
    )

    def warn(path: Path, error: str) -> None:
        server.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"fixdev: {path}: {error}"))

    def checked(path: Path, result: FileResult) -> FileResult | None:
        for cell_error in result.cell_errors:
            warn(path, f"cell {cell_error.number}: {cell_error.message}")
        if result.error:
            warn(path, result.error)
            return None
        return result

    def analyse(uri: str, mode: Mode) -> FileResult | None:
        document = server.workspace.get_text_document(uri)
        path = Path(document.path) if document.path else Path("untitled.py")
        return checked(path, process_text(path, Source.from_text(document.source), mode, Overrides()))

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
            cells.append((kind, _Cell(cell.document, document.source)))
        return cells

    def analyse_notebook(notebook, mode: Mode) -> _Placement | None:
        cells = cells_of(notebook)
        path = Path(to_fs_path(notebook.uri) or "untitled.ipynb")
        if not is_notebook(path):
            path = path.with_name(path.name + ".ipynb")
        source = Source.from_text(synthetic([(kind, cell.text) for kind, cell in cells]))
        result = checked(path, process_text(path, source, mode, Overrides()))
        return _Placement(notebook.uri, source.text, result, [cell for _, cell in cells]) if result else None

    def placement(uri: str, mode: Mode) -> _Placement | None:
        notebook = notebook_of(uri)
        if notebook is not None:
            return analyse_notebook(notebook, mode)
        result = analyse(uri, mode)
        if result is None:
            return None
        try:
            return _Placement(uri, server.workspace.get_text_document(uri).source, result)
        except NotebookError:
            return None

    def text_edits(changes: dict[str, list[tuple[int, int, str]]], texts: dict[str, str]) -> dict:
        return {
            uri: [lsp.TextEdit(range=_range(texts[uri], LineIndex(texts[uri]), start, end), new_text=content) for start, end, content in edits]
            for uri, edits in changes.items()
        }

    def diagnostic(text: str, index: LineIndex, finding: Finding, start: int | None = None, end: int | None = None):
        return lsp.Diagnostic(
            range=_range(text, index, finding.start if start is None else start, finding.end if end is None else end),
            message=finding.message,
            severity=lsp.DiagnosticSeverity.Warning,
            code=finding.code,
            source="fixdev",
            data={"name": finding.name, "fixable": finding.fix is not None},
        )

    def publish(uri: str) -> None:
        notebook = notebook_of(uri)
        if notebook is not None:
            return publish_notebook(notebook)
        if is_notebook(Path(uri)):
            found = placement(uri, Mode.CHECK)
            text = server.workspace.get_text_document(uri).source
            diagnostics = []
            for finding, (_, _, start, end) in placed(found):
                diagnostics.append(diagnostic(text, LineIndex(text), finding, start, end))
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))
            return
        result = analyse(uri, Mode.CHECK)
        text = server.workspace.get_text_document(uri).source
        index = LineIndex(text)
        diagnostics = [diagnostic(text, index, f) for f in result.findings] if result else []
        server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

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
            per_cell.setdefault(uri, []).append(diagnostic(text, LineIndex(text), finding, start, end))
        for uri, diagnostics in per_cell.items():
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_did_open(params: lsp.DidOpenNotebookDocumentParams) -> None:
        publish_notebook(notebook_of(params.notebook_document.uri))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_did_change(params: lsp.DidChangeNotebookDocumentParams) -> None:
        notebook = notebook_of(params.notebook_document.uri)
        publish_notebook(notebook)
        structure = params.change.cells.structure if params.change.cells else None
        for closed in (structure.did_close or []) if structure else []:  # a deleted cell keeps no diagnostics
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=closed.uri, diagnostics=[]))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_did_save(params: lsp.DidSaveNotebookDocumentParams) -> None:
        publish_notebook(notebook_of(params.notebook_document.uri))

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(params: lsp.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: lsp.DidSaveTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL], resolve_provider=False),
    )
    def code_action(params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        if notebook_of(uri) is not None or is_notebook(Path(uri)):
            return notebook_actions(uri, params)
        result = analyse(uri, Mode.CHECK)
        if result is None:
            return []
        text = server.workspace.get_text_document(uri).source
        index = LineIndex(text)
        wanted = params.context.only
        actions = []
        if _wanted(lsp.CodeActionKind.QuickFix, wanted):
            for finding in result.findings:
                if finding.fix is None:
                    continue
                found = diagnostic(text, index, finding)
                if not _overlaps(found.range, params.range):
                    continue
                edits = [lsp.TextEdit(range=_range(text, index, e.start, e.end), new_text=e.content) for e in finding.fix.edits]
                actions.append(
                    lsp.CodeAction(
                        title=f"{finding.fix.message} ({finding.code})",
                        kind=lsp.CodeActionKind.QuickFix,
                        diagnostics=[found],
                        is_preferred=True,
                        edit=lsp.WorkspaceEdit(changes={uri: edits}),
                    )
                )
        if _wanted(FIX_ALL, wanted):
            fixed = analyse(uri, Mode.DIFF)
            if fixed is not None and fixed.fixed is not None:
                whole = lsp.TextEdit(range=_range(text, index, 0, len(text)), new_text=fixed.fixed)
                actions.append(lsp.CodeAction(title="fixdev: fix all device bugs", kind=FIX_ALL, edit=lsp.WorkspaceEdit(changes={uri: [whole]})))
        return actions

    def notebook_actions(uri: str, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        """Quick fixes and fix-all for a notebook: each fix is applied to the
        whole program (a definition it adds may go to another cell) and sent
        as the cells, or the notebook text, it changes."""
        found = placement(uri, Mode.CHECK)
        if found is None:
            return []
        texts = {cell.uri: cell.text for cell in found.cells} if found.cells is not None else {found.uri: found.text}
        wanted = params.context.only
        actions = []
        if _wanted(lsp.CodeActionKind.QuickFix, wanted):
            for finding, (where, text, start, end) in placed(found):
                found_diagnostic = diagnostic(text, LineIndex(text), finding, start, end)
                if finding.fix is None or where != uri or not _overlaps(found_diagnostic.range, params.range):
                    continue
                try:
                    changes = found.edits(apply_edits(found.result.code, finding.fix.edits))
                except NotebookError:
                    continue
                actions.append(
                    lsp.CodeAction(
                        title=f"{finding.fix.message} ({finding.code})",
                        kind=lsp.CodeActionKind.QuickFix,
                        diagnostics=[found_diagnostic],
                        is_preferred=True,
                        edit=lsp.WorkspaceEdit(changes=text_edits(changes, texts)),
                    )
                )
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
                    actions.append(lsp.CodeAction(title="fixdev: fix all device bugs", kind=kind, edit=lsp.WorkspaceEdit(changes=text_edits(changes, texts))))
        return actions

    server.start_io()


def _wanted(kind: str, only) -> bool:
    """Code action kinds are hierarchical (LSP 3.17, CodeActionKind): asking
    for ``source.fixAll`` or ``source`` (what VS Code's codeActionsOnSave
    sends) asks for ``source.fixAll.fixdev`` too. No ``only``: everything."""
    def plain(value) -> str:  # lsprotocol gives known kinds as str enums, others as str
        return getattr(value, "value", value)

    kind = plain(kind)
    return not only or any(kind == plain(asked) or kind.startswith(plain(asked) + ".") for asked in only)


def _overlaps(a, b) -> bool:
    def key(position):
        return (position.line, position.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)
