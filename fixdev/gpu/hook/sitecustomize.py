"""Installs fixdev's virtual GPU in every Python process that starts with
this folder on PYTHONPATH (``fixdev --run`` puts it there), so that the
command's subprocesses (DataLoader workers under spawn, ``python -m``
children) get it too; then runs the ``sitecustomize`` this one hides.

Python skips it under ``-I``, ``-E`` (PYTHONPATH ignored) and ``-S`` (no site)."""

import importlib.machinery
import importlib.util
import os
import sys


def _install() -> None:
    gpus = os.environ.get("FIXDEV_RUN_GPUS")
    if gpus is None:
        return
    try:
        from fixdev.gpu import runtime
    except ImportError as exc:  # another Python than fixdev's: say so, run without the runtime
        sys.stderr.write(f"fixdev --run: this Python cannot import fixdev ({exc}); the virtual GPU is not installed\n")
        return
    runtime.install(int(gpus))
    runtime.report_uncaught(os.environ.get("FIXDEV_RUN_REPORT"))


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_install()
_chain()
