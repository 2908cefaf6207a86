"""The virtual GPU across processes: what a DataLoader worker (or any
``torch.multiprocessing`` child) sends and receives keeps its device.

The runtime's device is a tag on a storage, kept in one process's memory; a
tensor pickled into a queue arrives in the other process on a new storage
object, untagged. ``install`` wraps torch's ``ForkingPickler`` reduction of
tensors so that a tagged tensor's device travels with it (the data still
travels through shared memory, as torch sends it), makes the shared storage
a worker's ``default_collate`` asks for on a virtual device a shared CPU
storage with that device, and lets a device error raised in a worker cross
back as PyTorch's own ``RuntimeError``, its traceback ending at the user's
line. The child gets the runtime itself from ``hook/sitecustomize.py``
(spawn and forkserver start a new Python; a forked child inherits it).

It imports neither torch nor the runtime at import time: ``runtime.install``
hands in what it needs.
"""

from __future__ import annotations

from typing import Any, Callable

_TAGGING: dict[str, Callable[..., Any]] = {}


def install(torch: Any, patch: Callable[[Any, str, Any], None], tag_of: Callable[[Any], Any], tag: Callable[[Any, Any], None],
            trimmed: Callable[[Any], Any]) -> None:
    """Patch the reductions (through ``patch``, so that uninstalling the
    runtime undoes them); ``tag_of``/``tag`` read and write a tensor's
    virtual device, ``trimmed`` drops the runtime's frames of a traceback."""
    from multiprocessing.reduction import ForkingPickler

    _TAGGING.update(tag_of=tag_of, tag=tag)
    reducers = dict(ForkingPickler._extra_reducers)  # type: ignore[attr-defined]
    for kind, reduce in list(reducers.items()):
        if isinstance(kind, type) and issubclass(kind, torch.Tensor):
            reducers[kind] = _carrying_the_device(reduce)
    patch(ForkingPickler, "_extra_reducers", reducers)
    _patch_new_shared(torch, patch, tag)
    _patch_exception_wrapper(torch, patch, trimmed)


def _carrying_the_device(reduce: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def reduce_tagged(tensor: Any) -> Any:
        rebuild, args = reduce(tensor)[:2]
        device = _TAGGING["tag_of"](tensor)
        if device is None:
            return rebuild, args
        return rebuild_on_device, (rebuild, args, str(device))

    return reduce_tagged


def rebuild_on_device(rebuild: Callable[..., Any], args: tuple, device: str) -> Any:
    """The receiving side: the tensor torch rebuilds, tagged with the
    virtual device it had where it was sent (untagged where no runtime is
    installed: there it is the CPU tensor it really is)."""
    tensor = rebuild(*args)
    tag = _TAGGING.get("tag")
    if tag is not None:
        import torch

        tag(tensor, torch.device(device))
    return tensor


def _patch_new_shared(torch: Any, patch: Callable[[Any, str, Any], None], tag: Callable[[Any, Any], None]) -> None:
    """``default_collate`` in a worker stacks a batch into a shared storage
    made on the batch's device: on a virtual device that is a shared CPU
    storage, tagged (torch would look for a real CUDA allocator)."""
    storage_class = torch.UntypedStorage
    original = storage_class._new_shared.__func__

    def new_shared(cls: Any, size: int, *, device: Any = "cpu") -> Any:
        where = torch.device(device)
        if where.type != "cuda":
            return original(cls, size, device=device)
        storage = original(cls, size, device="cpu")
        tag(torch.empty(0).set_(storage), torch.device("cuda", 0 if where.index is None else where.index))
        return storage

    patch(storage_class, "_new_shared", classmethod(new_shared))


def _patch_exception_wrapper(torch: Any, patch: Callable[[Any, str, Any], None], trimmed: Callable[[Any], Any]) -> None:
    """A worker sends its error to the main process as its type and its
    traceback's text: a device error goes as the builtin type it prints as
    (its own class is not importable under that name), its text without the
    runtime's frames, so the main process's ``Caught RuntimeError in
    DataLoader worker process 0`` reads as on a GPU and ends at the user's line."""
    wrapper = torch._utils.ExceptionWrapper
    original = wrapper.__init__

    def init(self: Any, exc_info: Any = None, where: str = "in background") -> None:
        import sys

        if exc_info is None:
            exc_info = sys.exc_info()
        kind, value, tb = exc_info
        if getattr(value, "fixdev_device_error", False):
            kind = next(base for base in kind.__mro__[1:] if base.__module__ == "builtins")
        original(self, (kind, value, trimmed(tb)), where)

    patch(wrapper, "__init__", init)
