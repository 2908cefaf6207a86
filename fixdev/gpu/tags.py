"""Which virtual device a storage lives on (``fixdev --run``): the virtual
GPU's one table, read by the runtime's mode, its checkpoint tagger and its
collectives. A storage absent from it is on the CPU.

Keyed by ``untyped_storage()``, which torch keeps as one Python object per
storage, so that ``nn.Parameter(...)``, ``.data =``, ``Module._apply``,
``torch.save`` and ``torch.load`` all see the same tag."""

from __future__ import annotations

import weakref
from typing import Any

TAGS: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def storage_of(tensor: Any) -> Any:
    """A tensor's untyped storage, or None where it has none (sparse, nested)."""
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, meta-like tensors
        return None


def tag_of(tensor: Any) -> Any:
    """The virtual device of a tensor (a ``torch.device``), None for the CPU."""
    storage = storage_of(tensor)
    return None if storage is None else TAGS.get(storage)


def tag(out: Any, device: Any, keep: tuple = ()) -> None:
    """Tag the tensors ``out`` holds with ``device``, except storages in
    ``keep`` (CPU scalars an op returned a view of)."""
    import torch

    if isinstance(out, torch.Tensor):
        storage = storage_of(out)
        if storage is not None and not any(storage is kept for kept in keep):
            TAGS[storage] = device
    elif isinstance(out, (tuple, list)):
        for item in out:
            if isinstance(item, torch.Tensor):
                tag(item, device, keep)


def allocated(index: int) -> int:
    """Bytes of the storages on virtual device ``index``."""
    return sum(storage.nbytes() for storage, device in list(TAGS.items()) if device.index == index)
