"""Speed and memory of fixdev beside libcst's parser (and TorchFix), in one run.

Two trees: a copy of torch's own ``nn``, ``optim``, ``distributions`` and
``utils`` packages, and real training code: the ``.py`` files of the public
PyTorch repositories listed, at fixed commits, in ``benchmarks/real_code.toml``.
The machine may be offline: ``--real-code DIR`` names folders holding clones
or bare mirrors (``owner+name``, ``owner+name/repo`` or ``name``); each
repository is read at its listed commit (``git archive``), or, from a folder
that is not a git checkout, copied as it is (said in the output).

For each tree it prints libcst parse-only (one process), fixdev ``--check``
cold (empty cache), warm (nothing changed), with one worker and no cache, and
TorchFix when installed, as seconds, as ratios to the parse time and as the
peak memory of the largest process; and it checks that the cold, warm and
one-worker outputs are identical (exit 1 if not). Then the latency of one
file, as ratios to a bare ``python -c pass`` (median of 5): a file no rule's
trigger matches, and a small file with a finding.

With ``--repeat N`` each tree's rows are measured N times, taken in turn, and
the medians shown: this machine's speed can drift by a fifth between runs.

    python benchmarks/bench.py [--jobs N] [--repeat N] [--keep DIR] [--real-code DIR ...] [--baseline DIR] [--torchfix PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

PACKAGES = ("nn", "optim", "distributions", "utils")
REAL_CODE = Path(__file__).with_name("real_code.toml")
MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True)
elapsed = time.perf_counter() - start
sys.stdout.buffer.write(done.stdout)
sys.stderr.write(f"\\n@@ {elapsed:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {done.returncode}\\n")
"""
# One file each for the latency rows: nothing any rule's trigger matches, and
# a small training snippet with one finding (a hard-coded .cuda()).
NO_TRIGGER = "import math\n\n\ndef area(r):\n    return math.pi * r * r\n\n\nprint(area(2.0))\n"
WITH_FINDING = "import torch\n\nmodel = torch.nn.Linear(4, 2)\nx = torch.randn(8, 4)\nmodel.cuda()\nprint(model(x).sum())\n"
TARGETS = {"cold": 0.5, "warm": 0.05, "peak_mb": 200, "no_trigger": 8.0, "with_finding": 15.0}


def build_torch_tree(target: Path) -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit('the benchmark needs torch installed (pip install "torch==2.13.0")')
    torch_dir = Path(next(iter(spec.submodule_search_locations)))
    for package in PACKAGES:
        shutil.copytree(torch_dir / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _git_dir(folder: Path, commit: str) -> Path | None:
    """The git directory in ``folder`` (a clone or a bare mirror) that holds ``commit``."""
    for candidate in (folder / ".git", folder):
        done = subprocess.run(["git", "--git-dir", str(candidate), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
        if done.returncode == 0:
            return candidate
    return None


def _extract_python(git_dir: Path, commit: str, into: Path) -> None:
    """The commit's .py files under ``into``. Blob by blob, not ``git
    archive``: a mirror may lack a repository's large data files."""
    git = ["git", "--git-dir", str(git_dir)]
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", commit], capture_output=True, check=True).stdout.split(b"\0")
    blobs = []
    for entry in filter(None, listing):
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000" and path.endswith(b".py"):
            blobs.append((sha, os.fsdecode(path)))
    batch = subprocess.run([*git, "cat-file", "--batch"], input=b"".join(sha + b"\n" for sha, _ in blobs), capture_output=True, check=True).stdout
    at = 0
    for sha, path in blobs:
        header_end = batch.index(b"\n", at)
        header = batch[at:header_end].split()
        if header[-1] == b"missing":
            raise SystemExit(f"{git_dir}: {path} is missing from the mirror")
        size = int(header[2])
        data = batch[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
        (into / path).parent.mkdir(parents=True, exist_ok=True)
        (into / path).write_bytes(data)


def build_real_tree(target: Path, sources: list[Path]) -> tuple[list[str], list[str]]:
    """Each listed repository's .py files under ``target/owner+name``.
    Returns (what was found, with how; what was missing)."""
    listed = tomllib.loads(REAL_CODE.read_text())["repo"]
    found, missing = [], []
    for entry in listed:
        name, commit = entry["name"], entry["commit"]
        owner_name = name.replace("/", "+")
        folders = [f for s in sources for f in (s / owner_name / "repo", s / owner_name, s / name.split("/")[1]) if f.is_dir()]
        into = target / owner_name
        for folder in folders:
            git_dir = _git_dir(folder, commit)
            if git_dir is not None:
                _extract_python(git_dir, commit, into)
                found.append(f"{name}@{commit[:10]}")
                break
            if not (folder / ".git").exists() and folder.name != "repo":
                for path in folder.rglob("*.py"):
                    (into / path.relative_to(folder).parent).mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, into / path.relative_to(folder))
                found.append(f"{name} (plain folder, commit not checked)")
                break
        else:
            missing.append(name)
    return found, missing


# libcst parsing every file; one it cannot parse (Python 2 code in a real
# repository) costs its attempt and the loop goes on.
PARSE_ALL = """\
import sys, libcst
for p in sys.argv[1:]:
    try:
        libcst.parse_module(open(p, 'rb').read())
    except Exception:
        pass
"""


def timed_env(**extra: str) -> dict:
    """The environment measured runs get: fixdev's modules read from their
    compiled ``.pyc``, as an installed fixdev's are (pip compiles them at
    install), even where PYTHONDONTWRITEBYTECODE is set (then every start
    would compile fixdev's source again: about 0.3 s a process here)."""
    env = {**os.environ, "NO_COLOR": "1", **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_fixdev(*roots: Path) -> None:
    """Writes the ``.pyc`` files of fixdev (this one, and ``roots``) once."""
    import fixdev
    import fixdev.codemods

    for folder in (Path(fixdev.__file__).parent, Path(fixdev.codemods.__file__).parent, *roots):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(folder)], env=timed_env(), check=False)


def measured(command: list[str], cwd: Path, env: dict) -> tuple[float, int, bytes, int]:
    """(seconds, peak KiB of the largest process, stdout, exit code)"""
    done = subprocess.run([sys.executable, "-c", MEASURE, *command], cwd=cwd, env=env, capture_output=True)
    tail = done.stderr.decode().rsplit("@@ ", 1)[-1].split()
    return float(tail[0]), int(tail[1]), done.stdout, int(tail[2])


def bench_tree(title: str, tree: Path, work: Path, jobs: int, torchfix: str | None, baseline: Path | None = None, repeat: int = 1) -> list[str]:
    """Prints the tree's table; returns what failed. With ``repeat`` > 1 every
    row is measured that many times, the rows taken in turn each round (so a
    slow spell of the machine touches them all alike), and the medians are shown."""
    files = sorted(tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    cache = work / f"cache-{tree.name}"
    env = timed_env(FIXDEV_CACHE_DIR=str(cache))
    rounds = f", median of {repeat} rounds" if repeat > 1 else ""
    print(f"\n{title}: {len(files)} files, {lines:,} lines; {os.cpu_count()} CPUs, --jobs {jobs}{rounds}")
    fixdev = [sys.executable, "-m", "fixdev", "--check", "--output-format", "concise", "--quiet", "--jobs", str(jobs), "."]
    one_worker = [*fixdev[:-2], "1", "--no-cache", "."]
    old_env = {**env, "PYTHONPATH": str(baseline), "FIXDEV_CACHE_DIR": str(cache) + "-baseline"} if baseline else None
    runs: dict[str, list[tuple[float, int, bytes, int]]] = {}

    def add(name: str, run: tuple[float, int, bytes, int]) -> None:
        runs.setdefault(name, []).append(run)

    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        add("libcst parse only, 1 process", measured([sys.executable, "-c", PARSE_ALL, *map(str, files)], tree, env))
        add(f"fixdev cold, {jobs} workers", measured(fixdev, tree, env))
        add("fixdev warm (nothing changed)", measured(fixdev, tree, env))
        add("fixdev, 1 worker, no cache", measured(one_worker, tree, env))
        if old_env is not None:
            # Another fixdev (a checkout's root, put first on PYTHONPATH), for before/after in one run.
            shutil.rmtree(old_env["FIXDEV_CACHE_DIR"], ignore_errors=True)
            add(f"baseline cold, {jobs} workers", measured(fixdev, tree, old_env))
            add("baseline warm", measured(fixdev, tree, old_env))
            add("baseline, 1 worker, no cache", measured(one_worker, tree, old_env))
    if torchfix:  # once: it is slow, and far from the targets
        add(f"TorchFix (--jobs {jobs})", measured([torchfix, "--jobs", str(jobs), "."], tree, env))
    parse_runs = runs["libcst parse only, 1 process"]
    rows = []  # (name, (median seconds, peak KiB, stdout, exit code), median × parse, each round's × parse)
    for name, measured_runs in runs.items():
        ratios = [r[0] / parse_run[0] for r, parse_run in zip(measured_runs, parse_runs)]  # each to its own round's parse
        summary = (statistics.median(r[0] for r in measured_runs), max(r[1] for r in measured_runs), measured_runs[0][2], measured_runs[0][3])
        rows.append((name, summary, statistics.median(ratios), ratios))
    parse, cold, warm, single = (row[1] for row in rows[:4])
    outputs = {(r[2], r[3]) for name, measured_runs in runs.items() if name.startswith("fixdev") for r in measured_runs}
    spread = "  rounds' × parse" if repeat > 1 else ""
    print(f"{'run':<32} {'seconds':>8} {'× parse':>8} {'peak MB':>8}{spread}")
    for name, (seconds, peak, _, _), times, ratios in rows:
        each = "  " + " ".join(f"{r:.3f}" for r in ratios) if len(ratios) > 1 else ""
        print(f"{name:<32} {seconds:>8.2f} {times:>8.3f} {peak / 1024:>8.0f}{each}")
    peak_mb = max(r[1][1] for r in rows[1:4]) / 1024
    findings = cold[2].count(b"\n")
    print(f"findings: {findings}; exit codes cold/warm/one worker: {cold[3]}/{warm[3]}/{single[3]}")
    cold_ratio, warm_ratio = (row[2] for row in rows[1:3])
    print(f"targets: cold <= {TARGETS['cold']}x parse: {cold_ratio <= TARGETS['cold']}; warm <= {TARGETS['warm']}x parse: "
          f"{warm_ratio <= TARGETS['warm']}; peak <= {TARGETS['peak_mb']} MB: {peak_mb <= TARGETS['peak_mb']}")
    failed = []
    if len(outputs) > 1:
        failed.append(f"{title}: the outputs differ between cold, warm and one-worker runs (or between rounds)")
    if baseline:
        print(f"baseline output == this fixdev's: {all((r[2], r[3]) == (cold[2], cold[3]) for r in runs[f'baseline cold, {jobs} workers'])}")
    # 2: some file could not be read or parsed (real repositories hold Python 2
    # files); each is one error line on stderr, and the outputs are compared above.
    if cold[3] not in (0, 1, 2):
        failed.append(f"{title}: fixdev exited {cold[3]}")
    return failed


def latency(work: Path, baseline: Path | None = None) -> None:
    """One file, cold (no cache): medians of 5, as ratios to ``python -c pass``."""
    folder = work / "one-file"
    folder.mkdir(exist_ok=True)
    (folder / "plain.py").write_text(NO_TRIGGER)
    (folder / "train.py").write_text(WITH_FINDING)
    env = timed_env()

    def median(command: list[str], env: dict = env) -> float:
        return statistics.median(measured(command, folder, env)[0] for _ in range(5))

    base = median([sys.executable, "-c", "pass"])
    rows = [("python -c pass", base, None)]
    for label, name, key in (("no trigger matches", "plain.py", "no_trigger"), ("small file, one finding", "train.py", "with_finding")):
        command = [sys.executable, "-m", "fixdev", "--check", "--no-cache", name]
        rows.append((f"fixdev --check {name} ({label})", median(command), key))
        if baseline:
            rows.append(("  the same, baseline", median(command, {**env, "PYTHONPATH": str(baseline)}), None))
    print("\none file, no cache, median of 5:")
    print(f"{'run':<52} {'seconds':>8} {'× pass':>8} {'target':>8}")
    for name, seconds, key in rows:
        target = f"<= {TARGETS[key]:g}" if key else ""
        print(f"{name:<52} {seconds:>8.3f} {seconds / base:>8.1f} {target:>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--keep", type=Path, help="build the trees here and keep them")
    parser.add_argument("--real-code", type=Path, action="append", default=[], metavar="DIR",
                        help="a folder of clones or bare mirrors of the repositories in benchmarks/real_code.toml (repeatable)")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="another fixdev's source root (fixdev/ inside, with fixdev/codemods), timed beside this one")
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="measure each tree's rows N times, in turn, and show the medians")
    parser.add_argument("--torchfix", default=shutil.which("torchfix"), help="the torchfix command (it pins libcst<1.6, so it may live in its own virtual environment)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="fixdev-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    torch_tree = work / "torch" if (work / "torch").exists() else build_torch_tree(work / "torch")
    real_tree = work / "real"
    if not real_tree.exists():
        found, missing = build_real_tree(real_tree, args.real_code)
        print(f"real code: {len(found)} of {len(found) + len(missing)} repositories: {', '.join(found) or 'none'}")
        if missing:
            print(f"missing (give --real-code DIR holding clones of them): {', '.join(missing)}")
    compile_fixdev(*([args.baseline] if args.baseline else []))
    if not args.torchfix:
        print("TorchFix is not installed (pip install torchfix, or --torchfix PATH): its rows are left out")
    failed = bench_tree(f"torch ({', '.join(PACKAGES)})", torch_tree, work, args.jobs, args.torchfix, args.baseline, args.repeat)
    if any(real_tree.rglob("*.py")):
        failed += bench_tree("real training code", real_tree, work, args.jobs, args.torchfix, args.baseline, args.repeat)
    else:
        print("\nreal training code: no repository found; its table is left out")
    latency(work, args.baseline)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        sys.exit("FAILED: " + "; ".join(failed))


if __name__ == "__main__":
    main()
