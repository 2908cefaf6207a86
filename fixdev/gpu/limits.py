"""What the virtual GPU does not model, said in one line when a program
reaches it, instead of a crash deep inside torch.

Decided per item (``install`` patches each; the runtime's ``uninstall``
undoes them):

- ``torch.distributed.init_process_group`` with the NCCL backend: there is
  no NCCL on a CPU build and no second GPU process to talk to. The program
  cannot go on: it stops there (``SystemExit`` with the line: exit 1).
- ``torch.utils.cpp_extension.load`` / ``load_inline`` with CUDA sources
  (``.cu`` files, ``cuda_sources=``, ``with_cuda=True``): a CUDA kernel
  cannot run on the CPU. It stops there too. C++-only extensions build and
  load as usual.
- ``torch.compile`` (any backend: inductor would generate CUDA code for a
  tensor it is told is on the GPU) and ``nn.Module.compile``: the function
  or module runs eagerly, said once; device errors are still caught.
- ``torch.autocast("cuda")`` and ``torch.cuda.amp.autocast``: run as the
  CPU's autocast in the same dtype (float16 unless given, as CUDA's
  default), said once: which ops are cast and their precision follow the
  CPU's lists, not CUDA's. ``GradScaler`` runs as is.
- ``torch._scaled_mm`` (float8 matmul): runs with the CPU's kernel, said
  once: a GPU needs compute capability 8.9 or more for it (the virtual GPU
  says 8.0) and its bits may differ.

The message names the line of the program that reached the limit.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

PREFIX = "fixdev: the virtual GPU does not model"
_SAID: set[str] = set()


def _caller() -> str:
    """The innermost frame outside torch and fixdev: the program's line."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        if "/torch/" not in name and "/fixdev/gpu/" not in name and not name.startswith("<frozen"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def stop(what: str) -> None:
    """The program cannot go on past this: one line, exit 1."""
    raise SystemExit(f"{PREFIX} {what} (at {_caller()}); stopping here")


def note(key: str, what: str) -> None:
    """Said once per process; the program goes on."""
    if key in _SAID:
        return
    _SAID.add(key)
    sys.stderr.write(f"{PREFIX} {what} (first at {_caller()})\n")
    sys.stderr.flush()


def install(torch: Any, patch: Callable[[Any, str, Any], None]) -> None:
    _patch_distributed(torch, patch)
    _patch_compile(torch, patch)
    _patch_autocast(torch, patch)
    _patch_scaled_mm(torch, patch)
    _patch_extensions_on_import(patch)


def _patch_distributed(torch: Any, patch: Callable[[Any, str, Any], None]) -> None:
    distributed = getattr(torch, "distributed", None)
    if distributed is None or not hasattr(distributed, "init_process_group"):
        return
    original = distributed.init_process_group

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        if backend is not None and "nccl" in str(backend).lower():
            stop(f"torch.distributed with the NCCL backend ({backend!r}): NCCL, DDP across processes and collectives "
                 "between GPUs do not run on it; test the distributed path on a GPU machine, or use backend='gloo' here")
        return original(backend, *args, **kwargs)

    patch(distributed, "init_process_group", init_process_group)


def _patch_compile(torch: Any, patch: Callable[[Any, str, Any], None]) -> None:
    def say() -> None:
        note("compile", "torch.compile: the code runs eagerly, uncompiled (its device errors are still caught)")

    def compile(model: Any = None, **kwargs: Any) -> Any:
        say()
        if model is None:  # @torch.compile(mode=...)
            return lambda fn: fn
        return model

    def module_compile(self: Any, *args: Any, **kwargs: Any) -> None:
        say()

    patch(torch, "compile", compile)
    patch(torch.nn.Module, "compile", module_compile)


def _patch_autocast(torch: Any, patch: Callable[[Any, str, Any], None]) -> None:
    autocast = torch.amp.autocast_mode.autocast
    original = autocast.__init__

    def init(self: Any, device_type: str, dtype: Any = None, enabled: bool = True, cache_enabled: Any = None) -> None:
        if device_type == "cuda":
            dtype = torch.float16 if dtype is None else dtype
            note("autocast", f"CUDA autocast: torch.autocast(\"cuda\") runs as the CPU's autocast in {str(dtype).removeprefix('torch.')} "
                             "(which ops are cast, and their precision, follow the CPU's lists)")
            device_type = "cpu"
        original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    patch(autocast, "__init__", init)


def _patch_scaled_mm(torch: Any, patch: Callable[[Any, str, Any], None]) -> None:
    original = getattr(torch, "_scaled_mm", None)
    if original is None:
        return

    def scaled_mm(*args: Any, **kwargs: Any) -> Any:
        note("float8", "float8 matmul on CUDA: torch._scaled_mm runs with the CPU's kernel (a GPU needs compute "
                       "capability 8.9 or more for it, and its results may differ in bits)")
        return original(*args, **kwargs)

    patch(torch, "_scaled_mm", scaled_mm)


_EXTENSION = "torch.utils.cpp_extension"


def _patch_extensions(module: Any, patch: Callable[[Any, str, Any], None]) -> None:
    load, load_inline = module.load, module.load_inline

    def cuda_load(name: str, sources: Any, *args: Any, **kwargs: Any) -> Any:
        files = [sources] if isinstance(sources, str) else list(sources)
        if kwargs.get("with_cuda") or any(str(f).endswith((".cu", ".cuh")) for f in files):
            stop(f"a custom CUDA extension (torch.utils.cpp_extension.load of {name!r} with CUDA sources): its kernels need a real GPU")
        return load(name, sources, *args, **kwargs)

    def cuda_load_inline(name: str, cpp_sources: Any, cuda_sources: Any = None, *args: Any, **kwargs: Any) -> Any:
        if cuda_sources or kwargs.get("with_cuda"):
            stop(f"a custom CUDA extension (torch.utils.cpp_extension.load_inline of {name!r} with cuda_sources): its kernels need a real GPU")
        return load_inline(name, cpp_sources, cuda_sources, *args, **kwargs)

    patch(module, "load", cuda_load)
    patch(module, "load_inline", cuda_load_inline)


class _Switch:
    """Whether a runtime is installed (set through ``patch``, so the
    runtime's uninstall turns it off): the import hook acts only then."""

    on = False
    finder: Any = None


def _patch_extensions_on_import(patch: Callable[[Any, str, Any], None]) -> None:
    """``torch.utils.cpp_extension`` costs 0.6 s to import (setuptools):
    patched when the program imports it, not before."""
    patch(_Switch, "on", True)
    module = sys.modules.get(_EXTENSION)
    if module is not None:
        _patch_extensions(module, patch)
        return
    if _Switch.finder is not None:
        return
    import importlib.abc
    import importlib.machinery

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name != _EXTENSION or not _Switch.on:
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return None
            execute = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                execute(module)
                if _Switch.on:
                    _patch_extensions(module, patch)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    _Switch.finder = Finder()
    sys.meta_path.insert(0, _Switch.finder)
