"""Checkpoints on the virtual GPU (``fixdev --run``): ``torch.save`` writes
``cuda:N`` as the location of a storage on virtual device N, as a real GPU
writes it, and ``torch.load`` puts a ``cuda:N`` storage back on virtual
device N, after ``map_location`` has mapped it, as on a GPU.

Both go through ``torch.serialization.register_package`` (a tagger and a
deserializer ahead of torch's own), which ``torch.save``'s ``persistent_id``
and ``torch.load``'s restore step (the plain and the ``weights_only``
unpickler alike) consult; ``remove`` takes them out again. A file saved
under the runtime is the file a GPU would save: a plain CPU process fails
to load it without ``map_location`` with torch's own error, and a file
saved on a GPU loads under the runtime. A device index the machine lacks,
or any ``cuda`` location under ``--gpus 0``, is left to torch's own check,
which raises what it raises on such a machine.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from fixdev.gpu.tags import TAGS

_PRIORITY = 1  # ahead of torch's CPU (10) and CUDA (20) entries
_CUDA = re.compile(r"cuda(:\d+)?$")


def register(torch: Any, gpus: int) -> Callable[[], None]:
    """Register the tagger and the deserializer; returns what removes them."""
    serialization = torch.serialization

    def location(storage: Any) -> str | None:
        device = TAGS.get(storage)
        return None if device is None else str(device)

    def restore(storage: Any, where: str) -> Any:
        if gpus == 0 or not _CUDA.match(where):
            return None  # torch's own entries: the CPU, or a CUDA it reports missing
        index = serialization.validate_cuda_device(where)  # torch's own check of the index
        TAGS[storage] = torch.device("cuda", index)
        return storage

    entry = (_PRIORITY, location, restore)
    serialization.register_package(*entry)
    untyped = torch.UntypedStorage
    previous_cuda = untyped.cuda

    def storage_cuda(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
        # a map_location callable's `storage.cuda(i)`: a copy on virtual device i
        if gpus == 0:
            return previous_cuda(self, device, non_blocking)
        index = serialization.validate_cuda_device("cuda" if device is None else str(torch.device("cuda", device) if isinstance(device, int) else device))
        if TAGS.get(self) == torch.device("cuda", index):
            return self
        copy = self.clone()
        TAGS[copy] = torch.device("cuda", index)
        return copy

    untyped.cuda = storage_cuda

    def remove() -> None:
        untyped.cuda = previous_cuda
        registry = getattr(serialization, "_package_registry", [])
        for number, item in enumerate(registry):
            if item[0] == _PRIORITY and item[1] is location:
                del registry[number]
                break

    return remove
