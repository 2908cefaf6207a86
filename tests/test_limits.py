"""What the virtual GPU does not model (fixdev/gpu/limits.py), as a user
meets it under ``fixdev --run``: one line naming the limit and the program's
line, exit 1 where the program cannot go on; never torch's own traceback."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

PREFIX = "fixdev: the virtual GPU does not model"

NCCL = """\
import torch
import torch.distributed as dist

dist.init_process_group(backend="nccl", init_method="tcp://127.0.0.1:29511", rank=0, world_size=1)
print("after")
"""

EXTENSION = """\
from torch.utils.cpp_extension import load_inline

kernels = load_inline(name="scale", cpp_sources="", cuda_sources="__global__ void scale(float* x) { x[0] *= 2; }", functions=[])
print("after")
"""

COMPILE = """\
import torch


@torch.compile(mode="max-autotune")
def doubled(x):
    return x * 2


def masked(x):
    return x * torch.ones(3)


x = torch.ones(3).cuda()
print("doubled", doubled(x).sum().item(), doubled(x).device)
model = torch.nn.Linear(3, 3).cuda()
model.compile()
print("model", model(x).device)
torch.compile(masked)(x)
"""

AUTOCAST = """\
import torch

model = torch.nn.Linear(4, 2).cuda()
x = torch.randn(3, 4).cuda()
scaler = torch.amp.GradScaler("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.autocast("cuda"):
    y = model(x)
print("autocast", y.dtype, y.device)
with torch.autocast("cuda", dtype=torch.bfloat16):
    print("bfloat16", model(x).dtype)
scaler.scale(y.float().sum()).backward()
scaler.step(optimizer)
scaler.update()
print("stepped", model.weight.device)
"""

FLOAT8 = """\
import torch

a = torch.randn(16, 16).cuda().to(torch.float8_e4m3fn)
b = torch.randn(16, 16).cuda().to(torch.float8_e4m3fn).t()
one = torch.tensor(1.0).cuda()
out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
print("float8", out.dtype, out.device)
"""


def run(fixdev, tmp_path, source: str):
    script = tmp_path / "program.py"
    script.write_text(source)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    return shown.returncode, shown.stdout.decode(), shown.stderr.decode(), script


def limit_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(PREFIX)]


@pytest.mark.parametrize(("source", "line", "said"), [
    (NCCL, 4, "torch.distributed with the NCCL backend ('nccl')"),
    (EXTENSION, 3, "a custom CUDA extension (torch.utils.cpp_extension.load_inline of 'scale' with cuda_sources)"),
])
def test_a_program_that_cannot_go_on_stops_with_one_line(fixdev, tmp_path, source, line, said):
    code, out, err, script = run(fixdev, tmp_path, source)
    assert code == 1, err
    assert "after" not in out
    assert limit_lines(err) == [f"{PREFIX} {said}{limit_lines(err)[0].split(said)[1]}"]
    assert f"(at {script}:{line}); stopping here" in err
    assert "Traceback" not in err, "no torch-internal traceback"


def test_torch_compile_runs_eagerly_and_its_device_errors_are_still_caught(fixdev, tmp_path):
    code, out, err, script = run(fixdev, tmp_path, COMPILE)
    assert "doubled 6.0 cuda:0" in out and "model cuda:0" in out, err
    assert limit_lines(err) == [f"{PREFIX} torch.compile: the code runs eagerly, uncompiled (its device errors are still caught) (first at {script}:4)"]
    assert code == 1
    assert f"fixdev --run: device error at {script}:10: in masked: RuntimeError: Expected all tensors to be on the same device" in err


def test_cuda_autocast_runs_as_cpu_autocast_in_the_same_dtype(fixdev, tmp_path):
    code, out, err, script = run(fixdev, tmp_path, AUTOCAST)
    assert code == 0, err
    assert "autocast torch.float16 cuda:0" in out  # CUDA's default autocast dtype, not the CPU's bfloat16
    assert "bfloat16 torch.bfloat16" in out and "stepped cuda:0" in out
    [said] = limit_lines(err)  # once, not at every autocast
    assert said.startswith(f'{PREFIX} CUDA autocast: torch.autocast("cuda") runs as the CPU\'s autocast in float16') and f"(first at {script}:7)" in said


def test_float8_matmul_runs_with_the_cpu_kernel_and_says_so(fixdev, tmp_path):
    code, out, err, script = run(fixdev, tmp_path, FLOAT8)
    assert code == 0, err
    assert "float8 torch.bfloat16 cuda:0" in out
    [said] = limit_lines(err)
    assert "torch._scaled_mm runs with the CPU's kernel (a GPU needs compute capability 8.9 or more" in said and f"(first at {script}:6)" in said
