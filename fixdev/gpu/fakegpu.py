"""A fake CUDA GPU for CPU-only machines: ``--probe``, the ``fake_gpu`` pytest
fixture and fixdev's own tests run code here as if on a GPU.

``fake_gpu()`` makes ``torch.cuda.is_available()`` true and runs code under
``FakeTensorMode``: tensors moved to ``"cuda"`` carry metadata but no data, and
mixing a ``cuda:0`` tensor with a non-scalar CPU tensor raises the error real
CUDA raises. ``DeviceCheck`` closes the gap for ops whose fake kernels do not
compare devices (convolutions). A no-op CUDA device guard
(``noop_cuda_guard.cpp`` beside this file), compiled once into a user cache
folder, lets ``.to("cuda")``, indexing and ``copy_`` run.

Only the probe and the fixture import this module, and it imports torch only
inside its functions: fixdev itself never needs torch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

SKIP_VARIABLE = "FIXDEV_SKIP_FAKECUDA"
GUARD_FILE = Path(__file__).with_name("noop_cuda_guard.cpp")
GUARD_SOURCE = GUARD_FILE.read_text()
# What a device mismatch on the fake GPU (or a real one) says, for tests.
MISMATCH = r"same device|Expected all tensors|should be the same|Expected object of|can't convert cuda|indices should be either on cpu"
_guard_loaded = False


class FakeGpuUnavailable(Exception):
    """What the fake GPU needs is missing; the message says what to install."""


def missing_toolchain() -> list[str]:
    """What the fake GPU needs and this machine lacks, as install hints."""
    missing = []
    try:
        import torch  # noqa: F401
    except ImportError:
        missing.append("torch (install the torch build you use first, e.g. pip install torch==2.13.0; fixdev[probe] does not pull one)")
    else:
        if _guard_built():
            return missing  # built once: neither ninja nor a compiler is needed again
    if shutil.which("ninja") is None:
        try:
            import ninja  # noqa: F401
        except ImportError:
            missing.append("ninja (pip install ninja)")
    if shutil.which("c++") is None and shutil.which("g++") is None:
        missing.append("a C++ compiler, once (apt-get install g++; or copy ~/.cache/fixdev/ from a machine with the same torch that built it)")
    return missing


def require() -> None:
    """Raise ``FakeGpuUnavailable`` naming what to install, if anything."""
    missing = missing_toolchain()
    if missing:
        raise FakeGpuUnavailable(f"the fake GPU needs {', '.join(missing)}")


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    import torch

    folder = base / "fixdev" / f"cuda-guard-torch-{torch.__version__}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


_LIBRARY = "fixdev_noop_cuda_guard_v2"


def _built_library() -> Path | None:
    """The guard library built earlier from today's source, if any."""
    folder = cache_dir()
    library, source = folder / f"{_LIBRARY}.so", folder / "noop_cuda_guard.cpp"
    if library.is_file() and source.is_file() and source.read_text() == GUARD_SOURCE:
        return library
    return None


def _guard_built() -> bool:
    return _built_library() is not None


def load_guard() -> None:
    global _guard_loaded
    if _guard_loaded:
        return
    import torch

    built = _built_library()
    if built is not None:
        # What load() ends with, without asking ninja and the compiler
        # whether anything changed: a copied cache works without them.
        torch.ops.load_library(str(built))
        _guard_loaded = True
        return
    from torch.utils.cpp_extension import load

    try:  # the PyPI ninja may live beside this Python rather than on PATH
        import ninja

        os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])
    except (ImportError, AttributeError):
        pass
    # load() of a .cpp file, not load_inline(): load_inline prepends
    # torch/extension.h, whose headers take most of a cold build (~45 s → ~10 s)
    folder = cache_dir()
    source = folder / "noop_cuda_guard.cpp"
    if not source.is_file() or source.read_text() != GUARD_SOURCE:
        # Atomically: processes that start together (pytest -n auto) may all
        # build, and none may read a half-written source.
        partial = folder / f"noop_cuda_guard.{os.getpid()}.tmp"
        partial.write_text(GUARD_SOURCE)
        os.replace(partial, source)
    load(name=_LIBRARY, sources=[str(source)], build_directory=str(folder), is_python_module=False, verbose=False)
    _guard_loaded = True


def _device_check_mode():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    copies = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default, torch.ops.aten.lift_fresh.default}

    class DeviceCheck(TorchDispatchMode):
        """Raises when one op gets non-scalar tensors on two devices, as CUDA does."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            __tracebackhide__ = True  # pytest shows the user's line, not this check
            kwargs = kwargs or {}
            if func is torch.ops.aten.index.Tensor:
                # reading by index: indices on the CPU or on the indexed tensor's device
                indexed, indices = args[0], args[1]
                if any(isinstance(i, torch.Tensor) and i.device.type != "cpu" and i.device != indexed.device for i in indices):
                    raise RuntimeError(f"indices should be either on cpu or on the same device as the indexed tensor ({indexed.device})")
            if func not in copies:
                devices = set()
                stack = [*args, *kwargs.values()]
                while stack:
                    item = stack.pop()
                    if isinstance(item, torch.Tensor):
                        if item.dim() > 0 and not (item.device.type == "cpu" and item.dtype in (torch.int64, torch.int32, torch.bool) and "index" in str(func)):
                            devices.add(str(item.device))
                    elif isinstance(item, (list, tuple)):
                        stack.extend(item)
                if len(devices) > 1:
                    raise RuntimeError(
                        f"Expected all tensors to be on the same device, but found at least two devices, {', '.join(sorted(devices))}! ({func})"
                    )
            return func(*args, **kwargs)

    return DeviceCheck()


class NumpyOfDeviceTensor(TypeError, RuntimeError):
    """Real CUDA's error for ``.numpy()`` of a GPU tensor is a TypeError; this
    one is also a RuntimeError, the error the fake-GPU checks expect of every
    device mismatch."""


def _fake_numpy():
    """``Tensor.numpy`` as a CUDA build answers it, for fake tensors (which
    have no data): a tensor on the GPU refuses with real CUDA's message, one
    that requires grad (grad enabled) too; a CPU tensor gives zeros of its
    shape and dtype. Real tensors are left to the real method."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _disable_current_modes

    real = torch.Tensor.numpy

    def numpy(self, *, force=False):
        if not isinstance(self, FakeTensor):
            return real(self, force=force)
        if force:
            self = self.detach().cpu()
        if self.device.type != "cpu":
            raise NumpyOfDeviceTensor(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")
        if torch.is_grad_enabled() and self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        with _disable_current_modes():
            return torch.zeros(tuple(self.shape), dtype=self.dtype).numpy()

    return numpy


@contextlib.contextmanager
def _optimizers_follow_moves() -> Iterator[None]:
    """Optimizers step the parameters their model was moved to, as on CUDA.

    A real move changes each parameter in place (``param.data = ...``), so an
    optimizer made before the move steps the moved parameters, while the state
    it already holds (loaded by ``load_state_dict``) stays where it was. Under
    ``FakeTensorMode`` a move makes new ``Parameter`` objects instead; this
    points the optimizers made so far at them, their state left alone. It also
    answers the CUDA-graph check ``step()`` makes: no stream is capturing."""
    import weakref
    from unittest import mock

    import torch

    optimizers: weakref.WeakSet = weakref.WeakSet()
    init, apply = torch.optim.Optimizer.__init__, torch.nn.Module._apply

    def remembering_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        optimizers.add(self)

    def moving_apply(self, fn, recurse=True):
        before = dict(self._parameters)
        result = apply(self, fn, recurse)
        moved = {id(old): self._parameters[key] for key, old in before.items() if old is not None and self._parameters.get(key) is not old}
        for optimizer in list(optimizers) if moved else ():
            for group in optimizer.param_groups:
                group["params"] = [moved.get(id(p), p) for p in group["params"]]
            for old in [p for p in optimizer.state if id(p) in moved]:
                optimizer.state[moved[id(old)]] = optimizer.state.pop(old)
        return result

    class Stream:
        def is_capturing(self) -> bool:
            return False

    with mock.patch.object(torch.optim.Optimizer, "__init__", remembering_init), mock.patch.object(torch.nn.Module, "_apply", moving_apply):
        if getattr(torch, "accelerator", None) is not None and hasattr(torch.accelerator, "current_stream"):
            with mock.patch("torch.accelerator.current_stream", return_value=Stream()):
                yield
        else:
            yield


@contextlib.contextmanager
def cuda_available() -> Iterator[None]:
    """Only the availability checks: what code sees at import time."""
    from unittest import mock

    import torch

    patches = [mock.patch("torch.cuda.is_available", return_value=True)]
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        patches.append(mock.patch("torch.accelerator.is_available", return_value=True))
        patches.append(mock.patch("torch.accelerator.current_accelerator", return_value=torch.device("cuda")))
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


@contextlib.contextmanager
def fake_gpu(grad: bool = False) -> Iterator[None]:
    """Run the body as if on a CUDA machine. Build modules before entering;
    move them (``model.to("cuda")``) inside; optimizers made before a move
    step the moved parameters. Autograd is off unless ``grad``."""
    load_guard()
    from unittest import mock

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils.data import dataloader

    iterator_init = dataloader._BaseDataLoaderIter.__init__

    def init_without_fake_modes(self, loader):
        # A DataLoader iterator draws its base seed with .item(), which fake
        # tensors cannot answer; the seed has nothing to do with devices.
        with _disable_current_modes():
            iterator_init(self, loader)

    with cuda_available(), mock.patch.object(FakeTensorMode, "avoid_device_init", True), mock.patch.object(
        dataloader._BaseDataLoaderIter, "__init__", init_without_fake_modes
    ), mock.patch.object(torch.Tensor, "numpy", _fake_numpy()), _optimizers_follow_moves():
        with FakeTensorMode(allow_non_fake_inputs=True), _device_check_mode(), torch.set_grad_enabled(grad):
            yield
