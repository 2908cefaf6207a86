"""``fixdev --lsp``: the Language Server Protocol over stdio (needs pygls:
``pip install "fixdev[lsp]"``). The same engine and configuration as the CLI:
diagnostics on open, change and save; a quick fix per fixable diagnostic; and a
``source.fixAll.fixdev`` action."""

from __future__ import annotations

from pathlib import Path

from . import __version__
from .findings import Finding
from .runner import FileResult, Mode, Overrides, process_text
from .source import LineIndex, Source

FIX_ALL = "source.fixAll.fixdev"


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


def serve() -> None:
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("fixdev", __version__)

    def analyse(uri: str, mode: Mode) -> FileResult | None:
        document = server.workspace.get_text_document(uri)
        path = Path(document.path) if document.path else Path("untitled.py")
        result = process_text(path, Source.from_text(document.source), mode, Overrides())
        if result.error:
            server.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Warning, message=f"fixdev: {path}: {result.error}"))
            return None
        return result

    def diagnostic(text: str, index: LineIndex, finding: Finding):
        return lsp.Diagnostic(
            range=_range(text, index, finding.start, finding.end),
            message=finding.message,
            severity=lsp.DiagnosticSeverity.Warning,
            code=finding.code,
            source="fixdev",
            data={"name": finding.name, "fixable": finding.fix is not None},
        )

    def publish(uri: str) -> None:
        result = analyse(uri, Mode.CHECK)
        text = server.workspace.get_text_document(uri).source
        index = LineIndex(text)
        diagnostics = [diagnostic(text, index, f) for f in result.findings] if result else []
        server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

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
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=False),
    )
    def code_action(params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
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
