"""Time and peak memory of fixdev on one generated file of many findings.

The file is ``import torch`` and N lines ``x{i} = torch.zeros(3).cuda()``
(45,000 lines: 1,383,904 characters, under the 2,000,000-character limit),
each a finding with a fix. For each N it runs, in a fresh process each, one
worker, no cache, on a fresh copy of the file:

- ``fixdev --no-cache -j 1 --check FILE`` (the full format),
- ``fixdev --no-cache -j 1 --check --output-format json FILE``,
- ``fixdev --no-cache -j 1 --apply FILE``,

and prints seconds (wall), CPU seconds (user and system: on a busy machine
the wall time mostly measures the wait for a CPU), peak memory of the
process (MB) and the exit code; the first line of what it printed to stderr
(a refused file's error) is shown. A file whose cost grows faster than its
findings shows here: CPU time is also given per thousand findings.

``--calibrate FILE ...`` measures instead what the memory budget
(``fixdev/engine/budget.py``) rests on: for each file, its ast nodes (as the
budget counts them) and the peak memory of ``--check`` and ``--apply`` less
that of a two-line file, per node; the file's own findings do not matter.
Files over the budget are refused, so set ``FIXDEV_MAX_NODES`` high to
measure them.

``--baseline DIR`` times another fixdev (a source root: ``fixdev/`` inside,
with ``fixdev/codemods``) beside this one, as ``benchmarks/bench.py`` does.

    python benchmarks/bigfile.py [--sizes 500,1000,2000,5000,45000] [--modes check,json,apply] [--baseline DIR] [--timeout S]
    python benchmarks/bigfile.py --calibrate FILE ...
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
try:
    done = subprocess.run(sys.argv[2:], capture_output=True, timeout=float(sys.argv[1]))
    code, out, err = done.returncode, done.stdout, done.stderr
except subprocess.TimeoutExpired as exc:
    code, out, err = "timeout", exc.stdout or b"", exc.stderr or b""
elapsed = time.perf_counter() - start
sys.stdout.buffer.write(err)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.write(f"\\n@@ {elapsed:.3f} {usage.ru_utime + usage.ru_stime:.3f} {usage.ru_maxrss} {code}\\n")
"""
MODES = {
    "check": ["--check"],
    "json": ["--check", "--output-format", "json"],
    "apply": ["--apply"],
}


def generate(lines: int) -> str:
    return "import torch\n\n" + "".join(f"x{i} = torch.zeros(3).cuda()\n" for i in range(lines))


def measured(args: list[str], cwd: Path, env: dict, timeout: float) -> tuple[float, float, float, str, str]:
    """(seconds, CPU seconds, peak MB of the fixdev process, exit code, first line of stderr)"""
    command = [sys.executable, "-m", "fixdev", "--no-cache", "-j", "1", *args]
    done = subprocess.run([sys.executable, "-c", MEASURE, str(timeout), *command], cwd=cwd, env=env, capture_output=True, text=True)
    err, _, tail = done.stdout.rpartition("@@ ")
    seconds, cpu, kib, code = tail.split()
    first = next((line for line in err.splitlines() if line.strip()), "")
    return float(seconds), float(cpu), int(kib) / 1024, code, first


def environment(source: Path | None) -> dict:
    env = dict(os.environ)
    env.pop("FIXDEV_CACHE_DIR", None)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return env


def bench(sizes: list[int], modes: list[str], baseline: Path | None, timeout: float) -> None:
    runs = [("this fixdev", None)] + ([("baseline", baseline)] if baseline else [])
    print("| fixdev | findings | mode | seconds | CPU seconds | CPU s per 1,000 | peak MB | exit | stderr |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |")
    with tempfile.TemporaryDirectory() as work:
        work_dir = Path(work)
        for size in sizes:
            text = generate(size)
            for mode in modes:
                for title, source in runs:
                    path = work_dir / f"gen{size}.py"
                    path.write_text(text)
                    seconds, cpu, peak, code, first = measured([*MODES[mode], path.name], work_dir, environment(source), timeout)
                    shown = first if len(first) < 90 else first[:87] + "..."
                    print(f"| {title} | {size:,} | {' '.join(MODES[mode])} | {seconds:.1f} | {cpu:.1f} | {cpu / size * 1000:.2f} | {peak:.0f} | {code} | {shown} |", flush=True)


def calibrate(files: list[Path], timeout: float) -> None:
    sys.path.insert(0, str(ROOT))
    from fixdev.engine.budget import count_nodes

    env = environment(None)
    env.setdefault("FIXDEV_MAX_NODES", str(10**9))
    with tempfile.TemporaryDirectory() as work:
        work_dir = Path(work)
        small = work_dir / "small.py"
        small.write_text("import torch\nx = torch.zeros(3).cuda()\n")
        base = {mode: measured([*MODES[mode], small.name], work_dir, env, timeout)[2] for mode in ("check", "apply")}
        print(f"a two-line file: --check {base['check']:.0f} MB, --apply {base['apply']:.0f} MB")
        print("| file | characters | nodes | --check MB | bytes per node | --apply MB | bytes per node |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for file in files:
            text = file.read_text(encoding="utf-8")
            nodes = count_nodes(ast.parse(text))
            row = [file.name, f"{len(text):,}", f"{nodes:,}"]
            for mode in ("check", "apply"):
                copy = work_dir / file.name
                shutil.copyfile(file, copy)
                _, _, peak, _, _ = measured([*MODES[mode], copy.name], work_dir, env, timeout)
                row += [f"{peak:.0f}", f"{(peak - base[mode]) * 2**20 / nodes:,.0f}"]
            print("| " + " | ".join(row) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,1000,2000,5000,45000", help="numbers of findings (lines), comma-separated")
    parser.add_argument("--modes", default="check,json,apply", help=f"some of {', '.join(MODES)}, comma-separated")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="another fixdev's source root, timed beside this one")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a run is stopped (shown as 'timeout')")
    parser.add_argument("--calibrate", type=Path, nargs="+", metavar="FILE", help="measure bytes per ast node on these files instead")
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args.calibrate, args.timeout)
        return
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s): {', '.join(unknown)}")
    bench([int(s) for s in args.sizes.split(",")], modes, args.baseline, args.timeout)


if __name__ == "__main__":
    main()
