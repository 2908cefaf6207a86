"""A Language Server Protocol session as an editor runs it: JSON-RPC over pipes."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason='the language server needs pip install -e ".[test]"')

BUGGY = "import torch\n\n\ndef f(x):\n    return x * torch.ones(x.shape)\n"


class Client:
    def __init__(self, cwd: Path, command: list[str] | None = None) -> None:
        command = command or [sys.executable, "-m", "fixdev", "--lsp"]
        self.proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params: dict, request: bool = True) -> int | None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        return message.get("id")

    def receive(self) -> dict:
        headers = {}
        while True:
            line = self.proc.stdout.readline()
            assert line, "the server closed its output"
            if line in (b"\r\n", b"\n"):
                break
            key, _, value = line.decode().partition(":")
            headers[key.strip().lower()] = value.strip()
        return json.loads(self.proc.stdout.read(int(headers["content-length"])))

    def wait_for(self, predicate) -> dict:
        for _ in range(50):
            message = self.receive()
            if predicate(message):
                return message
        raise AssertionError("no such message")

    def request(self, method: str, params: dict) -> dict:
        request_id = self.send(method, params)
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m)

    def diagnostics(self) -> list:
        return self.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")["params"]["diagnostics"]


# BUGGY's fix (torch.ones(x.shape) -> torch.ones_like(x)) is unsafe (the dtype
# may change): fix-all applies it only where unsafe-fixes is on
UNSAFE_FIXES = "[tool.fixdev]\nunsafe-fixes = true\n"


def test_editor_session(tmp_path):
    (tmp_path / "pyproject.toml").write_text(UNSAFE_FIXES)
    path = tmp_path / "model.py"
    path.write_text(BUGGY)
    uri = path.as_uri()
    client = Client(tmp_path)
    try:
        init = client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
        capabilities = init["result"]["capabilities"]
        assert "source.fixAll.fixdev" in capabilities["codeActionProvider"]["codeActionKinds"]
        client.send("initialized", {}, request=False)

        client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": BUGGY}}, request=False)
        diagnostics = client.diagnostics()
        assert [(d["code"], d["range"]["start"]["line"], d["range"]["start"]["character"]) for d in diagnostics] == [("FDV101", 4, 15)]

        actions = client.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": diagnostics[0]["range"], "context": {"diagnostics": diagnostics}},
        )["result"]
        quick = [a for a in actions if a["kind"] == "quickfix"]
        assert quick and quick[0]["edit"]["changes"][uri][0]["newText"] == "torch.ones_like(x)"
        assert quick[0]["title"].endswith(" (unsafe)") and not quick[0].get("isPreferred")  # unsafe: offered, never preferred
        fix_all = [a for a in actions if a["kind"] == "source.fixAll.fixdev"]
        assert fix_all and "torch.ones_like(x)" in fix_all[0]["edit"]["changes"][uri][0]["newText"]

        # where unsafe fixes are off, the quick fix is still offered but fix-all has nothing to apply
        strict = tmp_path / "strict"
        strict.mkdir()
        (strict / "pyproject.toml").write_text("[tool.fixdev]\nunsafe-fixes = false\n")
        (strict / "model.py").write_text(BUGGY)
        strict_uri = (strict / "model.py").as_uri()
        client.send("textDocument/didOpen", {"textDocument": {"uri": strict_uri, "languageId": "python", "version": 1, "text": BUGGY}}, request=False)
        strict_found = client.diagnostics()
        strict_actions = client.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": strict_uri}, "range": strict_found[0]["range"], "context": {"diagnostics": strict_found}},
        )["result"]
        assert [a["title"] for a in strict_actions if a["kind"] == "quickfix"][0].endswith(" (unsafe)")
        assert [a for a in strict_actions if a["kind"] == "source.fixAll.fixdev"] == []

        fixed = BUGGY.replace("torch.ones(x.shape)", "torch.ones_like(x)")
        client.send(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]},
            request=False,
        )
        assert client.diagnostics() == []

        assert client.request("shutdown", None)["result"] is None
        client.send("exit", None, request=False)
        assert client.proc.wait(timeout=30) == 0
    finally:
        if client.proc.poll() is None:
            client.proc.kill()


# Issue 10 item 13: code action kinds are hierarchical.
@pytest.mark.parametrize(
    "only, kinds",
    [
        (["source.fixAll"], ["source.fixAll.fixdev"]),
        (["source"], ["source.fixAll.fixdev"]),
        (["source.fixAll.fixdev"], ["source.fixAll.fixdev"]),
        (["quickfix"], ["quickfix"]),
        (["refactor"], []),
        (["source.fixAll.other"], []),
    ],
)
def test_code_action_kinds_match_hierarchically(tmp_path, only, kinds):
    (tmp_path / "pyproject.toml").write_text(UNSAFE_FIXES)  # fix-all has BUGGY's (unsafe) fix to offer
    path = tmp_path / "model.py"
    path.write_text(BUGGY)
    uri = path.as_uri()
    client = Client(tmp_path)
    try:
        client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
        client.send("initialized", {}, request=False)
        client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": BUGGY}}, request=False)
        diagnostics = client.diagnostics()
        actions = client.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": diagnostics[0]["range"], "context": {"diagnostics": diagnostics, "only": only}},
        )["result"]
        assert sorted({a["kind"] for a in actions or []}) == kinds  # quickfix: the fix and "Disable FDV101 for this line"
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# ---------------------------------------------------------------- issue 26
# What a client does with positions, written here apart from the server's
# code: LSP lines end at \n, \r\n or \r only, and a character is counted in the
# negotiated encoding's code units.

_UNIT_BYTES = {"utf-8": 1, "utf-16": 2, "utf-32": 4}
_CODECS = {"utf-8": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}


def lsp_lines(text: str) -> list[str]:
    """The lines with their breaks (a form feed or U+2028 breaks none)."""
    return re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text)


def offset_of(text: str, position: dict, encoding: str) -> int:
    lines = lsp_lines(text)
    body = lines[position["line"]].rstrip("\r\n")
    units = body.encode(_CODECS[encoding])[: position["character"] * _UNIT_BYTES[encoding]]
    return sum(map(len, lines[: position["line"]])) + len(units.decode(_CODECS[encoding]))


def covered(text: str, range_: dict, encoding: str) -> str:
    return text[offset_of(text, range_["start"], encoding) : offset_of(text, range_["end"], encoding)]


def applied(text: str, edits: list[dict], encoding: str) -> str:
    spans = sorted(((offset_of(text, e["range"]["start"], encoding), offset_of(text, e["range"]["end"], encoding), e["newText"]) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


@functools.lru_cache(maxsize=None)  # the same document under each encoding
def cli(text: str, *args: str) -> str:
    """fixdev on the command line, the document on stdin (no language server involved)."""
    done = subprocess.run([sys.executable, "-m", "fixdev", *args, "--stdin-filename", "model.py", "-"], input=text.encode(), capture_output=True)
    return done.stdout.decode()


def cli_findings(text: str) -> list[dict]:
    """Each finding with the text it covers and its quick fix's result, from
    the CLI's JSON (rows and columns count characters, 1-based)."""
    starts = [0]
    for line in lsp_lines(text)[:-1]:
        starts.append(starts[-1] + len(line))

    def offset(location: dict) -> int:
        return starts[location["row"] - 1] + location["column"] - 1

    findings = []
    for finding in json.loads(cli(text, "--output-format", "json")):
        fixed = text
        for edit in sorted(finding["fix"]["edits"], key=lambda e: offset(e["location"]), reverse=True) if finding["fix"] else ():
            fixed = fixed[: offset(edit["location"])] + edit["content"] + fixed[offset(edit["end_location"]) :]
        findings.append({"code": finding["code"], "text": text[offset(finding["location"]) : offset(finding["end_location"])], "fixed": fixed})
    return findings


def start_session(tmp_path: Path, encodings: list[str] | None = None, capabilities: dict | None = None, command: list[str] | None = None):
    client = Client(tmp_path, command)
    capabilities = dict(capabilities or {})
    if encodings is not None:
        capabilities["general"] = {"positionEncodings": encodings}
    init = client.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": capabilities})
    client.send("initialized", {}, request=False)
    return client, init["result"]["capabilities"]


def open_document(client: Client, uri: str, text: str) -> list:
    client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}, request=False)
    return client.diagnostics()


def code_actions(client: Client, uri: str, range_: dict, diagnostics: list, only: list[str] | None = None) -> list:
    context = {"diagnostics": diagnostics, **({"only": only} if only else {})}
    return client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": range_, "context": context})["result"] or []


NON_ASCII = (
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "model = nn.Linear(4, 2).cuda()  # é ✓ 😀\n"
    "out = model(torch.randn(1, 4).cuda())\n"
    'note = "page\fbreak\u2028sep 😀"\n'
    'print("résultat ✓ 😀", out.numpy())\n'
)
NUMPY_FIXED = 'print("résultat ✓ 😀", out.detach().cpu().numpy())'
DOCUMENTS = {"lf": NON_ASCII, "crlf": NON_ASCII.replace("\n", "\r\n"), "cr": NON_ASCII.replace("\n", "\r")}


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
@pytest.mark.parametrize("endings", sorted(DOCUMENTS))
def test_positions_in_the_negotiated_encoding(tmp_path, encoding, endings):
    text = DOCUMENTS[endings]
    expected = cli_findings(text)
    assert "out.numpy()" in [f["text"] for f in expected]
    path = tmp_path / "model.py"
    uri = path.as_uri()
    client, capabilities = start_session(tmp_path, [encoding, "utf-16"])
    try:
        assert capabilities["positionEncoding"] == encoding
        # Full sync: pygls's own incremental edits split lines at form feeds and U+2028.
        assert capabilities["textDocumentSync"]["change"] == 1
        diagnostics = open_document(client, uri, text)
        assert [(d["code"], covered(text, d["range"], encoding)) for d in diagnostics] == [(f["code"], f["text"]) for f in expected]

        numpy = [d for d in diagnostics if covered(text, d["range"], encoding) == "out.numpy()"]
        assert len(numpy) == 1
        for diagnostic, finding in zip(diagnostics, expected):
            quick = [a for a in code_actions(client, uri, diagnostic["range"], [diagnostic], ["quickfix"]) if a.get("diagnostics") == [diagnostic] and not a["title"].startswith("Disable ")]
            assert len(quick) == 1
            assert applied(text, quick[0]["edit"]["changes"][uri], encoding) == finding["fixed"]
            if diagnostic is numpy[0]:
                assert NUMPY_FIXED in applied(text, quick[0]["edit"]["changes"][uri], encoding)

        [fix_all] = code_actions(client, uri, numpy[0]["range"], diagnostics, ["source.fixAll"])
        assert applied(text, fix_all["edit"]["changes"][uri], encoding) == cli(text, "--apply")

        # A change the editor sends whole: the server's text is the editor's.
        changed = text.replace("out.numpy()", "out.detach().cpu().numpy()")
        client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": changed}]}, request=False)
        assert [covered(changed, d["range"], encoding) for d in client.diagnostics()] == [f["text"] for f in cli_findings(changed)]
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_cell_changes_sent_as_ranges_count_lsp_lines(tmp_path, encoding):
    # A notebook's cells may still change by ranges (VS Code sends them so):
    # they count lines at \n, \r\n and \r only, and units in the encoding.
    before = 'import torch\ns = "a\fb\u2028c"\r\nx = torch.ones(2)\ny = ("é 😀", x)\n'
    line = lsp_lines(before)[3]
    at = {"line": 3, "character": len(line[: line.index("x)") + 1].encode(_CODECS[encoding])) // _UNIT_BYTES[encoding]}
    after = before.replace('("é 😀", x)', '("é 😀", x.cuda())')
    uri = (tmp_path / "nb.ipynb").as_uri()
    cell = f"vscode-notebook-cell:{tmp_path}/nb.ipynb#cell0"
    client, _ = start_session(tmp_path, [encoding], {"notebookDocument": {"synchronization": {}}})
    try:
        client.send("notebookDocument/didOpen", {
            "notebookDocument": {"uri": uri, "notebookType": "jupyter-notebook", "version": 1, "cells": [{"kind": 2, "document": cell}]},
            "cellTextDocuments": [{"uri": cell, "languageId": "python", "version": 1, "text": before}],
        }, request=False)
        assert client.diagnostics() == []
        client.send("notebookDocument/didChange", {
            "notebookDocument": {"uri": uri, "version": 2},
            "change": {"cells": {"textContent": [{"document": {"uri": cell, "version": 2}, "changes": [{"range": {"start": at, "end": at}, "text": ".cuda()"}]}]}},
        }, request=False)
        [found] = client.diagnostics()
        assert found["code"] == "FDV104" and covered(after, found["range"], encoding) == "x.cuda()"
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# Issue 26 item 11: a syntax error is one diagnostic, where CPython puts it.
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_syntax_error_is_a_diagnostic(tmp_path, encoding):
    valid = 'import torch\n\nx = torch.ones(2).cuda()\nprint("é 😀", x)\n'
    broken = valid.replace("print(\"é 😀\", x)", "print(\"é 😀\", (x)")
    try:
        compile(broken, "model.py", "exec")
    except SyntaxError as exc:
        error = exc
    line = lsp_lines(broken)[error.lineno - 1]
    start = {"line": error.lineno - 1, "character": len(line[: error.offset - 1].encode(_CODECS[encoding])) // _UNIT_BYTES[encoding]}
    uri = (tmp_path / "model.py").as_uri()
    client, _ = start_session(tmp_path, [encoding])
    try:
        assert [d["code"] for d in open_document(client, uri, valid)] == ["FDV104"]
        client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": broken}]}, request=False)
        [shown] = client.diagnostics()
        assert (shown["source"], shown["severity"], shown["range"]["start"]) == ("fixdev", 1, start)
        assert error.msg in shown["message"] and "code" not in shown
        assert code_actions(client, uri, shown["range"], [shown]) == []
        client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": valid}]}, request=False)
        assert [d["code"] for d in client.diagnostics()] == ["FDV104"]
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# Issue 26 item 6: the editor honours [tool.fixdev] exclude and the default excludes.
def test_excluded_files_get_no_diagnostics_and_no_fixes(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nexclude = ["legacy/", "*_gen.py"]\nunsafe-fixes = true\n')  # BUGGY's fix is unsafe
    files = {"src/model.py": True, "legacy/old.py": False, "src/model_gen.py": False, ".venv/lib/dep.py": False, "build/lib/model.py": False}
    client, _ = start_session(tmp_path)
    try:
        for name, checked in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(BUGGY)
            diagnostics = open_document(client, path.as_uri(), BUGGY)
            assert [d["code"] for d in diagnostics] == (["FDV101"] if checked else []), name
            whole = {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}}
            kinds = {a["kind"] for a in code_actions(client, path.as_uri(), whole, diagnostics)}
            assert kinds == ({"quickfix", "source.fixAll.fixdev"} if checked else set()), name
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# Issue 26, Ruff habits: "Disable FDVxxx for this line", merged into a # noqa there.
@pytest.mark.parametrize(
    "line, disabled",
    [
        ("    return x * torch.ones(x.shape)", "    return x * torch.ones(x.shape)  # noqa: FDV101"),
        ("    return x * torch.ones(x.shape)   ", "    return x * torch.ones(x.shape)  # noqa: FDV101"),
        ("    return x * torch.ones(x.shape)  # noqa: E501", "    return x * torch.ones(x.shape)  # noqa: E501, FDV101"),
        ("    return x * torch.ones(x.shape)  # é 😀", "    return x * torch.ones(x.shape)  # é 😀  # noqa: FDV101"),
    ],
)
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_disable_a_rule_for_this_line(tmp_path, line, disabled, encoding):
    text = BUGGY.replace("    return x * torch.ones(x.shape)", line).replace("\n", "\r\n")
    uri = (tmp_path / "model.py").as_uri()
    client, _ = start_session(tmp_path, [encoding])
    try:
        [found] = open_document(client, uri, text)
        actions = [a for a in code_actions(client, uri, found["range"], [found], ["quickfix"]) if a["title"] == "Disable FDV101 for this line"]
        assert len(actions) == 1 and actions[0]["diagnostics"] == [found]
        fixed = applied(text, actions[0]["edit"]["changes"][uri], encoding)
        assert fixed == text.replace(line, disabled)
        client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]}, request=False)
        assert client.diagnostics() == []
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# Issue 26, Ruff habits: each rule's documentation on hover, as --explain prints it.
def test_hover_shows_the_rules_documentation(tmp_path):
    text = "import torch\n\n\ndef f(x):\n    y = x.cuda()\n    return y * torch.ones(x.shape)\n"
    uri = (tmp_path / "model.py").as_uri()
    client, _ = start_session(tmp_path, ["utf-8"])
    try:
        diagnostics = open_document(client, uri, text)
        assert sorted(d["code"] for d in diagnostics) == ["FDV101", "FDV104"]
        for found in diagnostics:
            explained = subprocess.run([sys.executable, "-m", "fixdev", "--explain", found["code"]], capture_output=True, text=True, check=True).stdout
            for position in (found["range"]["start"], {"line": found["range"]["end"]["line"], "character": found["range"]["end"]["character"] - 1}):
                shown = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": position})["result"]
                assert shown["contents"] == {"kind": "markdown", "value": explained.rstrip("\n")}
                assert shown["range"] == found["range"]
        outside = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 2}})["result"]
        assert outside is None
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# Issue 26, Ruff habits: unused-noqa (FDV100) selected in the configuration.
def test_unused_noqa_selected_in_the_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nextend-select = ["FDV100"]\n')
    text = "import torch\n\n\ndef f(x, device):\n    y = x.to(device)  # noqa: E501, FDV104\n    return y.cuda()  # noqa: FDV104\n"
    uri = (tmp_path / "model.py").as_uri()
    client, _ = start_session(tmp_path, ["utf-8"])
    try:
        [found] = open_document(client, uri, text)
        assert (found["code"], found["range"]["start"], found["range"]["end"]) == ("FDV100", {"line": 4, "character": 22}, {"line": 4, "character": 42})
        assert "unused: `FDV104`" in found["message"]
        actions = code_actions(client, uri, found["range"], [found], ["quickfix"])
        fix = [a for a in actions if a["title"].startswith("Remove")]
        assert len(fix) == 1 and fix[0].get("isPreferred")
        fixed = applied(text, fix[0]["edit"]["changes"][uri], "utf-8")
        assert fixed == text.replace("  # noqa: E501, FDV104\n", "  # noqa: E501\n")
        client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]}, request=False)
        assert client.diagnostics() == []
        hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 5, "character": 8}})["result"]
        assert hover is None  # the finding is gone; the used noqa below is no finding
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# Issue 28 item 3: keys typed in a burst are analysed once, after the last,
# and the diagnostics say which version of the text they are for.
def test_a_burst_of_changes_is_analysed_once_for_its_last_version(tmp_path):
    uri = (tmp_path / "train.py").as_uri()
    base = "import torch\n\n\ndef f(x):\n    return x\n"
    client, _ = start_session(tmp_path)
    try:
        assert open_document(client, uri, base) == []
        body = b""
        for version in range(2, 7):  # five keys, sent as fast as a client can
            text = base + "y = torch.zeros(2).cuda()\n" * (version - 1)
            message = {"jsonrpc": "2.0", "method": "textDocument/didChange",
                       "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}}
            encoded = json.dumps(message).encode()
            body += b"Content-Length: %d\r\n\r\n" % len(encoded) + encoded
        client.proc.stdin.write(body)
        client.proc.stdin.flush()
        published = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")["params"]
        assert published["version"] == 6 and [d["code"] for d in published["diagnostics"]] == ["FDV104"] * 5
        # nothing more was waiting: the next message is the answer to this request
        request_id = client.send("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        assert client.receive().get("id") == request_id
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)


# The server as ``fixdev --lsp`` runs it, but its analysis of a text that
# holds SLOW_MARK takes two seconds more: the test decides which analysis is
# still running when a change comes, instead of hoping the machine is slow.
SLOW_MARK = "# analysed slowly"
SLOW_SERVER = f"""
import sys, time
import fixdev.interfaces.lsp as server
from fixdev.interfaces.cli import main
analyse = server.process_text
def slowly(path, source, *rest):
    if {SLOW_MARK!r} in source.text:
        time.sleep(2)
    return analyse(path, source, *rest)
server.process_text = slowly
sys.argv = ["fixdev", "--lsp"]
main()
"""


def test_a_result_for_an_older_version_is_never_sent_after_a_newer_one(tmp_path):
    """The analysis runs beside the server's event loop: a change that comes
    while an older text is analysed is read at once, and the older text's
    diagnostics, ready after it, are dropped, not sent as the document's."""
    uri = (tmp_path / "train.py").as_uri()
    base = "import torch\n\nx = torch.zeros(2).cuda()\n"
    client, _ = start_session(tmp_path, command=[sys.executable, "-c", SLOW_SERVER])
    try:
        open_document(client, uri, base)

        def change(version: int, text: str) -> None:
            client.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}, request=False)

        change(2, base + "a = torch.zeros(2).cuda()  " + SLOW_MARK + "\n")
        time.sleep(0.5)  # well past the debounce: version 2's two-second analysis has begun
        change(3, base + "a = torch.zeros(2).cuda()\nb = torch.zeros(2).cuda()\n")
        sent = []
        while not sent or sent[-1]["version"] != 3:
            sent.append(client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")["params"])
        assert [p["version"] for p in sent] == [3]
        assert sum(d["code"] == "FDV104" for d in sent[-1]["diagnostics"]) == 3
        request_id = client.send("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        assert client.receive().get("id") == request_id  # and nothing for version 2 came after
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)
