"""DataLoader workers under ``fixdev --run`` (fixdev/gpu/workers.py and the
``sitecustomize`` hook): under ``spawn`` and ``forkserver`` each worker is a
new Python that gets the virtual GPU from the hook; a tensor keeps its device
on its way to the worker and back, and a device error raised in a worker is
reported at the user's line inside it."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

# argv: the start method, then where __getitem__ puts a sample ("cpu" or
# "cuda") and where the model is ("cpu" or "cuda").
LOADER = """\
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.full((3,), float(i))
        if sys.argv[2] == "cuda":
            x = x.cuda()
        return x


def main():
    model = torch.nn.Linear(3, 2)
    if sys.argv[3] == "cuda":
        model = model.cuda()
    loader = DataLoader(Samples(), batch_size=4, num_workers=2, multiprocessing_context=sys.argv[1])
    total = 0.0
    for batch in loader:
        print("batch on", batch.device, flush=True)
        total += model(batch).sum().item()
    print("total", total)


if __name__ == "__main__":
    main()
"""

# A dataset built in the main process holds a tensor on the GPU; pickled to
# the worker, it must still be there, and the sum in the worker mismatches.
IN_WORKER = """\
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Shifted(Dataset):
    def __init__(self):
        self.offset = torch.ones(3).cuda()

    def __len__(self):
        return 8

    def __getitem__(self, i):
        x = torch.full((3,), float(i))
        return x + self.offset


if __name__ == "__main__":
    for batch in DataLoader(Shifted(), batch_size=4, num_workers=2, multiprocessing_context=sys.argv[1]):
        print(batch.device)
"""

CONTEXTS = ["spawn", "forkserver", "fork"]  # fork: the worker inherits the runtime; its error must still cross back


def run(fixdev, tmp_path, source: str, *argv: str, gpus: str = "1"):
    script = tmp_path / "train.py"
    script.write_text(source)
    shown = fixdev("--run", "--gpus", gpus, "--", "python", str(script), *argv, cwd=tmp_path)
    return shown.returncode, shown.stdout.decode(), shown.stderr.decode(), script


# Each run starts three Pythons that import torch (about 20 s on a loaded
# machine): the start methods share the cases where the paths are the same.


def test_a_batch_a_worker_moved_with_cuda_arrives_on_the_gpu(tmp_path, fixdev):
    code, out, err, _ = run(fixdev, tmp_path, LOADER, "spawn", "cuda", "cuda")
    assert code == 0, err
    assert out.count("batch on cuda:0") == 2, out


def test_a_worker_moving_its_samples_with_cuda_is_caught_at_the_model_left_on_the_cpu(tmp_path, fixdev):
    code, out, err, script = run(fixdev, tmp_path, LOADER, "forkserver", "cuda", "cpu")
    assert code == 1, err
    assert "batch on cuda:0" in out
    assert f"fixdev --run: device error at {script}:26: in main: RuntimeError: Expected all tensors to be on the same device" in err


def test_a_cpu_batch_from_a_worker_meeting_the_model_on_the_gpu_is_caught(tmp_path, fixdev):
    code, out, err, script = run(fixdev, tmp_path, LOADER, "spawn", "cpu", "cuda")
    assert code == 1, err
    assert "batch on cpu" in out
    assert f"device error at {script}:26: in main: RuntimeError: Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on cuda:0" in err
    assert "why: " in err  # what --traceback says follows


@pytest.mark.parametrize("context", CONTEXTS)
def test_a_device_error_in_a_worker_is_reported_at_the_users_line_in_the_worker(tmp_path, fixdev, context):
    code, out, err, script = run(fixdev, tmp_path, IN_WORKER, context)
    assert code == 1, err
    assert "Caught RuntimeError in DataLoader worker process" in err  # as torch reports it on a GPU
    assert f"device error at {script}:16: in __getitem__: RuntimeError: Expected all tensors to be on the same device" in err
    assert "fix: FDV102" in err
    assert "fixdev/gpu/" not in err.split("Original Traceback")[1].split("fixdev --run:")[0], "the runtime's frames are trimmed"


def test_a_worker_asking_for_cuda_on_a_cpu_only_machine_fails_there(tmp_path, fixdev):
    code, out, err, script = run(fixdev, tmp_path, LOADER, "spawn", "cuda", "cpu", gpus="0")
    assert code == 1, err
    assert "Torch not compiled with CUDA enabled" in err
    assert f"device error at {script}:14: in __getitem__" in err
