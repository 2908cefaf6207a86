"""``nn.DataParallel`` on the virtual GPU (``fixdev --run``): the
collectives it calls (``torch.nn.parallel.comm``'s scatter, gather and
broadcasts, C++ functions a CPU build lacks) as copies between virtual
devices, so a model wrapped in ``DataParallel`` runs forward and backward
on one or more virtual devices: the batch split across them, the module
replicated, the outputs gathered, the gradients summed on the first device.

And the Python the autograd engine calls back: the gradients a custom ``autograd.Function``'s ``backward`` receives
(DataParallel's own Scatter and Gather among them): the autograd engine
makes them in C++, untagged, so they are tagged with the devices of the
outputs they belong to, as a GPU's engine hands them on those devices,
and the ``backward`` runs under the virtual GPU's mode, as does the
recomputation of ``torch.utils.checkpoint(use_reentrant=False)``.
"""

from __future__ import annotations

from typing import Any, Callable

from fixdev.gpu.tags import tag, tag_of


def install(torch: Any, patch: Callable[[Any, str, Any], None], under_mode: Callable[[Callable[[], Any]], Any]) -> None:
    """Patch ``comm``, ``autograd.Function`` and checkpointing's recomputation
    through ``patch(owner, name, value)``; ``under_mode(call)`` runs ``call``
    with the virtual GPU's mode on (``backward()`` runs the autograd engine,
    and so the Python it calls back, with the mode off: the mode handles
    ``backward`` itself)."""
    from torch.nn.parallel import comm

    def place(tensor: Any, device: Any) -> Any:
        return tensor.to(torch.device("cuda", device) if isinstance(device, int) else device)

    def index(device: Any) -> Any:
        if device is None:
            return torch.cuda.current_device()
        if isinstance(device, torch.device):
            return device if device.type == "cpu" else device.index
        if isinstance(device, str):
            return index(torch.device(device))
        return torch.device("cpu") if device == -1 else device

    def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
        if out is not None:
            chunks = tensor.split([o.size(dim) for o in out], dim)
            for target, chunk in zip(out, chunks):
                target.copy_(chunk)
            return tuple(out)
        devices = [index(d) for d in devices]
        tensor = torch.view_as_real(tensor) if tensor.is_complex() else tensor
        chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes else tensor.chunk(len(devices), dim)
        return tuple(place(chunk.contiguous(), device) for chunk, device in zip(chunks, devices))

    def gather(tensors, dim=0, destination=None, *, out=None):
        if out is not None:
            return out.copy_(torch.cat([t.to(out.device) for t in tensors], dim))
        target = index(destination)
        return place(torch.cat([place(t, target) for t in tensors], dim), target)

    def broadcast(tensor, devices=None, *, out=None):
        if out is not None:
            for target in out:
                target.copy_(tensor)
            return tuple(out)
        return tuple(tensor if tag_of(tensor) == torch.device("cuda", index(d)) else place(tensor, index(d)) for d in devices)

    def broadcast_coalesced(tensors, devices, buffer_size=10485760):
        # the first device's copies are the tensors themselves, as in C++
        return [[t if tag_of(t) == torch.device("cuda", index(d)) else place(t, index(d)) for t in tensors] for d in devices]

    from torch.nn.parallel import _functions

    def scatter_forward(ctx, target_gpus, chunk_sizes, dim, input):
        # Scatter.forward without its background copy streams for a CPU
        # batch (the copies here are done when they return)
        ctx.dim = dim
        ctx.input_device = input.get_device() if input.device.type != "cpu" else -1
        outputs = scatter(input, target_gpus, chunk_sizes, dim)
        return tuple(torch.view_as_complex(o) for o in outputs) if input.is_complex() else outputs

    patch(_functions.Scatter, "forward", staticmethod(scatter_forward))
    for name, value in (("scatter", scatter), ("gather", gather), ("broadcast", broadcast), ("broadcast_coalesced", broadcast_coalesced)):
        patch(comm, name, value)

    function = torch.autograd.function
    started = function.Function.__dict__["apply"].__func__
    backward = function.BackwardCFunction.apply

    def apply(cls, *args, **kwargs):
        out = started(cls, *args, **kwargs)
        outputs = out if isinstance(out, tuple) else (out,)
        for item in outputs:
            node = getattr(item, "grad_fn", None) if isinstance(item, torch.Tensor) else None
            if isinstance(node, function.BackwardCFunction):
                node._fixdev_devices = [tag_of(o) if isinstance(o, torch.Tensor) else None for o in outputs]
                break
        return out

    def backward_apply(self, *grads):
        for grad, device in zip(grads, getattr(self, "_fixdev_devices", ())):
            if device is not None and isinstance(grad, torch.Tensor) and tag_of(grad) is None:
                tag(grad, device)
        return under_mode(lambda: backward(self, *grads))

    patch(function.Function, "apply", classmethod(apply))
    patch(function.BackwardCFunction, "apply", backward_apply)

    # torch.utils.checkpoint without reentrance recomputes in a saved-tensor
    # hook, in the engine: under the mode, so that its draws come from the
    # device's generator whose state it restored
    from torch.utils import checkpoint

    frame = getattr(checkpoint, "_CheckpointFrame", None)
    if frame is not None:
        made = frame.__init__

        def init(self, recompute_fn, *args, **kwargs):
            made(self, lambda *inputs: under_mode(lambda: recompute_fn(*inputs)), *args, **kwargs)

        patch(frame, "__init__", init)
