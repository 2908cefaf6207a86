"""The result cache: hits for unchanged input, misses for any change that
could change the result."""

from __future__ import annotations

import pytest

from fixdev.files import cache
from fixdev.engine import core as engine
from fixdev.files.runner import Mode, Overrides, process_text
from fixdev.engine.source import Source

BUGGY = "import torch\nmask = torch.ones(x.shape)\n"


@pytest.fixture
def counted(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXDEV_CACHE_DIR", str(tmp_path / "cache"))
    calls = []
    real = engine.Engine.lint

    def lint(self, text, *rest, **keywords):
        calls.append(text)
        return real(self, text, *rest, **keywords)

    monkeypatch.setattr(engine.Engine, "lint", lint)
    return calls


def run(text=BUGGY, mode=Mode.CHECK, overrides=Overrides(), tmp=None):
    return process_text(tmp / "m.py", Source.from_text(text), mode, overrides, use_cache=True)


def test_unchanged_input_is_served_from_the_cache(counted, tmp_path):
    first = run(tmp=tmp_path)
    assert len(counted) == 1
    second = run(tmp=tmp_path)
    assert len(counted) == 1, "the second run must not lint"
    assert second.findings == first.findings and [f.code for f in second.findings] == ["FDV101"]
    assert (tmp_path / "cache" / ".gitignore").read_text().strip().endswith("*")


def test_changes_that_matter_miss(counted, tmp_path, monkeypatch):
    run(tmp=tmp_path)
    run(text=BUGGY + "y = 1\n", tmp=tmp_path)
    assert len(counted) == 2, "content"
    # A rule whose trigger the text matches: a file no selected rule's
    # trigger matches is answered without the engine, so lint would not count.
    run(overrides=Overrides(select=("FDV101",)), tmp=tmp_path)
    assert len(counted) == 3, "rules"
    run(mode=Mode.DIFF, tmp=tmp_path)
    assert len(counted) > 3, "mode"
    seen = len(counted)

    def run_with_fingerprint_changed(target, name, value):
        before = getattr(target, name)
        setattr(target, name, value)
        cache.code_fingerprint.cache_clear()
        try:
            run(tmp=tmp_path)
        finally:
            setattr(target, name, before)
            cache.code_fingerprint.cache_clear()

    run_with_fingerprint_changed(cache, "__version__", "9.9.9")
    assert len(counted) == seen + 1, "version"
    import importlib.metadata

    real = importlib.metadata.version
    run_with_fingerprint_changed(importlib.metadata, "version", lambda name: "0.0.1" if name == "libcst" else real(name))
    assert len(counted) == seen + 2, "libcst's version (its parser decides what is a syntax error)"


def test_a_syntax_error_is_served_from_the_cache(counted, tmp_path):
    broken = BUGGY + "y = (\n"
    first = run(text=broken, tmp=tmp_path)
    assert len(counted) == 1 and "was never closed" in first.error
    second = run(text=broken, tmp=tmp_path)
    assert len(counted) == 1, "the second run must not parse"
    assert second.error == first.error and second.findings == []


def test_options_are_part_of_the_key(counted, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.fixdev.rules.constant-buffer]\npersistent = true\n")
    from fixdev.files.config import nearest

    nearest.cache_clear()
    run(tmp=tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.fixdev.rules.constant-buffer]\npersistent = false\n")
    nearest.cache_clear()
    run(tmp=tmp_path)
    assert len(counted) == 2
    nearest.cache_clear()


def test_a_corrupt_entry_is_a_miss(counted, tmp_path):
    run(tmp=tmp_path)
    for entry in (tmp_path / "cache").rglob("*"):
        if entry.is_file() and entry.name != ".gitignore":
            entry.write_bytes(b"garbage")
    assert [f.code for f in run(tmp=tmp_path).findings] == ["FDV101"]
    assert len(counted) == 2


def test_no_cache_flag(tmp_path, fixdev):
    (tmp_path / "m.py").write_text(BUGGY)
    fixdev("--no-cache", "m.py", cwd=tmp_path)
    assert not (tmp_path / ".fixdev_cache").exists()
    fixdev("m.py", cwd=tmp_path)
    assert (tmp_path / ".fixdev_cache" / ".gitignore").exists()


def test_a_first_run_looks_nothing_up_and_the_next_is_served(counted, tmp_path, monkeypatch):
    """With no cache folder yet every lookup would miss: the files go straight
    to the analysis (no pass reading them all first). The next run is served."""
    from fixdev.files import parallel

    lookups = []
    real = parallel.process_file

    def process_file(path, *rest, cache_only=False, **options):
        if cache_only:
            lookups.append(path)
        return real(path, *rest, cache_only=cache_only, **options)

    monkeypatch.setattr(parallel, "process_file", process_file)
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"m{i}.py")
        paths[-1].write_text(BUGGY + f"y = {i}\n")
    first = [[f.code for f in r.findings] for r in parallel.process_files(paths, Mode.CHECK, Overrides(), jobs=1)]
    assert first == [["FDV101"]] * 3 and lookups == [] and len(counted) == 3
    again = [[f.code for f in r.findings] for r in parallel.process_files(paths, Mode.CHECK, Overrides(), jobs=1)]
    assert again == first and lookups == paths and len(counted) == 3


def test_a_cache_folder_removed_during_the_run_is_made_again(counted, tmp_path):
    """The process remembers the folders it made; one removed meanwhile (a
    user clearing the cache) is made again, and the entry is written."""
    import shutil

    run(tmp=tmp_path)
    shutil.rmtree(tmp_path / "cache")
    run(tmp=tmp_path)
    assert len(counted) == 2
    run(tmp=tmp_path)
    assert len(counted) == 2, "the entry written after the folder was removed serves"
    assert (tmp_path / "cache" / ".gitignore").exists()
    assert not list((tmp_path / "cache").rglob("*.tmp"))
