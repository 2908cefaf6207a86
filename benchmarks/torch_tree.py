"""fixdev --apply over a copy of the installed torch package (or of other
trees): the real-code robustness run. Prints the findings and fixes per rule,
whether every file that parsed before still parses, whether any changed file
gained an undefined name (pyflakes, before against after), whether a second run
changes anything, and whether anything crashed. Exits 1 when a rewrite broke
a file or added an undefined name.

    python benchmarks/torch_tree.py [--tree DIR ...] [--keep DIR] [--sample N]
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path


def parses(data: bytes) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(data)
            return True
        except (SyntaxError, ValueError):
            return False


# pyflakes messages that mean "this name may not exist when the line runs".
UNDEFINED = ("UndefinedName", "UndefinedLocal", "UndefinedExport", "ImportStarUsage")


def undefined_names(data: bytes, filename: str) -> collections.Counter:
    """pyflakes' undefined-name messages, without positions, so the same
    message before and after a rewrite cancels out."""
    from pyflakes.checker import Checker

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            return collections.Counter()
    messages = Checker(tree, filename=filename).messages
    return collections.Counter(m.message % m.message_args for m in messages if type(m).__name__ in UNDEFINED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append", help="a tree to copy and fix instead of the torch package (repeatable)")
    parser.add_argument("--keep", type=Path, help="make the copy here and keep it")
    parser.add_argument("--sample", type=int, default=20, help="print this many rewrites, chosen at random, to read by hand")
    args = parser.parse_args()
    try:
        import pyflakes  # noqa: F401
    except ImportError:
        sys.exit("needs pyflakes (pip install pyflakes, or the test extra)")
    sources = args.tree
    skipped = ["__pycache__", ".git"]
    if not sources:
        skipped += ["*.so", "*.a", "*.dylib", "lib", "include", "share", "bin"]  # torch's binaries
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None:
            sys.exit('needs torch installed (pip install "torch==2.13.0")')
        sources = [Path(next(iter(spec.submodule_search_locations)))]
    work = args.keep or Path(tempfile.mkdtemp(prefix="fixdev-tree-"))
    tree = work / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    for source in sources:
        # torch's own "signal" package would shadow the stdlib's if the copy's
        # folder were on sys.path: fixdev runs from the copy's parent
        shutil.copytree(source, tree / source.name, ignore=shutil.ignore_patterns(*skipped))
    files = sorted(tree.rglob("*.py"))
    before = {p: p.read_bytes() for p in files}
    parsed_before = {p for p, data in before.items() if parses(data)}
    env = {**os.environ, "FIXDEV_CACHE_DIR": str(work / "cache"), "NO_COLOR": "1"}

    start = time.perf_counter()
    # Run from the copy's parent: "python -m" puts the working folder on
    # sys.path, and torch's own "signal" package would shadow the stdlib's.
    first = subprocess.run([sys.executable, "-m", "fixdev", "--apply", "--no-cache", "--output-format", "json", "tree"], cwd=work, env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    items = json.loads(first.stdout or b"[]")
    after = {p: p.read_bytes() for p in files}
    changed = [p for p in files if after[p] != before[p]]
    broken = [p for p in parsed_before if not parses(after[p])]
    new_undefined = {}
    for path in changed:
        gained = undefined_names(after[path], str(path)) - undefined_names(before[path], str(path))
        if gained:
            new_undefined[path] = sorted(gained)
    second = subprocess.run([sys.executable, "-m", "fixdev", "--diff", "--no-cache", "tree"], cwd=work, env=env, capture_output=True)
    errors = [line for line in first.stderr.decode().splitlines() if ": error: " in line]

    print(f"{len(files)} files, {sum(d.count(10) for d in before.values()):,} lines; first run {elapsed:.0f} s, exit {first.returncode}")
    per_rule = collections.Counter((i["code"], i["name"], bool(i["fix"] and i["fix"]["applied"]), i["fix"] is not None) for i in items)
    print(f"{'rule':<28} {'fixed':>6} {'reported':>9}")
    for code, name in sorted({(c, n) for c, n, _, _ in per_rule}):
        fixed = sum(v for (c, n, applied, _), v in per_rule.items() if c == code and applied)
        reported = sum(v for (c, n, applied, _), v in per_rule.items() if c == code and not applied)
        print(f"{code} {name:<21} {fixed:>6} {reported:>9}")
    print(f"files changed: {len(changed)}; files that parsed before and no longer do: {len(broken)}")
    print(f"changed files with a new undefined name (pyflakes): {len(new_undefined)}")
    for path, messages in sorted(new_undefined.items()):
        print(f"  {path.relative_to(work)}: {'; '.join(messages)}")
    print(f"errors reported (one line each): {len(errors)}")
    for line in errors[:10]:
        print(f"  {line}")
    print(f"traceback in output: {'Traceback' in first.stderr.decode() + second.stderr.decode()}")
    print(f"second run: exit {second.returncode}, files it would change: {second.stdout.decode().count('--- a/')}")
    rng = random.Random(0)
    applied = [i for i in items if i["fix"] and i["fix"]["applied"]]
    for item in rng.sample(applied, min(args.sample, len(applied))):
        path = work / item["filename"]
        line = before[path].decode("utf-8", "replace").splitlines()[item["location"]["row"] - 1]
        edits = "; ".join(repr(e["content"]) for e in item["fix"]["edits"])
        print(f"\n{item['filename']}:{item['location']['row']} {item['code']}\n  - {line.strip()}\n  + edits: {edits}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if broken or new_undefined:
        sys.exit(1)


if __name__ == "__main__":
    main()
