import os
from pathlib import Path

from fixdev.files.discovery import Missing, discover


def names(items, root):
    return sorted(p.relative_to(root).as_posix() if not isinstance(p, Missing) else f"missing:{p.path}" for p in items)


def make(root: Path, *files: str) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def test_walk_skips_default_excludes_and_gitignored(tmp_path):
    make(tmp_path, "a.py", "b.txt", "pkg/c.py", ".venv/lib/d.py", "build/e.py", "__pycache__/f.py", "gen/g.py", "pkg/keep.py", "pkg/drop.py")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("gen/\n")
    (tmp_path / "pkg" / ".gitignore").write_text("drop.py\n")
    assert names(discover([tmp_path], exclude_root=tmp_path), tmp_path) == ["a.py", "pkg/c.py", "pkg/keep.py"]


def test_gitignore_above_the_given_folder_applies(tmp_path):
    make(tmp_path, "src/a.py", "src/generated/b.py")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n")
    assert names(discover([tmp_path / "src"], exclude_root=tmp_path), tmp_path) == ["src/a.py"]


def test_exclude_globs_and_explicit_files(tmp_path):
    make(tmp_path, "a.py", "legacy/old.py", ".venv/x.py")
    found = discover([tmp_path, tmp_path / ".venv" / "x.py"], excludes=["legacy/"], exclude_root=tmp_path)
    assert names(found, tmp_path) == [".venv/x.py", "a.py"]


def test_missing_paths_are_reported(tmp_path):
    found = list(discover([tmp_path / "nope.py"]))
    assert isinstance(found[0], Missing) and "no such file" in found[0].message


def test_links_are_not_followed_out_of_the_tree_and_files_come_once(tmp_path):
    outside = tmp_path / "outside"
    make(outside, "secret.py")
    tree = tmp_path / "tree"
    make(tree, "a.py")
    os.symlink(outside, tree / "linked_dir")
    os.symlink(outside / "secret.py", tree / "linked_file.py")
    os.symlink(tree / "a.py", tree / "alias.py")
    assert names(discover([tree, tree / "a.py"], exclude_root=tree), tree) == ["a.py"]


# Issue 10 item 6
def test_config_exclude_is_applied_relative_to_its_pyproject(tmp_path, fixdev):
    project = tmp_path / "project"
    bug = "import torch\ny = torch.ones(x.shape)\n"
    for name in ("m.py", "src/legacy/old.py", "src/api_pb2.py", "other/src/legacy/kept.py"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(bug)
    # `src/legacy/` has a slash: anchored at the pyproject.toml's folder, not at the current one.
    (project / "pyproject.toml").write_text('[tool.fixdev]\nexclude = ["src/legacy/", "*_pb2.py"]\n')
    result = fixdev("--output-format", "concise", "project", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in result.stdout.decode().splitlines()) == ["project/m.py", "project/other/src/legacy/kept.py"]
    # A file named on the command line is still processed, as with --exclude.
    named = fixdev("--output-format", "concise", "project/src/api_pb2.py", cwd=tmp_path)
    assert named.stdout.decode().startswith("project/src/api_pb2.py:2:5: FDV101")


def test_config_exclude_of_a_nearer_pyproject_governs_its_folder(tmp_path, fixdev):
    bug = "import torch\ny = torch.ones(x.shape)\n"
    for name in ("a/gen.py", "b/gen.py", "b/keep.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(bug)
    (tmp_path / "pyproject.toml").write_text('[tool.fixdev]\nexclude = ["a/"]\n')
    (tmp_path / "b" / "pyproject.toml").write_text('[tool.fixdev]\nexclude = ["gen.py"]\n')
    result = fixdev("--output-format", "concise", ".", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in result.stdout.decode().splitlines()) == ["b/keep.py"]
