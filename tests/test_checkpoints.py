"""Checkpoints on the virtual GPU (fixdev/gpu/checkpoints.py), as a user
makes them: scripts saved and loaded under ``fixdev --run``, and in a plain
CPU process without fixdev."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SAVE = """\
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2).cuda()
torch.save({"model": model.state_dict(), "steps": torch.ones(3).cuda(), "epoch": 3}, sys.argv[1])
torch.save(model, sys.argv[1] + ".whole")
torch.save(model.state_dict(), sys.argv[1] + ".weights")
print("saved from", model.weight.device)
"""

# argv: the checkpoint, then a map_location ("-": none) and "weights" for weights_only=True
LOAD = """\
import sys

import torch
import torch.nn as nn

where = {} if sys.argv[2] == "-" else {"map_location": sys.argv[2]}
only = {"weights_only": True} if "weights" in sys.argv[3:] else {}
state = torch.load(sys.argv[1], **where, **only)
print("state on", state["model"]["weight"].device, state["steps"].device, state["epoch"])
model = nn.Linear(4, 2)
model.load_state_dict(state["model"])
if not only:
    whole = torch.load(sys.argv[1] + ".whole", weights_only=False, **where)
    print("whole model on", whole.weight.device)
    print("output", tuple(whole(torch.randn(3, 4)).shape))
"""

# what each location the file names is, read without loading any storage anywhere
LOCATIONS = """\
import sys

import torch

seen = []
torch.load(sys.argv[1], map_location=lambda storage, location: seen.append(location) or storage)
print("locations", sorted(set(seen)))
"""

MISMATCH = "Expected all tensors to be on the same device"
NO_CUDA = "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False"


def plain(*argv, cwd):
    """A CPU process without fixdev's hook: what a CPU-only machine does with the file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIXDEV_RUN")}
    return subprocess.run([sys.executable, *argv], capture_output=True, cwd=cwd, env=env)


@pytest.fixture()
def saved(tmp_path, fixdev):
    for name, text in (("save.py", SAVE), ("load.py", LOAD), ("locations.py", LOCATIONS)):
        (tmp_path / name).write_text(text)
    done = fixdev("--run", "--", "python", "save.py", "model.pt", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.decode() == "saved from cuda:0\n", done.stderr.decode()
    return tmp_path


def test_a_checkpoint_saved_on_the_virtual_gpu_names_cuda_as_a_gpus_does(saved):
    shown = plain("locations.py", "model.pt", cwd=saved)
    assert shown.stdout.decode() == "locations ['cuda:0']\n", shown.stderr.decode()


def test_runtime_to_runtime_loads_on_cuda_and_the_model_mismatches_a_cpu_input(saved, fixdev):
    shown = fixdev("--run", "--", "python", "load.py", "model.pt", "-", cwd=saved)
    out, err = shown.stdout.decode(), shown.stderr.decode()
    assert "state on cuda:0 cuda:0 3\nwhole model on cuda:0\n" in out, err
    assert shown.returncode == 1 and f"device error at {saved / 'load.py'}:15: in <module>: RuntimeError: {MISMATCH}" in err
    mapped = fixdev("--run", "--", "python", "load.py", "model.pt", "cpu", cwd=saved)
    assert mapped.returncode == 0 and mapped.stdout.decode() == "state on cpu cpu 3\nwhole model on cpu\noutput (3, 2)\n", mapped.stderr.decode()
    moved = fixdev("--run", "--gpus", "2", "--", "python", "load.py", "model.pt", "cuda:1", "weights", cwd=saved)
    assert moved.returncode == 0 and moved.stdout.decode() == "state on cuda:1 cuda:1 3\n", moved.stderr.decode()


def test_runtime_to_a_plain_cpu_process_fails_without_map_location_and_loads_with_it(saved):
    for extra in ((), ("weights",)):
        failed = plain("load.py", "model.pt", "-", *extra, cwd=saved)
        assert failed.returncode == 1 and NO_CUDA in failed.stderr.decode(), "torch's own error on a CPU-only machine"
        loaded = plain("load.py", "model.pt", "cpu", *extra, cwd=saved)
        assert loaded.returncode == 0 and loaded.stdout.decode().startswith("state on cpu cpu 3\n"), loaded.stderr.decode()


def test_weights_only_loads_on_cuda_under_the_runtime(saved, fixdev):
    shown = fixdev("--run", "--", "python", "load.py", "model.pt", "-", "weights", cwd=saved)
    assert shown.returncode == 0 and shown.stdout.decode() == "state on cuda:0 cuda:0 3\n", shown.stderr.decode()


# A file as a GPU machine writes it, made without the runtime: torch's own
# location tagger answering "cuda:0", as it does for a CUDA storage.
GPU_FILE = """\
import sys
from unittest import mock

import torch
import torch.nn as nn

torch.manual_seed(0)
with mock.patch("torch.serialization.location_tag", return_value="cuda:0"):
    torch.save({"model": nn.Linear(4, 2).state_dict(), "steps": torch.ones(3), "epoch": 3}, sys.argv[1])
"""


def test_a_file_saved_on_a_gpu_loads_under_the_runtime_without_map_location(tmp_path, fixdev):
    (tmp_path / "gpu_file.py").write_text(GPU_FILE)
    (tmp_path / "load.py").write_text(LOAD)
    assert plain("gpu_file.py", "gpu.pt", cwd=tmp_path).returncode == 0
    assert NO_CUDA in plain("load.py", "gpu.pt", "-", "weights", cwd=tmp_path).stderr.decode()
    shown = fixdev("--run", "--", "python", "load.py", "gpu.pt", "-", "weights", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.decode() == "state on cuda:0 cuda:0 3\n", shown.stderr.decode()
    missing = fixdev("--run", "--", "python", "load.py", "gpu.pt", "cuda:1", "weights", cwd=tmp_path)
    assert missing.returncode == 1 and b"Attempting to deserialize object on CUDA device 1 but torch.cuda.device_count() is 1" in missing.stderr


RESTORE = """\
import torch
import torch.nn as nn


def restore(path):
    model = nn.Linear(4, 2)
    model.load_state_dict(torch.load(path, weights_only=True))
    return model


print("restored", restore("model.pt.weights").weight.shape)
"""


def test_gpus_0_fails_to_load_a_cuda_checkpoint_as_a_cpu_wheel_and_map_location_fixes_it(saved, fixdev):
    script = saved / "restore.py"
    script.write_text(RESTORE)
    shown = fixdev("--run", "--gpus", "0", "--", "python", "restore.py", cwd=saved)
    err = shown.stderr.decode()
    assert shown.returncode == 1 and f"device error at {script}:7: in restore: RuntimeError: {NO_CUDA}" in err, err
    assert "FDV105" in err
    fixed = fixdev("--run", "--gpus", "0", "--apply", "--", "python", "restore.py", cwd=saved)
    assert fixed.returncode == 0, fixed.stderr.decode()
    assert 'torch.load(path, weights_only=True, map_location="cpu")' in script.read_text()
    assert b"restored torch.Size([2, 4])" in fixed.stdout and b"round 2: the command completed" in fixed.stderr
