"""A Language Server Protocol session as an editor runs it: JSON-RPC over pipes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason='the language server needs pip install -e ".[test]"')

BUGGY = "import torch\n\n\ndef f(x):\n    return x * torch.ones(x.shape)\n"


class Client:
    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "fixdev", "--lsp"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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


def test_editor_session(tmp_path):
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
        fix_all = [a for a in actions if a["kind"] == "source.fixAll.fixdev"]
        assert fix_all and "torch.ones_like(x)" in fix_all[0]["edit"]["changes"][uri][0]["newText"]

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
        assert [a["kind"] for a in actions or []] == kinds
    finally:
        client.proc.kill()
        client.proc.wait(timeout=30)
