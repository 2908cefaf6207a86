"""Speed and memory of fixdev beside libcst's parser and TorchFix, in one run.

Builds the tree of the speed issue (a copy of torch's own ``nn``, ``optim``,
``distributions`` and ``utils`` packages) and prints, side by side: libcst
parse-only (one process), fixdev cold (empty cache), fixdev warm (nothing
changed), fixdev with one worker and no cache, and TorchFix when installed,
each as seconds and as a ratio to the parse time; with the peak memory of
each run's largest process, and whether the outputs match.

    python benchmarks/bench.py [--jobs N] [--keep DIR] [--torchfix PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = ("nn", "optim", "distributions", "utils")
MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True)
elapsed = time.perf_counter() - start
sys.stdout.buffer.write(done.stdout)
sys.stderr.write(f"\\n@@ {elapsed:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {done.returncode}\\n")
"""


def build_tree(target: Path) -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit('the benchmark needs torch installed (pip install "torch==2.13.0")')
    torch_dir = Path(next(iter(spec.submodule_search_locations)))
    for package in PACKAGES:
        shutil.copytree(torch_dir / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def measured(command: list[str], cwd: Path, env: dict) -> tuple[float, int, bytes, int]:
    """(seconds, peak KiB of the largest process, stdout, exit code)"""
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], cwd=cwd, env=env, capture_output=True)
    tail = done.stderr.decode().rsplit("@@ ", 1)[-1].split()
    return float(tail[0]), int(tail[1]), done.stdout, int(tail[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--keep", type=Path, help="build the tree here and keep it")
    parser.add_argument("--torchfix", default=shutil.which("torchfix"), help="the torchfix command (it pins libcst<1.6, so it may live in its own virtual environment)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="fixdev-bench-"))
    tree = build_tree(work / "tree") if not (work / "tree").exists() else work / "tree"
    files = sorted(tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    env = {**os.environ, "FIXDEV_CACHE_DIR": str(work / "cache"), "NO_COLOR": "1"}
    shutil.rmtree(work / "cache", ignore_errors=True)
    print(f"tree: {len(files)} files, {lines:,} lines ({', '.join(PACKAGES)} of torch); {os.cpu_count()} CPUs, --jobs {args.jobs}")

    parse = measured([sys.executable, "-c", "import sys, libcst\nfor p in sys.argv[1:]: libcst.parse_module(open(p, 'rb').read())", *map(str, files)], tree, env)
    fixdev = [sys.executable, "-m", "fixdev", "--check", "--output-format", "concise", "--quiet", "--jobs", str(args.jobs), "."]
    cold = measured(fixdev, tree, env)
    warm = measured(fixdev, tree, env)
    single = measured([*fixdev[:-2], "1", "--no-cache", "."], tree, env)
    rows = [("libcst parse only, 1 process", parse), ("fixdev cold (empty cache)", cold), ("fixdev warm (nothing changed)", warm), ("fixdev, 1 worker, no cache", single)]
    if args.torchfix:
        rows.append((f"TorchFix (--jobs {args.jobs})", measured([args.torchfix, "--jobs", str(args.jobs), "."], tree, env)))
    else:
        print("TorchFix is not installed (pip install torchfix, or --torchfix PATH): its row is left out")
    print(f"{'run':<32} {'seconds':>8} {'× parse':>8} {'peak MB':>8}")
    for name, (seconds, peak, _, _) in rows:
        print(f"{name:<32} {seconds:>8.2f} {seconds / parse[0]:>8.2f} {peak / 1024:>8.0f}")
    findings = cold[2].count(b"\n")
    print(f"findings: {findings}; cold output == one worker, no cache: {cold[2] == single[2]}; warm output == cold: {warm[2] == cold[2]}")
    print(f"goals: cold <= 1.0x parse: {cold[0] <= parse[0]}; warm <= 0.1x parse: {warm[0] <= 0.1 * parse[0]}; peak < 300 MB: {max(r[1][1] for r in rows[1:4]) < 300 * 1024}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
