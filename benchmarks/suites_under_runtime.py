"""A project's own pytest suite run twice, plain and under ``fixdev --run``
(the virtual GPU), and the outcomes compared test by test.

    python benchmarks/suites_under_runtime.py REPO [--gpus 1] [--env K=V ...]
        [--plain-env K=V ...] [--runtime-env K=V ...] [--python PY] -- PYTEST_ARGS...

Both runs are ``PY -m pytest -q -p no:cacheprovider --junitxml=...
PYTEST_ARGS`` in REPO (PY: this Python by default; fixdev must be importable
from it); the second through ``PY -m fixdev --run --gpus N --``. ``--env`` is
set for both, ``--plain-env`` / ``--runtime-env`` for one (a suite that picks
its device from a variable: ``--plain-env TEST_DEVICE=cpu --runtime-env
TEST_DEVICE=cuda``). Each test falls in one of:

- same: one outcome in both (passed, failed, error or skipped);
- differ: run in both, outcomes differ (a device error the runtime caught,
  or a defect of the runtime: read each);
- runtime only: skipped in the plain run, run under the runtime (a GPU-only
  test no longer skipped), with its outcome;
- plain only: run plain, skipped under the runtime; missing: in one report only.

Every test that fails under the runtime with a device error's words (the
families ``--traceback`` knows) is listed with the message's first line.
Exit 0 when no test differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

DEVICE_WORDS = (
    "Expected all tensors to be on the same device", "should be the same", "device type tensor to numpy",
    "indices should be either on cpu", "are not at the same device", "Torch not compiled with CUDA enabled",
    "Expected a 'cuda' device type", "Expected a cuda device",
)


def outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """Test id -> (outcome, the first line of its message) from a junit xml."""
    results: dict[str, tuple[str, str]] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                text = child.get("message") or child.text or ""
                message = next((line for line in text.splitlines() if line.strip()), "")[:200]
                break
        if test in results and results[test][0] != "passed" and outcome == "passed":
            continue  # a teardown error reported as a second case of the same test
        results[test] = (outcome, message)
    return results


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, float, str]:
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return -1, time.monotonic() - started, (exc.stdout or b"").decode(errors="replace")
    return done.returncode, time.monotonic() - started, done.stdout.decode(errors="replace")


def compare(plain: dict, runtime: dict) -> dict[str, list]:
    table: dict[str, list] = {"same": [], "differ": [], "runtime only": [], "plain only": [], "missing": []}
    for test in sorted(set(plain) | set(runtime)):
        if test not in plain or test not in runtime:
            table["missing"].append((test, plain.get(test), runtime.get(test)))
            continue
        (was, _), (now, _) = plain[test], runtime[test]
        if was == now:
            table["same"].append(test)
        elif was == "skipped":
            table["runtime only"].append((test, plain[test], runtime[test]))
        elif now == "skipped":
            table["plain only"].append((test, plain[test], runtime[test]))
        else:
            table["differ"].append((test, plain[test], runtime[test]))
    return table


def device_errors(runtime: dict) -> list[tuple[str, str]]:
    return [(test, message) for test, (outcome, message) in sorted(runtime.items())
            if outcome in ("failed", "error") and any(words in message for words in DEVICE_WORDS)]


def pairs(items: list[str]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    parser.add_argument("--plain-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--runtime-env", action="append", default=[], metavar="K=V")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds each run may take")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.pytest_args = argv[cut + 1:]
    repo = args.repo.resolve()
    with tempfile.TemporaryDirectory(prefix="fixdev-suites-") as folder:
        reports = {name: Path(folder) / f"{name}.xml" for name in ("plain", "runtime")}
        results, seconds = {}, {}
        for name in ("plain", "runtime"):
            pytest = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={reports[name]}", *args.pytest_args]
            argv_ = pytest if name == "plain" else [args.python, "-m", "fixdev", "--run", "--gpus", str(args.gpus), "--", *pytest]
            env = dict(os.environ, **pairs(args.env), **pairs(args.plain_env if name == "plain" else args.runtime_env))
            code, seconds[name], output = run(argv_, repo, env, args.timeout)
            if not reports[name].is_file():
                print(f"{name} run wrote no report (exit {code}); its output's end:\n{output[-3000:]}")
                return 2
            results[name] = outcomes(reports[name])
            counts = {kind: sum(1 for outcome, _ in results[name].values() if outcome == kind)
                      for kind in ("passed", "failed", "error", "skipped")}
            print(f"{name}: exit {code}, {seconds[name]:.0f} s, {len(results[name])} tests: "
                  + ", ".join(f"{n} {kind}" for kind, n in counts.items()), flush=True)
    table = compare(results["plain"], results["runtime"])
    found = device_errors(results["runtime"])
    print(f"\n| repository | tests | same | differ | runtime only | plain only | missing | device errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {repo.name} | {len(set(results['plain']) | set(results['runtime']))} | "
          + " | ".join(str(len(table[kind])) for kind in ("same", "differ", "runtime only", "plain only", "missing"))
          + f" | {len(found)} |")
    for kind in ("differ", "runtime only", "plain only", "missing"):
        if table[kind]:
            print(f"\n{kind}:")
            for test, was, now in table[kind]:
                print(f"  {test}\n    plain: {was[0] + ' ' + was[1] if was else '-'}\n    runtime: {now[0] + ' ' + now[1] if now else '-'}")
    if found:
        print("\ndevice errors under the runtime:")
        for test, message in found:
            print(f"  {test}: {message}")
    return 1 if table["differ"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
