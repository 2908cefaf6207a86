"""The pre-commit hooks of .pre-commit-hooks.yaml, as a user runs them:
``pre-commit try-repo`` on a committed repository, from this checkout (its
uncommitted changes included). pre-commit is in the test extra: a missing
one fails at import, never skips."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pre_commit  # noqa: F401  (the test extra installs it)

ROOT = Path(__file__).resolve().parent.parent
BUGGY = "import torch\n\n\ndef f(x):\n    return x * torch.ones(x.shape)\n"


def _notebook(source: str) -> str:
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [], "source": source.splitlines(keepends=True)}
    kernel = {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": kernel, "cells": [cell]}, indent=1) + "\n"


def test_hooks_honour_exclude_and_check_notebooks(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "NO_COLOR": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q")
    # unsafe-fixes: BUGGY's fix (FDV101) is unsafe, and the hook applies only safe ones unless configured.
    (repo / "pyproject.toml").write_text('[tool.fixdev]\nexclude = ["legacy/"]\nunsafe-fixes = true\n')
    git("add", ".")
    git("commit", "-qm", "init")
    (repo / "legacy").mkdir()
    (repo / "legacy" / "old.py").write_text(BUGGY)
    (repo / "nb.ipynb").write_text(_notebook(BUGGY))
    git("add", ".")  # staged: what pre-commit names on the hooks' command lines
    # Both hooks, in the file's order: fixdev rewrites, then fixdev-check sees what is left.
    result = subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(ROOT)], cwd=repo, env=env, capture_output=True, timeout=600)
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 1, out  # the fixing hook changed a file
    assert (repo / "legacy" / "old.py").read_text() == BUGGY, "an excluded staged file is left alone"
    assert "torch.ones_like(x)" in "".join(json.loads((repo / "nb.ipynb").read_text())["cells"][0]["source"]), "the notebook is fixed"
    lines = {line.split(".")[0]: line.rsplit(".", 1)[-1] for line in out.splitlines() if line.startswith("fixdev (")}
    assert lines == {"fixdev (fix PyTorch device bugs)": "Failed", "fixdev (check only)": "Passed"}, out
