"""``fixdev --probe FILE:CLASS``: run a module on a fake GPU before the real one.

The module is built on the CPU (with ``torch.cuda.is_available()`` saying
yes, as on the GPU machine), moved with its inputs to the fake CUDA device of
``fakegpu.py``, and its ``forward`` is run (``--train``: in train mode, then
a loss and ``backward`` where the fake device allows; ``--real``: on the
virtual GPU of ``runtime.py`` instead, with values; ``--input-from``: the
inputs from the user's own function). A device error is
shown as torch shows it, at the user's line, and then as ``--traceback``
explains it, fix included. torch is imported only when a probe runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import logging
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

_DTYPES = {
    "float": "float32", "float32": "float32", "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
    "double": "float64", "float64": "float64", "long": "int64", "int64": "int64", "int": "int32", "int32": "int32",
    "bool": "bool",
}
_counter = itertools.count()


class ProbeError(Exception):
    """A usage error or code that cannot be run: one line, exit 2."""


def parse_target(spec: str) -> tuple[Path, str]:
    file, sep, name = spec.rpartition(":")
    if not sep or not file or not name.isidentifier():
        raise ProbeError(f"--probe takes FILE:CLASS (model.py:Net), not {spec!r}")
    path = Path(file)
    if not path.is_file():
        raise ProbeError(f"{file}: no such file")
    return path, name


def parse_input(text: str) -> tuple[tuple[int, ...], str]:
    """``8,3,32,32`` → ((8, 3, 32, 32), "float32"); ``8,16:long`` → int64."""
    shape_text, _, dtype = text.partition(":")
    try:
        shape = tuple(int(part) for part in shape_text.split(",") if part.strip())
    except ValueError:
        raise ProbeError(f"--input {text!r}: a shape is numbers separated by commas (8,3,32,32), optionally :long, :bool, :half") from None
    if not shape or any(n < 0 for n in shape):
        raise ProbeError(f"--input {text!r}: a shape is numbers separated by commas (8,3,32,32)")
    if dtype and dtype not in _DTYPES:
        raise ProbeError(f"--input {text!r}: unknown dtype {dtype!r} (one of {', '.join(sorted(_DTYPES))})")
    return shape, _DTYPES[dtype or "float"]


def parse_init(text: str | None) -> tuple[list, dict]:
    if text is None:
        return [], {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProbeError(f"--init is not JSON ({exc.msg} at column {exc.colno}): {text}") from None
    if isinstance(value, dict):
        return [], value
    if isinstance(value, list):
        return value, {}
    raise ProbeError("--init takes a JSON object (keyword arguments) or a list (positional arguments)")


def _user_frame(exc: BaseException, path: Path) -> traceback.FrameSummary | None:
    """The innermost frame of the exception in the user's file."""
    wanted = path.resolve()
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            if Path(frame.filename).resolve() == wanted:
                found = frame
        except OSError:
            continue
    return found


def as_log(exc: BaseException, within: Path | None = None) -> str:
    """The traceback as Python prints it, without fixdev's own frames (the
    fake GPU's dispatch mode says nothing to a user); with ``within`` (a file
    or a folder), up to the innermost frame of the user's code there: what
    the fake device runs below it is not what a GPU would run."""
    from fixdev.diagnose.log import is_library

    frames = traceback.extract_tb(exc.__traceback__)
    last = len(frames) - 1
    if within is not None:
        wanted = within.resolve()
        last = max((i for i, f in enumerate(frames) if _inside(f.filename, wanted) and not is_library(f.filename)), default=last)
    package = Path(__file__).resolve().parent
    kept = [f for f in frames[: last + 1] if not _inside(f.filename, package)]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(kept)]
    lines.extend(traceback.format_exception_only(type(exc), exc))
    return "".join(lines)


def _inside(name: str, place: Path) -> bool:
    """``name`` is the file ``place`` or a file under the folder ``place``."""
    try:
        return Path(name).resolve().is_relative_to(place)
    except (OSError, ValueError):
        return False


def _where(exc: BaseException, path: Path) -> str:
    frame = _user_frame(exc, path)
    return f" ({path.as_posix()}, line {frame.lineno})" if frame is not None else ""


def _load(path: Path) -> Any:
    """Import the user's file as a module, its folder first on sys.path (so
    its own imports work), under a name no other module has."""
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"_fixdev_probe_{next(_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProbeError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def quiet_fake_tensors() -> Iterator[None]:
    """FakeTensorMode logs every op it cannot run, traceback and all, before
    raising; the error itself is what the user is told about."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _loss(output: Any, torch: Any) -> Any:
    """A scalar to call backward on: the output itself when it is one (a
    model that returns its loss), else the sum of its floating tensors."""
    tensors = []
    stack = [output]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.is_floating_point() and item.requires_grad:
                tensors.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif hasattr(item, "values") and callable(item.values):  # ModelOutput and friends
            stack.extend(item.values())
    if not tensors:
        return None
    return sum(t.float().sum() for t in tensors)


def parse_input_from(text: str) -> tuple[str, str]:
    """``loaders:batch`` (a module importable from here) or
    ``data/loaders.py:batch`` (a file) → (module or file, function)."""
    where, sep, function = text.rpartition(":")
    if not sep or not where or not function.isidentifier():
        raise ProbeError(f"--input-from takes MODULE:FUNCTION (loaders:sample_batch or loaders.py:sample_batch), not {text!r}")
    return where, function


def run(spec: str, inputs: Sequence[str], init: str | None, train: bool, mode: str, overrides, fmt: str, quiet: bool, exit_zero: bool,
        color: bool, echo: Callable[..., None], real: bool = False, input_from: str | None = None) -> int:
    """Probe one module and return the exit code. ``real``: on the virtual
    GPU of ``runtime.py`` instead of the fake (metadata-only) one;
    ``input_from``: forward's inputs from the user's function instead of
    random tensors of the ``inputs`` shapes."""
    try:
        path, name = parse_target(spec)
        shapes = [parse_input(text) for text in inputs]
        source = parse_input_from(input_from) if input_from is not None else None
        if source is not None and shapes:
            raise ProbeError("--input and --input-from: choose one (the shapes, or your function that makes the inputs)")
        if not shapes and source is None:
            raise ProbeError("--probe needs at least one --input SHAPE (8,3,32,32), one per forward argument, or --input-from MODULE:FUNCTION")
        args, kwargs = parse_init(init)
        return _probe(path, name, shapes, source, args, kwargs, train, real, mode, overrides, fmt, quiet, exit_zero, color, echo)
    except ProbeError as exc:
        echo(f"fixdev: error: {exc}", err=True)
        return 2


def _user_inputs(source: tuple[str, str], path: Path, torch: Any) -> tuple[list, dict]:
    """What the user's function returns, as forward's arguments: a tensor
    (one argument), a tuple or list (the positional arguments) or a mapping
    (keyword arguments: a dict, a tokenizer's batch)."""
    import importlib
    from collections.abc import Mapping

    where, function = source
    try:
        if where.endswith(".py") or Path(where).is_file():
            if not Path(where).is_file():
                raise ProbeError(f"--input-from {where}: no such file")
            module = _load(Path(where))
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            if str(path.resolve().parent) not in sys.path:
                sys.path.insert(0, str(path.resolve().parent))
            module = importlib.import_module(where)
    except ProbeError:
        raise
    except Exception as exc:
        raise ProbeError(f"--input-from {where}: importing it failed: {type(exc).__name__}: {exc}") from None
    make = getattr(module, function, None)
    if not callable(make):
        raise ProbeError(f"--input-from: {where} has no function {function}")
    try:
        value = make()
    except Exception as exc:
        raise ProbeError(f"--input-from {where}:{function}() failed: {type(exc).__name__}: {exc}") from None
    if isinstance(value, torch.Tensor):
        return [value], {}
    if isinstance(value, (tuple, list)):
        return list(value), {}
    if isinstance(value, Mapping) or (hasattr(value, "keys") and hasattr(value, "__getitem__")):
        return [], {key: value[key] for key in value.keys()}
    raise ProbeError(f"--input-from {where}:{function}() returned {type(value).__name__}: "
                     "return a tensor, a tuple of forward's arguments or a dict of its keyword arguments")


def _to_cuda(value: Any, torch: Any) -> Any:
    """Tensors, also inside lists, tuples and dicts, moved to "cuda"."""
    if isinstance(value, torch.Tensor):
        return value.to("cuda")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cuda(item, torch) for item in value) if not hasattr(value, "_fields") else type(value)(*(_to_cuda(item, torch) for item in value))
    if isinstance(value, dict):
        return {key: _to_cuda(item, torch) for key, item in value.items()}
    return value


@contextlib.contextmanager
def _virtual_gpu() -> Iterator[None]:
    from fixdev.gpu.runtime import virtual_gpu

    with virtual_gpu(gpus=1):
        yield


def _probe(path: Path, name: str, shapes, source, args, kwargs, train: bool, real: bool, mode: str, overrides, fmt: str, quiet: bool,
           exit_zero: bool, color: bool, echo: Callable[..., None]) -> int:
    from fixdev.gpu import fakegpu
    from fixdev.diagnose import traceback as tracebacks
    from fixdev.diagnose.log import parse_log

    where = "the virtual GPU" if real else "a fake GPU"
    if real:
        try:
            import torch
        except ImportError:
            raise ProbeError("--probe --real needs torch (install the torch build you use first)") from None
    else:
        try:
            fakegpu.require()
        except fakegpu.FakeGpuUnavailable as exc:
            raise ProbeError(f"--probe: {exc} (--probe --real needs only torch)") from None
        import torch

        if not fakegpu._guard_built() and not quiet:
            echo("fixdev: building the fake GPU's CUDA device guard (once per torch version, about 10 s)...", err=True)
        fakegpu.load_guard()

    def device_error(exc: BaseException, stage: str) -> int | None:
        """Report ``exc`` if it is a device error (exit code), else None."""
        log = as_log(exc, path)
        if not parse_log(log):
            return None
        to_err = mode != "check" or fmt == "json"
        frame = _user_frame(exc, path)
        if fmt != "json":
            message = traceback.format_exception_only(type(exc), exc)[-1].strip()
            echo(f"{path.as_posix()}:{name}: {stage} fails on {where}:\n{message}", err=to_err)
            if frame is not None:
                echo(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n    {(frame.line or "").strip()}\n', err=to_err)
        return tracebacks.run(log, [path], mode, overrides, fmt, quiet, exit_zero, color, echo, source="the probe")

    # the virtual GPU is installed for the whole probe (building and the
    # user's inputs see torch.cuda.is_available(), as on the GPU machine)
    outer = _virtual_gpu() if real else contextlib.nullcontext()
    with outer:
        return _build_and_run(path, name, shapes, source, args, kwargs, train, real, where, device_error, torch, fakegpu, echo, fmt)


def _build_and_run(path: Path, name: str, shapes, source, args, kwargs, train: bool, real: bool, where: str, device_error, torch: Any,
                   fakegpu: Any, echo: Callable[..., None], fmt: str) -> int:
    from fixdev.diagnose.log import parse_log

    with contextlib.nullcontext() if real else fakegpu.cuda_available():
        try:
            module = _load(path)
            cls = getattr(module, name, None)
            if cls is None:
                classes = [n for n, v in vars(module).items() if isinstance(v, type) and issubclass(v, torch.nn.Module) and v.__module__ == module.__name__]
                hint = f" (its nn.Module classes: {', '.join(classes)})" if classes else ""
                raise ProbeError(f"{path.as_posix()} has no {name}{hint}")
            if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
                raise ProbeError(f"{path.as_posix()}:{name} is not an nn.Module class")
            model = cls(*args, **kwargs)
        except ProbeError:
            raise
        except Exception as exc:  # the user's code failed: say where, no traceback
            code = device_error(exc, "building it")
            if code is not None:
                return code
            raise ProbeError(f"building {path.as_posix()}:{name} failed: {type(exc).__name__}: {exc}{_where(exc, path)}") from None
    torch.manual_seed(0)
    if source is not None:
        with contextlib.nullcontext() if real else fakegpu.cuda_available():
            tensors, named = _user_inputs(source, path, torch)
    else:
        tensors = [torch.randn(shape).to(getattr(torch, dtype)) if dtype.startswith(("float", "bfloat")) else torch.zeros(shape, dtype=getattr(torch, dtype))
                   for shape, dtype in shapes]
        named = {}
    stage = "forward" if not train else "forward in train mode"
    note = ""
    try:
        with (torch.enable_grad() if train else torch.no_grad()) if real else fakegpu.fake_gpu(grad=train), quiet_fake_tensors():
            model.to("cuda")
            model.train(train)
            moved, moved_named = _to_cuda(tensors, torch), _to_cuda(named, torch)
            output = model(*moved, **moved_named)
            if train:
                stage = "the loss and backward"
                loss = _loss(output, torch)
                if loss is None:
                    note = "; no floating output requires grad, so no backward"
                else:
                    try:
                        loss.backward()
                        note = "; backward ran"
                    except Exception as exc:  # the fake device's limits, unless it is a device error
                        if real or parse_log(as_log(exc, path)):
                            raise
                        note = f"; backward not checked: the fake GPU cannot run it ({type(exc).__name__})"
    except Exception as exc:
        code = device_error(exc, stage)
        if code is not None:
            return code
        raise ProbeError(
            f"{'the virtual GPU' if real else 'the fake GPU'} could not run {stage} of {path.as_posix()}:{name}: {type(exc).__name__}: {exc}{_where(exc, path)}"
            f" (not a device error: check {'--input-from' if source is not None else '--input'} and --init)"
        ) from None
    if fmt == "json":
        echo("[]")
    else:
        number = len(tensors) + len(named)
        count = f"{number} input{'s' if number != 1 else ''}" + (f" from {source[0]}:{source[1]}" if source is not None else "")
        echo(f"{path.as_posix()}:{name}: no device error on {where} ({'train' if train else 'eval'} mode, {count}{note}).")
    return 0
