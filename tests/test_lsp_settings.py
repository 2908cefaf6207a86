"""The editor's settings (issue 28): ``select``, ``ignore`` and ``unsafeFixes``
sent as ``initializationOptions`` and ``workspace/didChangeConfiguration``,
as the VS Code extension sends them, and ``configurationPreference`` deciding
which wins against ``[tool.fixdev]``. Through a real client over stdio."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pygls", reason='the language server needs pip install -e ".[test]"')

from tests.test_lsp import Client  # noqa: E402

# like-factory (FDV101, an unsafe fix: ones_like takes x's dtype) and
# cuda-call (a safe fix: only the device changes) in one file.
TWO_FIXES = """\
import torch


def blank(x):
    return x + torch.ones(x.shape)


def move(x):
    y = x.cuda()
    return y
"""
UNSAFE_FIXED = "torch.ones_like(x)"
SAFE_FIXED = "y = x.to(device)"


class Session:
    def __init__(self, root: Path, options=None) -> None:
        self.root, self.client = root, Client(root)
        init = {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}
        if options is not None:
            init["initializationOptions"] = options
        self.client.request("initialize", init)
        self.client.send("initialized", {}, request=False)

    def open(self, name: str, text: str) -> tuple[str, list]:
        path = self.root / name
        path.write_text(text)
        uri = path.as_uri()
        self.client.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}, request=False)
        return uri, self.client.diagnostics()

    def codes(self, diagnostics: list) -> list[str]:
        return sorted(d["code"] for d in diagnostics)

    def fix_all(self, uri: str) -> str | None:
        whole = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
        actions = self.client.request(
            "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": whole, "context": {"diagnostics": [], "only": ["source.fixAll.fixdev"]}}
        )["result"]
        return actions[0]["edit"]["changes"][uri][0]["newText"] if actions else None

    def configure(self, settings) -> None:
        self.client.send("workspace/didChangeConfiguration", {"settings": settings}, request=False)

    def close(self) -> None:
        self.client.proc.kill()
        self.client.proc.wait(timeout=30)


@pytest.fixture
def session_in(tmp_path):
    sessions = []

    def start(options=None) -> Session:
        sessions.append(Session(tmp_path, options))
        return sessions[-1]

    yield start
    for session in sessions:
        session.close()


def test_no_settings_runs_every_rule(session_in):
    session = session_in()
    _, diagnostics = session.open("train.py", TWO_FIXES)
    assert session.codes(diagnostics) == ["FDV101", "FDV104"]


@pytest.mark.parametrize(
    "options, codes",
    [
        ({"select": ["cuda-call"]}, ["FDV104"]),
        ({"ignore": ["FDV104"]}, ["FDV101"]),
        ({"select": ["FDV1"], "ignore": ["like-factory"]}, ["FDV104"]),
        ({"select": [], "ignore": []}, ["FDV101", "FDV104"]),  # empty lists, as a settings UI leaves them: not set
        ({"select": None, "unsafeFixes": None}, ["FDV101", "FDV104"]),
    ],
)
def test_initialization_options_select_and_ignore(session_in, options, codes):
    session = session_in(options)
    _, diagnostics = session.open("train.py", TWO_FIXES)
    assert session.codes(diagnostics) == codes


def test_unsafe_fixes_setting_decides_what_fix_all_applies(session_in):
    session = session_in({"unsafeFixes": True})
    uri, _ = session.open("train.py", TWO_FIXES)
    fixed = session.fix_all(uri)
    assert SAFE_FIXED in fixed and UNSAFE_FIXED in fixed
    session.configure({"fixdev": {"unsafeFixes": False}})
    session.client.diagnostics()  # the re-published diagnostics: the settings are in
    fixed = session.fix_all(uri)
    assert SAFE_FIXED in fixed and UNSAFE_FIXED not in fixed


def test_did_change_configuration_republishes_open_documents(session_in):
    session = session_in()
    _, diagnostics = session.open("train.py", TWO_FIXES)
    assert session.codes(diagnostics) == ["FDV101", "FDV104"]
    # The section by name, as VS Code's client sends it...
    session.configure({"fixdev": {"ignore": ["cuda-call"]}})
    assert session.codes(session.client.diagnostics()) == ["FDV101"]
    # ...or the settings themselves; each message replaces the last whole.
    session.configure({"select": ["FDV104"]})
    assert session.codes(session.client.diagnostics()) == ["FDV104"]
    session.configure({})
    assert session.codes(session.client.diagnostics()) == ["FDV101", "FDV104"]


@pytest.mark.parametrize(
    "preference, codes, unsafe_applied",
    [
        # editorFirst (the default): the editor's settings over the file's, as
        # flags over it on the command line.
        (None, ["FDV101"], False),
        ("editorFirst", ["FDV101"], False),
        # filesystemFirst: a [tool.fixdev] table wins; the editor's settings
        # are not used for the files it governs.
        ("filesystemFirst", ["FDV104"], True),
    ],
)
def test_configuration_preference_against_tool_fixdev(session_in, tmp_path, preference, codes, unsafe_applied):
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nselect = ["cuda-call"]\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("[tool.fixdev]\nunsafe-fixes = true\n")
    options = {"select": ["like-factory"], "unsafeFixes": False}
    if preference:
        options["configurationPreference"] = preference
    session = session_in(options)
    _, diagnostics = session.open("train.py", TWO_FIXES)
    assert session.codes(diagnostics) == codes
    session.configure({"fixdev": {**options, "select": None}})  # every rule from here on
    uri, _ = session.open("sub/train.py", TWO_FIXES)
    assert (UNSAFE_FIXED in session.fix_all(uri)) is unsafe_applied


def test_filesystem_first_uses_the_editors_settings_where_no_table_governs(session_in, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no [tool.fixdev]
    session = session_in({"select": ["like-factory"], "configurationPreference": "filesystemFirst"})
    _, diagnostics = session.open("train.py", TWO_FIXES)
    assert session.codes(diagnostics) == ["FDV101"]


@pytest.mark.parametrize(
    "bad, said",
    [
        ({"select": ["FDV999"]}, "unknown rule code"),
        ({"ignore": ["ALL"]}, "no rule left to run"),
        ({"ignore": "FDV101"}, "must be a list"),
        ({"unsafeFixes": "yes"}, "unsafeFixes must be"),
        ({"configurationPreference": "editorOnly"}, "configurationPreference must be"),
    ],
)
def test_bad_settings_are_told_and_the_last_good_ones_kept(session_in, bad, said):
    session = session_in({"select": ["cuda-call"]})
    _, diagnostics = session.open("train.py", TWO_FIXES)
    assert session.codes(diagnostics) == ["FDV104"]
    session.configure({"fixdev": bad})
    shown = session.client.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]
    assert shown["type"] == 1 and said in shown["message"]  # 1: Error
    uri, diagnostics = session.open("other.py", TWO_FIXES)
    assert session.codes(diagnostics) == ["FDV104"]


def test_bad_initialization_options_are_told(session_in):
    session = session_in({"select": ["no-such-rule"]})
    shown = session.client.wait_for(lambda m: m.get("method") == "window/showMessage")["params"]
    assert shown["type"] == 1 and "no-such-rule" in shown["message"]
    _, diagnostics = session.open("train.py", TWO_FIXES)
    assert session.codes(diagnostics) == ["FDV101", "FDV104"]  # the defaults


def test_settings_reach_notebook_cells(session_in, tmp_path):
    session = session_in({"ignore": ["like-factory"]})
    cells = ["import torch\n", "def blank(x):\n    return x + torch.ones(x.shape)\n", "y = torch.zeros(3).cuda()\n"]
    notebook = (tmp_path / "nb.ipynb").as_uri()
    session.client.send(
        "notebookDocument/didOpen",
        {
            "notebookDocument": {
                "uri": notebook, "notebookType": "jupyter-notebook", "version": 1,
                "cells": [{"kind": 2, "document": f"{notebook}#cell{i}"} for i in range(len(cells))],
            },
            "cellTextDocuments": [{"uri": f"{notebook}#cell{i}", "languageId": "python", "version": 1, "text": text} for i, text in enumerate(cells)],
        },
        request=False,
    )
    published = {}
    while len(published) < len(cells):
        message = session.client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")["params"]
        published[message["uri"]] = sorted(d["code"] for d in message["diagnostics"])
    assert published == {f"{notebook}#cell0": [], f"{notebook}#cell1": [], f"{notebook}#cell2": ["FDV104"]}
