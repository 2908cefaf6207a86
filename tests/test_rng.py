"""Random draws on the virtual GPU (fixdev/gpu/rng.py), through ``fixdev
--run`` on scripts: each device's own generator, seeded and saved as
torch.cuda's, so gradient checkpointing recomputes the same dropout."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

STREAMS = """\
import torch
import torch.nn.functional as F

torch.manual_seed(0)
first, second = torch.randn(3), torch.randn(3)
torch.manual_seed(0)
a = torch.randn(3)
drawn = torch.randn(3, device="cuda")
b = torch.randn(3)
print("cpu stream untouched by a cuda draw:", torch.equal(first, a) and torch.equal(second, b))
print("cuda draw on", drawn.device, "as a CPU generator seeded 0:", torch.equal(drawn.cpu(), torch.randn(3, generator=torch.Generator().manual_seed(0))))
x = torch.ones(1000, device="cuda")
for name, draw in (("rand_like", lambda: torch.rand_like(x)), ("dropout", lambda: F.dropout(x, 0.5)),
                   ("bernoulli_", lambda: x.clone().bernoulli_(0.5)), ("normal_", lambda: x.clone().normal_()),
                   ("randint", lambda: torch.randint(0, 9, (1000,), device="cuda"))):
    torch.cuda.manual_seed(7)
    one = draw()
    torch.cuda.manual_seed(7)
    cpu = torch.rand(5)  # the CPU's draws between leave the device's stream alone
    two = draw()
    state = torch.cuda.get_rng_state()
    three = draw()
    torch.cuda.set_rng_state(state)
    print(name, one.device, torch.equal(one, two), torch.equal(three, draw()), not torch.equal(two, three))
torch.cuda.manual_seed_all(3)
states = torch.cuda.get_rng_state_all()
u = torch.rand(4, device="cuda:1")
torch.cuda.set_rng_state_all(states)
print("all:", len(states), torch.equal(u, torch.rand(4, device="cuda:1")), torch.cuda.initial_seed())
"""


def test_run_draws_on_a_device_from_its_own_generator_seeded_and_saved_as_torch_cuda_says(tmp_path, fixdev):
    (tmp_path / "streams.py").write_text(STREAMS)
    shown = fixdev("--run", "--gpus", "2", "--", "python", "streams.py", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    assert shown.stdout.decode().splitlines() == [
        "cpu stream untouched by a cuda draw: True",
        "cuda draw on cuda:0 as a CPU generator seeded 0: True",
        *(f"{name} cuda:0 True True True" for name in ("rand_like", "dropout", "bernoulli_", "normal_", "randint")),
        "all: 2 True 3",
    ]


CHECKPOINTED = """\
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def grads(checkpointed, reentrant):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.5), nn.ReLU(), nn.Linear(32, 2)).cuda()
    x = torch.randn(16, 8, device="cuda", requires_grad=True)
    out = checkpoint(net, x, use_reentrant=reentrant) if checkpointed else net(x)
    torch.rand(100, device="cuda")  # the device's stream moves on before the backward
    out.sum().backward()
    return [x.grad, *(p.grad for p in net.parameters())]


for reentrant in (False, True):
    plain, again = grads(False, reentrant), grads(True, reentrant)
    print("use_reentrant", reentrant, all(torch.equal(a, b) for a, b in zip(plain, again)), again[0].device)
"""


def test_run_gradient_checkpointing_recomputes_the_same_dropout(tmp_path, fixdev):
    (tmp_path / "checkpointed.py").write_text(CHECKPOINTED)
    shown = fixdev("--run", "--", "python", "checkpointed.py", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    assert shown.stdout.decode().splitlines() == ["use_reentrant False True cuda:0", "use_reentrant True True cuda:0"]
