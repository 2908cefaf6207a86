"""A small CNN trained on the virtual GPU (``fixdev.gpu.runtime``) and on the
plain CPU: the losses must agree to the last bit, and the time ratio says
what the runtime costs. Layers, sizes, optimizer and seed are fixed here.

    python benchmarks/virtual_gpu_cnn.py [--steps 50] [--batch 32]
"""

from __future__ import annotations

import argparse
import time


def train(steps: int, batch: int, device: str) -> list[float]:
    """SGD with momentum on random 3x32x32 batches; the losses by ``.item()``."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1)  # the data, drawn on the CPU as a loader would
    losses = []
    for _ in range(steps):
        images = torch.randn(batch, 3, 32, 32, generator=generator)
        labels = torch.randint(0, 10, (batch,), generator=generator)
        images, labels = images.to(device), labels.to(device)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def measure(steps: int, batch: int) -> dict:
    from fixdev.gpu.runtime import virtual_gpu

    train(2, batch, "cpu")  # oneDNN's first convolutions are slow: warm up before timing
    start = time.perf_counter()
    plain = train(steps, batch, "cpu")
    plain_s = time.perf_counter() - start
    with virtual_gpu(1):
        start = time.perf_counter()
        virtual = train(steps, batch, "cuda")
        virtual_s = time.perf_counter() - start
    return {"steps": steps, "batch": batch, "identical": plain == virtual, "plain_s": plain_s, "virtual_s": virtual_s,
            "ratio": virtual_s / plain_s, "plain": plain, "virtual": virtual}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, nargs="+", default=[32, 4])
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # a steady measure on a shared machine
    for batch in args.batch:
        result = measure(args.steps, batch)
        print(f"batch {batch}: {result['steps']} steps, losses bit-identical: {result['identical']}, "
              f"plain {result['plain_s']:.2f} s, virtual GPU {result['virtual_s']:.2f} s, ratio {result['ratio']:.2f}x")


if __name__ == "__main__":
    main()
