import os
from pathlib import Path

from fixdev.discovery import Missing, discover


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
