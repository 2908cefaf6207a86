"""fixdev --apply over a copy of the installed torch package: the real-code
robustness run. Prints the findings and fixes per rule, whether every file that
parsed before still parses, whether a second run changes anything, and whether
anything crashed.

    python benchmarks/torch_tree.py [--keep DIR] [--sample N]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="make the copy here and keep it")
    parser.add_argument("--sample", type=int, default=20, help="print this many rewrites, chosen at random, to read by hand")
    args = parser.parse_args()
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None:
        sys.exit('needs torch installed (pip install "torch==2.13.0")')
    work = args.keep or Path(tempfile.mkdtemp(prefix="fixdev-torch-"))
    tree = work / "torch"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(next(iter(spec.submodule_search_locations)), tree, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.a", "*.dylib", "lib", "include", "share", "bin"))
    files = sorted(tree.rglob("*.py"))
    before = {p: p.read_bytes() for p in files}
    parsed_before = {p for p, data in before.items() if parses(data)}
    env = {**os.environ, "FIXDEV_CACHE_DIR": str(work / "cache"), "NO_COLOR": "1"}

    start = time.perf_counter()
    # Run from the copy's parent: "python -m" puts the working folder on
    # sys.path, and torch's own "signal" package would shadow the stdlib's.
    first = subprocess.run([sys.executable, "-m", "fixdev", "--apply", "--no-cache", "--output-format", "json", "torch"], cwd=work, env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    items = json.loads(first.stdout or b"[]")
    after = {p: p.read_bytes() for p in files}
    changed = [p for p in files if after[p] != before[p]]
    broken = [p for p in parsed_before if not parses(after[p])]
    second = subprocess.run([sys.executable, "-m", "fixdev", "--diff", "--no-cache", "torch"], cwd=work, env=env, capture_output=True)
    errors = [line for line in first.stderr.decode().splitlines() if ": error: " in line]

    print(f"{len(files)} files, {sum(d.count(10) for d in before.values()):,} lines; first run {elapsed:.0f} s, exit {first.returncode}")
    per_rule = collections.Counter((i["code"], i["name"], bool(i["fix"] and i["fix"]["applied"]), i["fix"] is not None) for i in items)
    print(f"{'rule':<28} {'fixed':>6} {'reported':>9}")
    for code, name in sorted({(c, n) for c, n, _, _ in per_rule}):
        fixed = sum(v for (c, n, applied, _), v in per_rule.items() if c == code and applied)
        reported = sum(v for (c, n, applied, _), v in per_rule.items() if c == code and not applied)
        print(f"{code} {name:<21} {fixed:>6} {reported:>9}")
    print(f"files changed: {len(changed)}; files that parsed before and no longer do: {len(broken)}")
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


if __name__ == "__main__":
    main()
