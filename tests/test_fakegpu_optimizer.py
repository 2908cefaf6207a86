"""The fake GPU and optimizers: a move keeps the optimizer's hold on the
parameters, as a real move (in place) does, and state loaded before the move
stays on the CPU, so ``step()`` fails as it does on CUDA."""

from __future__ import annotations

import pytest

from tests.fakecuda import MISMATCH, fake_gpu, require_toolchain

pytestmark = pytest.mark.fakecuda

OPTIMIZERS = [("SGD", {"lr": 0.1, "momentum": 0.9}), ("RMSprop", {"lr": 0.1}), ("Adadelta", {})]


@pytest.fixture(autouse=True)
def toolchain():
    require_toolchain()


def _saved_state(name, options):
    """An optimizer's state dict after one step on the CPU (momentum and
    running averages exist only after a step)."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = getattr(torch.optim, name)(model.parameters(), **options)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    return optimizer.state_dict()


def _step(optimizer, model):
    import torch

    for parameter in model.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()


@pytest.mark.parametrize("name, options", OPTIMIZERS, ids=[name for name, _ in OPTIMIZERS])
def test_state_loaded_before_the_move_fails_the_step(name, options):
    import torch
    import torch.nn as nn

    state = _saved_state(name, options)
    model = nn.Linear(4, 2)
    with fake_gpu():
        optimizer = getattr(torch.optim, name)(model.parameters(), **options)
        optimizer.load_state_dict(state)
        model.to("cuda")
        assert all(a is b for a, b in zip(optimizer.param_groups[0]["params"], model.parameters()))
        with pytest.raises(RuntimeError, match=MISMATCH):
            _step(optimizer, model)


@pytest.mark.parametrize("name, options", OPTIMIZERS, ids=[name for name, _ in OPTIMIZERS])
def test_state_loaded_after_the_move_steps(name, options):
    import torch
    import torch.nn as nn

    state = _saved_state(name, options)
    model = nn.Linear(4, 2)
    with fake_gpu():
        model.to("cuda")
        optimizer = getattr(torch.optim, name)(model.parameters(), **options)
        optimizer.load_state_dict(state)
        _step(optimizer, model)
        devices = {value.device.type for entry in optimizer.state.values() for value in entry.values() if isinstance(value, torch.Tensor) and value.dim()}
        assert devices == {"cuda"}


def test_an_optimizer_made_before_the_move_steps_the_moved_parameters():
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(4, 2), nn.ReLU(), nn.Linear(2, 1))
    with fake_gpu():
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model.to("cuda")
        _step(optimizer, model)
        assert [p.device.type for p in optimizer.param_groups[0]["params"]] == ["cuda"] * 4
        assert all(a is b for a, b in zip(optimizer.param_groups[0]["params"], model.parameters()))
