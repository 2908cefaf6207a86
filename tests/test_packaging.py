"""The package users install: the rules live under ``fixdev.codemods``, and
nothing is installed as a generic top-level ``codemods`` package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_installs_rules_under_fixdev_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("fixdev-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"fixdev"}
    assert "fixdev/codemods/cuda_call.py" in names
    # Every module of every subpackage ships: a package left out of
    # pyproject.toml's list would install a fixdev that cannot import it.
    modules = {f"fixdev/{p.relative_to(ROOT / 'fixdev').as_posix()}" for p in (ROOT / "fixdev").rglob("*.py") if "__pycache__" not in p.parts}
    modules |= {f"fixdev/codemods/{p.name}" for p in (ROOT / "codemods").glob("*.py")}
    assert "fixdev/analysis/flow/facts.py" in modules
    assert modules <= set(names), sorted(modules - set(names))


def test_installed_layout_imports_outside_the_checkout(tmp_path: Path) -> None:
    # Run from elsewhere, so the checkout's folders are not on sys.path.
    probe = (
        "import importlib.util, fixdev.codemods, fixdev.engine.registry as r\n"
        "assert importlib.util.find_spec('codemods') is None\n"
        "print(len(r.all_rules()), r.all_rules()[0].__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    count, module = out.split()
    assert int(count) >= 6 and module.startswith("fixdev.codemods.")
