"""A virtual GPU with real values (``fixdev --run``): tensors on ``cuda:N`` are
real CPU tensors that are on ``cuda:N`` as far as the program can tell.

Design (b) of issue 27: a ``TorchFunctionMode`` keeps each tensor's device
as a tag on its *storage* (a ``WeakKeyDictionary`` keyed by
``untyped_storage()``, which torch preserves as one Python object per
storage). A tag on the tensor object would be lost through
``nn.Parameter(...)``, ``.data =`` and ``Module._apply``; they all keep the
storage. Kernels, autograd and optimizers stay the CPU's own, so values,
``backward()`` and ``.item()`` are real and no compiler is needed.

The mode answers ``Tensor.device`` and friends from the tag, places the
results of ``.cuda()`` / ``.to("cuda")`` / ``device="cuda"`` factories, tags
every op's outputs with its inputs' device, and raises PyTorch's own errors
when one op mixes a device tensor with a non-scalar CPU tensor. While it is
installed, ``torch.cuda``'s queries (``is_available``, ``device_count``,
memory, seeding, ``synchronize``) are patched; ``uninstall`` restores them.
Threads started through ``threading`` enter the mode too (a mode is per
thread), and a ``torch.set_default_device`` / ``with torch.device(...)``
context's device is given to the factories it covers.

torch is imported only when ``install`` is called: ``fixdev.gpu`` is
imported by pytest in every run and by the CLI.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fixdev.gpu import checkpoints, parallel, rng, tags
from fixdev.gpu.tags import allocated, storage_of, tag_of
from fixdev.gpu.tags import tag as _tag

CPU_WHEEL = "Torch not compiled with CUDA enabled"  # what a CPU wheel says at the first CUDA call

# legacy type names, as PyTorch prints them in "Input type (...)" messages
_LEGACY = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long", "int32": "Int",
           "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
_CONVOLUTIONS = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution"})


class DeviceError(RuntimeError):
    """A device mismatch the virtual GPU caught, worded as PyTorch words it.
    A RuntimeError, as PyTorch's own, so ``except RuntimeError`` still catches it."""

    fixdev_device_error = True

    def __reduce__(self):  # pickled (to another process) as the builtin it prints as
        return RuntimeError, self.args


class NumpyDeviceError(TypeError):
    """``.numpy()`` of a device tensor: a TypeError, as in PyTorch."""

    fixdev_device_error = True

    def __reduce__(self):
        return TypeError, self.args


# A traceback prints them as PyTorch's own (``RuntimeError: ...``), so logs
# and ``--traceback`` read them as they would read a GPU's.
for _error, _shown in ((DeviceError, "RuntimeError"), (NumpyDeviceError, "TypeError")):
    _error.__module__, _error.__qualname__ = "builtins", _shown


class _State:
    """The runtime's one installation: the mode, the patches it undoes."""

    def __init__(self) -> None:
        self.mode: Any = None
        self.patched: list[tuple[Any, str, Any]] = []
        self.undo: list[Any] = []  # what removes the checkpoint tagger and loader
        self.gpus = 0
        self.current = 0
        self.generators: Any = None


_STATE = _State()


def installed() -> bool:
    return _STATE.mode is not None


def install(gpus: int = 1) -> None:
    """Install the virtual GPU with ``gpus`` devices in this thread (0: a
    CPU-only machine, where CUDA calls raise as on a CPU wheel)."""
    if gpus < 0:
        raise ValueError("gpus must be 0 or more")
    if installed():
        uninstall()
    import torch

    _STATE.gpus, _STATE.current = gpus, 0
    _STATE.generators = rng.Generators(torch, gpus, _index)
    mode = _build_mode(torch)()
    _patch_cuda(torch, gpus)
    _STATE.undo.append(checkpoints.register(torch, gpus))
    parallel.install(torch, _patch, _under_mode)
    _patch_threads()
    from fixdev.gpu import limits, workers

    workers.install(torch, _patch, tag_of, _tag, trimmed)
    limits.install(torch, _patch)
    mode.__enter__()
    _STATE.mode = mode


def _leave(mode: Any) -> None:
    """Take ``mode`` off this thread's stack, wherever it is (a
    ``torch.set_default_device`` in the thread put its context below it)."""
    from torch.overrides import _get_current_function_mode_stack, _pop_mode, _push_mode

    stack = _get_current_function_mode_stack()
    if mode not in stack:
        return
    above = []
    while True:
        top = _pop_mode()
        if top is mode:
            break
        above.append(top)
    for item in reversed(above):
        _push_mode(item)


def _under_mode(call: Any) -> Any:
    """``call()`` with the mode on this thread's stack (the autograd engine
    runs the Python it calls back without it)."""
    from torch.overrides import _get_current_function_mode_stack

    mode = _STATE.mode
    if mode is None or mode in _get_current_function_mode_stack():
        return call()
    with mode:
        return call()


def _patch_threads() -> None:
    """A TorchFunctionMode is per thread: a thread the program starts (a
    prefetch thread, a ``concurrent.futures`` worker, a DataLoader's pin
    thread) enters the mode first. ``Thread._bootstrap_inner`` runs in the
    new thread before ``run()``, so subclasses that override ``run`` get it too."""
    import threading

    started = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def bootstrap(thread: Any) -> None:
        mode = _STATE.mode
        if mode is None:
            return started(thread)
        mode.__enter__()
        try:
            started(thread)
        finally:
            # left while the thread still holds the GIL: a mode left on a
            # finished thread's stack aborts the process at exit
            _leave(mode)

    _patch(threading.Thread, "_bootstrap_inner", bootstrap)


def uninstall() -> None:
    """Leave the mode and restore every patched attribute."""
    mode, _STATE.mode = _STATE.mode, None
    if mode is not None:
        mode.__exit__(None, None, None)
    for owner, name, value in reversed(_STATE.patched):
        setattr(owner, name, value)
    _STATE.patched.clear()
    while _STATE.undo:
        _STATE.undo.pop()()


class virtual_gpu:
    """``with virtual_gpu(gpus=1):`` the runtime installed for a block."""

    def __init__(self, gpus: int = 1) -> None:
        self.gpus = gpus

    def __enter__(self) -> "virtual_gpu":
        install(self.gpus)
        return self

    def __exit__(self, *exc) -> None:
        uninstall()


# ---------------------------------------------------------------------------
# torch.cuda's queries, answered for the virtual devices
# ---------------------------------------------------------------------------


def _patch(owner: Any, name: str, value: Any) -> None:
    if hasattr(owner, name):
        # a class's own entry as it is (a classmethod stays one when restored)
        own = isinstance(owner, type) and name in owner.__dict__
        _STATE.patched.append((owner, name, owner.__dict__[name] if own else getattr(owner, name)))
        setattr(owner, name, value)


def _index(device: Any = None) -> int:
    """A device argument of a torch.cuda query as an index, checked."""
    import torch

    if device is None:
        return _STATE.current
    if isinstance(device, int):
        index = device
    else:
        parsed = torch.device(device)
        if parsed.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {parsed}")
        index = _STATE.current if parsed.index is None else parsed.index
    _check_ordinal(index)
    return index


def _exchange_device(index: int) -> int:
    """``with torch.cuda.device(index):``'s switch: the device before it."""
    if index < 0:
        return -1
    previous, _STATE.current = _STATE.current, _index(index)
    return previous


def _check_ordinal(index: int) -> None:
    if _STATE.gpus == 0:
        raise AssertionError(CPU_WHEEL)
    if not 0 <= index < _STATE.gpus:
        raise DeviceError("CUDA error: invalid device ordinal")


def _allocated(device: Any = None) -> int:
    return allocated(_index(device))


def _patch_cuda(torch: Any, gpus: int) -> None:
    cuda = torch.cuda

    def set_device(device: Any) -> None:
        _STATE.current = _index(device)

    def properties(device: Any = None) -> SimpleNamespace:
        index = _index(device)
        return SimpleNamespace(name=f"fixdev virtual GPU {index}", total_memory=16 << 30, major=8, minor=0,
                               multi_processor_count=108, is_integrated=False)

    def synchronize(device: Any = None) -> None:
        _index(device)  # the work ran already, on the CPU

    def available() -> bool:
        return gpus > 0

    answers = {
        "is_available": available,
        "is_initialized": available,
        "init": lambda: _index(None) and None,
        "device_count": lambda: gpus,
        "current_device": lambda: _index(None),
        "set_device": set_device,
        "get_device_name": lambda device=None: properties(device).name,
        "get_device_properties": properties,
        "get_device_capability": lambda device=None: (properties(device).major, properties(device).minor),
        "synchronize": synchronize,
        "memory_allocated": _allocated,
        "max_memory_allocated": _allocated,
        "memory_reserved": _allocated,
        "max_memory_reserved": _allocated,
        "reset_peak_memory_stats": lambda device=None: _index(device) and None,
        "reset_max_memory_allocated": lambda device=None: _index(device) and None,
        "empty_cache": lambda: None,
        "mem_get_info": lambda device=None: ((16 << 30) - _allocated(device), 16 << 30),
        # torch.utils.checkpoint saves the device's RNG state only once CUDA is initialized
        "_initialized": gpus > 0,
        "_exchange_device": _exchange_device,
        "_maybe_exchange_device": _exchange_device,
    }
    answers.update(_STATE.generators.answers())
    answers.update({"Stream": _Stream, "Event": _Event, "current_stream": _Stream, "default_stream": _Stream,
                    "stream": lambda stream=None: stream or _Stream()})
    if gpus == 0:  # a CPU wheel: the queries answer, the rest raises at the first call
        answers = {name: answers[name] for name in ("is_available", "is_initialized", "device_count")}
        answers.update(manual_seed=lambda seed: None, manual_seed_all=lambda seed: None)  # queued by a CPU wheel, never run
        for name in ("current_device", "set_device", "get_device_name", "get_device_properties", "synchronize", "init"):
            answers[name] = _cpu_wheel
    for name, value in answers.items():
        _patch(cuda, name, value)
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        _patch(accelerator, "is_available", lambda: gpus > 0)
        _patch(accelerator, "device_count", lambda: gpus)
        _patch(accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda") if gpus else None)
        if gpus:  # optimizers ask the accelerator's stream whether a CUDA graph is being captured
            _patch(accelerator, "current_stream", _Stream)
            _patch(accelerator, "synchronize", lambda device=None: _index(device) and None)
            _patch(accelerator, "current_device_index", lambda: _STATE.current)
            _patch(accelerator, "set_device_index", set_device)
            _patch(accelerator, "device_index", lambda device: cuda.device(device))  # DataParallel's replica threads
    # pinning is a no-op: there is no host-device copy to speed up (patched on
    # the class, so a DataLoader's pin-memory thread, outside the mode, sees it too)
    _patch(torch.Tensor, "pin_memory", lambda self, device=None: self)
    _patch(torch.Tensor, "is_pinned", lambda self, device=None: False)
    # the virtual GPU has no cuDNN: an RNN's flatten_parameters asks, and on a
    # CPU build torch would warn that it was compiled without it
    _patch(torch.backends.cudnn, "is_acceptable", lambda tensor: False)


class _Stream:
    """A CUDA stream on the virtual GPU: the work ran already, in order, on
    the CPU, so every wait is done and nothing is ever being captured."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        import torch

        self.device = torch.device("cuda", _index(device))
        self.priority = priority

    def is_capturing(self) -> bool:
        return False

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> "_Event":
        event = event or _Event()
        event.record(self)
        return event

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


class _Event:
    """A CUDA event: ``elapsed_time`` is the CPU's wall time between records."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.at: float | None = None

    def record(self, stream: Any = None) -> None:
        import time

        self.at = time.perf_counter()

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def elapsed_time(self, end: "_Event") -> float:
        if self.at is None or end.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end.at - self.at) * 1000.0


def _cpu_wheel(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(CPU_WHEEL)


def _tensors(torch: Any, args: tuple, kwargs: dict):
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):  # foreach ops, torch.cat, index tuples
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item


def _mismatch(first: Any, second: Any) -> DeviceError:
    return DeviceError(f"Expected all tensors to be on the same device, but found at least two devices, {first} and {second}!")


def _type_name(tensor: Any, device: Any) -> str:
    name = _LEGACY.get(str(tensor.dtype).removeprefix("torch."), "Float")
    return f"torch.cuda.{name}Tensor" if device is not None else f"torch.{name}Tensor"


def _build_mode(torch: Any) -> type:
    from torch.overrides import TorchFunctionMode

    Tensor = torch.Tensor
    cpu = torch.device("cpu")

    def target(device: Any) -> Any:
        """A device argument as the virtual device it names (None: the CPU;
        ``False``: a device this runtime leaves alone, such as meta)."""
        if isinstance(device, int):
            device = torch.device("cuda", device)
        parsed = torch.device(device)
        if parsed.type == "cpu":
            return None
        if parsed.type != "cuda":
            return False
        index = _STATE.current if parsed.index is None else parsed.index
        _check_ordinal(index)
        return torch.device("cuda", index)

    def common(tensors: list) -> tuple[Any, tuple]:
        """The one device the inputs are on (None: the CPU) and the CPU
        scalars among them; raises PyTorch's message on a mismatch."""
        found = None
        host = False
        scalars: list = []
        for tensor in tensors:
            device = tag_of(tensor)
            if device is None:
                if tensor.dim() == 0:
                    scalars.append(storage_of(tensor))
                else:
                    host = True
            elif found is None:
                found = device
            elif device != found:
                raise _mismatch(found, device)
        if found is not None and host:
            raise _mismatch(found, cpu)
        return found, tuple(scalars)

    drawing = rng.drawing_functions(torch)

    def call(func, args, kwargs, device):
        """``func`` run; a random draw on a virtual device from that device's generator."""
        if device is not None and kwargs.get("generator") is None:
            try:
                draws = func in drawing
            except TypeError:  # an unhashable callable
                draws = False
            if draws:
                return _STATE.generators.drawn(device.index, lambda: func(*args, **kwargs))
        return func(*args, **kwargs)

    def device_get(func, args, kwargs):
        return tag_of(args[0]) or func(*args, **kwargs)

    def is_cuda(func, args, kwargs):
        return tag_of(args[0]) is not None or func(*args, **kwargs)

    def is_cpu(func, args, kwargs):
        return tag_of(args[0]) is None and func(*args, **kwargs)

    def get_device(func, args, kwargs):
        device = tag_of(args[0])
        return device.index if device is not None else func(*args, **kwargs)

    def grad_get(func, args, kwargs):
        # autograd's C++ makes grads on new storages: tag them as their tensor
        grad = func(*args, **kwargs)
        device = tag_of(args[0])
        if grad is not None and device is not None and tag_of(grad) is None:
            _tag(grad, device)
        return grad

    def passthrough(func, args, kwargs):
        # copy_ and .data = / set_ legally join devices; the storage they
        # leave behind keeps (or brings) its own tag
        return func(*args, **kwargs)

    def to(func, args, kwargs):
        tensor, rest = args[0], list(args[1:])
        current = tag_of(tensor)
        wanted: Any = current
        kwargs = dict(kwargs)
        if rest and isinstance(rest[0], Tensor):  # .to(other): other's device and dtype
            other = rest[0]
            wanted = tag_of(other)
            rest[0] = other.dtype
        elif "device" in kwargs:
            wanted = target(kwargs["device"]) if kwargs["device"] is not None else current
            kwargs["device"] = "cpu"
        elif rest and rest[0] is not None and not isinstance(rest[0], torch.dtype):
            # (None: no device, as Module.to(dtype) passes it to each tensor)
            wanted = target(rest[0])
            rest[0] = "cpu"
        if wanted is False:
            return func(*args, **dict(kwargs))
        if wanted != current:
            kwargs["copy"] = True  # a move is a copy, as between real devices
        out = func(tensor, *rest, **kwargs)
        if wanted is not None:
            _tag(out, wanted)
        return out

    def cuda(func, args, kwargs):
        tensor = args[0]
        device = args[1] if len(args) > 1 else kwargs.get("device")
        wanted = target("cuda" if device is None else device)
        if tag_of(tensor) == wanted:
            return tensor
        out = tensor.clone(memory_format=kwargs.get("memory_format", torch.preserve_format))
        _tag(out, wanted)
        return out

    def cpu_(func, args, kwargs):
        tensor = args[0]
        if tag_of(tensor) is None:
            return func(*args, **kwargs)
        return tensor.clone(memory_format=kwargs.get("memory_format", torch.preserve_format))

    def numpy(func, args, kwargs):
        device = tag_of(args[0])
        if device is not None:
            raise NumpyDeviceError(f"can't convert {device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.")
        return func(*args, **kwargs)

    def getitem(func, args, kwargs):
        # CPU index tensors may index a device tensor; a device index needs
        # its tensor on the same device
        tensor, index = args[0], args[1]
        device = tag_of(tensor)
        for item in _tensors(torch, (index,), {}):
            where = tag_of(item)
            if where is not None and where != device:
                raise DeviceError(f"indices should be either on cpu or on the same device as the indexed tensor ({device or cpu})")
        if len(args) > 2 and isinstance(args[2], Tensor):  # __setitem__'s value
            common([tensor, args[2]])
        out = func(*args, **kwargs)
        if device is not None:
            _tag(out, device)
        return out

    def recurrent(func, args, kwargs):
        # aten's RNN check_attributes: the hidden state first, then the
        # parameters, each against the input. The arguments: (input,
        # [batch_sizes,] hx, params, ...); an LSTM's hx is a tuple, the
        # params a list; a packed sequence's batch_sizes stay on the CPU.
        sequences = [i for i, value in enumerate(args) if isinstance(value, (list, tuple))]
        lstm = func is torch.lstm
        if kwargs or len(sequences) < (2 if lstm else 1):
            return generic(func, args, kwargs)
        at = sequences[1] if lstm else sequences[0]
        hidden = args[at - 1]
        checked = (("hidden", hidden if isinstance(hidden, (list, tuple)) else (hidden,)), ("parameter", args[at]))
        device = tag_of(args[0])
        for name, tensors in checked:
            for tensor in tensors:
                if isinstance(tensor, Tensor) and tag_of(tensor) != device:
                    raise DeviceError(f"Input and {name} tensors are not at the same device, found input tensor at "
                                      f"{device or cpu} and {name} tensor at {tag_of(tensor) or cpu}")
        out = call(func, args, kwargs, device)
        if device is not None:
            _tag(out, device)
        return out

    def wrapper_check(method: str, named: tuple) -> None:
        """The device check a CUDA kernel's generated wrapper makes: each
        argument against the first one's device, in the schema's order."""
        common = None
        for name, tensor in named:
            if not isinstance(tensor, Tensor):
                continue
            where = tag_of(tensor) or cpu
            if common is None:
                common = where
            elif where != common:
                raise DeviceError(f"Expected all tensors to be on the same device, but got {name} is on {where}, "
                                  f"different from other tensors on {common} (when checking argument in method {method})")

    def linear_check(data, weight, bias) -> None:
        # at::linear: addmm(bias, input, weight.t()) with a bias, else matmul's mm
        if isinstance(bias, Tensor):
            wrapper_check("wrapper_CUDA_addmm", (("self", bias), ("mat1", data), ("mat2", weight)))
        else:
            wrapper_check("wrapper_CUDA_mm", (("self", data), ("mat2", weight)))

    def linear(func, args, kwargs):
        if len(args) >= 2 and isinstance(args[0], Tensor) and isinstance(args[1], Tensor):
            linear_check(args[0], args[1], args[2] if len(args) > 2 else kwargs.get("bias"))
        return generic(func, args, kwargs)

    def cell(func, args, kwargs):
        # aten's RNN cells (RNN.cpp) check no devices themselves; the first
        # kernel that gets two is the error. LSTM and GRU cells on a CUDA
        # input: matmul(input, w_ih.t()), matmul(hx, w_hh.t()), then the
        # fused kernel with the cell state (LSTM) or hx (GRU) and the biases.
        # Otherwise linear(hx, w_hh, b_hh), linear(input, w_ih, b_ih) (the
        # GRU: input first), as the plain RNN cell always does.
        if kwargs or len(args) < 4:
            return generic(func, args, kwargs)
        data, hidden, w_ih, w_hh = args[:4]
        b_ih, b_hh = (tuple(args[4:6]) + (None, None))[:2]
        lstm = func is torch.lstm_cell
        hx, cx = (hidden[0], hidden[1]) if lstm and len(hidden) == 2 else (hidden, None)
        fused = {torch.lstm_cell: ("lstm", "cx", cx), torch.gru_cell: ("gru", "hx", hx)}.get(func)
        if fused is not None and tag_of(data) is not None:
            wrapper_check("wrapper_CUDA_mm", (("self", data), ("mat2", w_ih)))
            wrapper_check("wrapper_CUDA_mm", (("self", hx), ("mat2", w_hh)))
            kind, name, state = fused
            wrapper_check(f"wrapper_CUDA___thnn_fused_{kind}_cell", (("input_gates", data), ("hidden_gates", data), (name, state),
                                                                     ("input_bias", b_ih), ("hidden_bias", b_hh)))
        elif func is torch.gru_cell:
            linear_check(data, w_ih, b_ih)
            linear_check(hx, w_hh, b_hh)
        else:
            linear_check(hx, w_hh, b_hh)
            linear_check(data, w_ih, b_ih)
        return generic(func, args, kwargs)

    def packing(func, args, kwargs):
        # (data, lengths or batch_sizes, ...) -> (data, lengths or batch_sizes):
        # the sizes are CPU tensors on a GPU too, and CUDA takes packing's
        # lengths only from the CPU (torch.nn.utils.rnn.pack_padded_sequence:
        # "must be on the CPU if provided as a tensor")
        if func is torch._pack_padded_sequence and len(args) > 1 and tag_of(args[1]) is not None:
            lengths = args[1]
            raise DeviceError(
                f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D {tag_of(lengths)} {_LEGACY.get(str(lengths.dtype).removeprefix('torch.'), 'Float')} tensor"
            )
        out = func(*args, **kwargs)
        device = tag_of(args[0])
        if device is not None:
            _tag(out[0], device)
        return out

    def type_(func, args, kwargs):
        device = tag_of(args[0])
        if device is None:
            return func(*args, **kwargs)
        if len(args) > 1 or kwargs:
            out = func(*args, **kwargs)
            wanted = args[1] if len(args) > 1 else kwargs.get("dtype")
            if isinstance(wanted, torch.dtype):  # .type(torch.float32): a cast, on the same device
                _tag(out, device)
            return out
        return _type_name(args[0], device)

    def repr_(func, args, kwargs):
        text = func(*args, **kwargs)
        device = tag_of(args[0])
        if device is None:
            return text
        # torch prints the device first among the suffixes
        cut = min((i for i in (text.find(", dtype="), text.find(", requires_grad="), text.find(", grad_fn="), text.find(", size=")) if i >= 0), default=len(text) - 1)
        return f"{text[:cut]}, device='{device}'{text[cut:]}"

    special = {
        Tensor.device.__get__: device_get,
        Tensor.is_cuda.__get__: is_cuda,
        Tensor.is_cpu.__get__: is_cpu,
        Tensor.get_device: get_device,
        Tensor.grad.__get__: grad_get,
        Tensor.copy_: passthrough,
        Tensor.data.__set__: passthrough,
        Tensor.grad.__set__: passthrough,
        Tensor.set_: passthrough,
        Tensor.record_stream: lambda func, args, kwargs: None,  # the work ran already
        torch._has_compatible_shallow_copy_type: passthrough,
        Tensor.to: to,
        Tensor.cuda: cuda,
        Tensor.cpu: cpu_,
        Tensor.numpy: numpy,
        Tensor.__array__: numpy,
        Tensor.__getitem__: getitem,
        Tensor.__setitem__: getitem,
        Tensor.type: type_,
        Tensor.__repr__: repr_,
        torch.lstm: recurrent,
        torch.gru: recurrent,
        torch.rnn_tanh: recurrent,
        torch.rnn_relu: recurrent,
        torch.nn.functional.linear: linear,
        torch.lstm_cell: cell,
        torch.gru_cell: cell,
        torch.rnn_tanh_cell: cell,
        torch.rnn_relu_cell: cell,
        torch._pack_padded_sequence: packing,
        torch._pad_packed_sequence: packing,
    }

    from torch._C import _len_torch_function_stack as _len_stack
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext, _device_constructors

    def default_device(func) -> Any:
        """The device a ``DeviceContext`` on this thread's stack gives a
        factory called without ``device=`` (None: none does)."""
        try:
            if func not in _device_constructors():
                return None
        except TypeError:  # an unhashable callable
            return None
        for mode in reversed(_get_current_function_mode_stack()):
            if isinstance(mode, DeviceContext):
                return mode.device
        return None

    def generic(func, args, kwargs):
        """An op's inputs on one device (0-dim CPU tensors aside), its
        outputs tagged with it."""
        tensors = list(_tensors(torch, args, kwargs))
        if not tensors:
            return func(*args, **kwargs)
        try:
            device, scalars = common(tensors)
        except DeviceError:
            name = getattr(func, "__name__", "")
            if name in _CONVOLUTIONS and len(args) > 1 and isinstance(args[1], Tensor):
                data, weight = args[0], args[1]
                raise DeviceError(f"Input type ({_type_name(data, tag_of(data))}) and weight type "
                                  f"({_type_name(weight, tag_of(weight))}) should be the same") from None
            raise
        out = call(func, args, kwargs, device)
        if device is not None:
            _tag(out, device, scalars)
        return out

    class VirtualGPU(TorchFunctionMode):
        """Devices as storage tags; see the module's docstring."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                handler = special.get(func)
            except TypeError:  # an unhashable callable
                handler = None
            if handler is not None:
                return handler(func, args, kwargs)
            if kwargs.get("device") is None and _len_stack():
                # torch.set_default_device / with torch.device(...): their
                # context sits below this mode and would give the factory a
                # real "cuda"; the device it would give is placed here instead
                default = default_device(func)
                if default is not None:
                    kwargs = dict(kwargs, device=default)
            if "device" in kwargs and kwargs["device"] is not None:  # a factory, or new_* / *_like with a device
                wanted = target(kwargs["device"])
                if wanted is False:
                    return func(*args, **kwargs)
                if wanted is not None:
                    out = call(func, args, dict(kwargs, device="cpu"), wanted)
                    _tag(out, wanted)
                    return out
                return func(*args, **kwargs)
            return generic(func, args, kwargs)

    return VirtualGPU


# ---------------------------------------------------------------------------
# Uncaught errors, as ``fixdev --run`` reads them
# ---------------------------------------------------------------------------


_OWN = frozenset(module.__file__ for module in (checkpoints, parallel, rng, tags)) | {__file__}


def trimmed(tb: Any) -> Any:
    """A traceback without the runtime's frames, so that it ends at the
    line of the program (or torch) that made the call."""
    import types

    frames = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename not in _OWN:
            frames.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for item in reversed(frames):
        rebuilt = types.TracebackType(rebuilt, item.tb_frame, item.tb_lasti, item.tb_lineno)
    return rebuilt


def report_uncaught(path: str | None) -> None:
    """Print uncaught errors without the runtime's frames and, with
    ``path``, write the traceback's text there for ``fixdev --run``."""
    import sys
    import traceback

    import threading

    previous, previous_thread = sys.excepthook, threading.excepthook
    lock = threading.Lock()

    def record(kind, value, tb) -> None:
        # appended: a thread's error and the main thread's (or a child
        # process's and its parent's) all reach --run, which picks the device error
        if path:
            with lock, open(path, "a", encoding="utf-8") as handle:
                handle.write("".join(traceback.format_exception(kind, value, tb)))

    def hook(kind, value, tb):
        tb = trimmed(tb)
        value = value.with_traceback(tb)
        record(kind, value, tb)
        previous(kind, value, tb)

    def thread_hook(args):
        # an uncaught error ends only its thread, and the program goes on
        if args.exc_type is SystemExit or args.exc_value is None:
            return previous_thread(args)
        tb = trimmed(args.exc_traceback)
        value = args.exc_value.with_traceback(tb)
        record(args.exc_type, value, tb)
        previous_thread(threading.ExceptHookArgs([args.exc_type, value, tb, args.thread]))

    sys.excepthook = hook
    threading.excepthook = thread_hook
