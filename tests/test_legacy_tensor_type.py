"""legacy-tensor-type (FDV110), proved by running its rewrites.

The legacy CUDA types cannot run on CPU-only torch, nor on the fake GPU
(``torch.cuda.FloatTensor(3)`` raises ``TypeError: type torch.cuda.FloatTensor
not available``), so run.toml's script kind, which expects "Torch not compiled
with CUDA enabled", proves them only inside programs that also call
``.cuda()``. Here the rule runs alone, through the CLI on copies of the
fixture files: before, the legacy code raises; after, it runs, with the
dtype and values the legacy code gave. Where the legacy code was guarded (an
alias chosen by ``torch.cuda.is_available()``, a flag or ``x.is_cuda``), both
give the same values on the CPU, and on the fake GPU the rewrite puts its
tensors on CUDA, where the legacy CUDA type put them.
"""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import sys
from pathlib import Path
from unittest import mock

import pytest

from tests.conftest import FIXTURES
from tests.fakecuda import fake_gpu, require_toolchain

CASES = FIXTURES / "legacy-tensor-type"
NOT_AVAILABLE = "type torch.cuda.(Float|Long)Tensor not available"
_counter = itertools.count()


def load(path: Path, argv: list[str] | None = None):
    """Import ``path`` as a fresh module (its top level runs: scripts train
    there), with ``sys.argv`` as a command line would set it."""
    spec = importlib.util.spec_from_file_location(f"legacy_case_{next(_counter)}", path)
    module = importlib.util.module_from_spec(spec)
    with mock.patch.object(sys, "argv", [str(path), *(argv or [])]):
        spec.loader.exec_module(module)
    return module


def fixed_alone(case: str, tmp_path: Path, fixdev) -> tuple[Path, Path]:
    """The case's before file, and a copy rewritten by this rule alone."""
    before = CASES / f"{case}.before.py"
    after = tmp_path / f"{case}.py"
    shutil.copyfile(before, after)
    result = fixdev("--apply", "--select", "legacy-tensor-type", str(after))
    assert result.returncode == 0, result.stderr.decode()
    assert after.read_text() != before.read_text()
    return before, after


def test_unguarded_alias_raises_before_and_runs_after(tmp_path, fixdev):
    import numpy as np
    import torch

    before, after = fixed_alone("cuda_only_sampler", tmp_path, fixdev)
    with pytest.raises(TypeError, match=NOT_AVAILABLE):
        load(before).sample_z(shape=4, latent_dim=10, n_c=3)
    np.random.seed(0)
    zn, zc = load(after).sample_z(shape=4, latent_dim=10, n_c=3)
    np.random.seed(0)
    expected = torch.tensor(0.75 * np.random.normal(0, 1, (4, 10)), dtype=torch.float32)
    assert zn.dtype == zc.dtype == torch.float32
    torch.testing.assert_close(zn, expected, rtol=0, atol=0)
    assert zc.tolist() == [[1.0, 0.0, 0.0]] * 4


def test_direct_constructors_raise_before_and_run_after(tmp_path, fixdev):
    import torch

    before, after = fixed_alone("direct_constructors", tmp_path, fixdev)
    with pytest.raises(TypeError, match=NOT_AVAILABLE):
        load(before).one_hot_targets([1, 3], 4)
    targets = load(after).one_hot_targets([1, 3], 4)
    assert targets.dtype == torch.float32
    assert targets.tolist() == [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    assert "x.to(device, torch.float32)" in after.read_text()  # x.type(torch.cuda.FloatTensor)


@pytest.mark.fakecuda
def test_gan_alias_keeps_its_values_on_the_cpu_and_lands_on_cuda(tmp_path, fixdev):
    import torch

    require_toolchain()
    before, after = fixed_alone("gan_alias_script", tmp_path, fixdev)
    (old_losses, _), (new_losses, made) = load(before).train(), load(after).train()
    assert len(old_losses) == len(new_losses) == 6
    for a, b in zip(old_losses, new_losses):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert all(t.dtype == torch.float32 for t in made)
    # With CUDA the alias chose the CUDA type. Modules are built outside the
    # fake GPU (inside it they cannot move), and train() moves them in it.
    for path, fails in ((before, True), (after, False)):
        with mock.patch("torch.cuda.is_available", return_value=True):
            script = load(path)
        with fake_gpu(), torch.no_grad():
            if fails:
                with pytest.raises(TypeError, match=NOT_AVAILABLE):
                    script.train()
            else:
                losses, made = script.train()
                assert all(t.device.type == "cuda" and t.dtype == torch.float32 for t in (*made, losses[-1]))


@pytest.mark.fakecuda
def test_alias_chosen_by_a_flag_follows_the_flag(tmp_path, fixdev):
    import torch

    require_toolchain()
    before, after = fixed_alone("alias_by_flag", tmp_path, fixdev)
    torch.manual_seed(0)
    old = load(before).run()
    torch.manual_seed(0)
    new = load(after).run()
    for a, b in zip(old, new):
        assert a.dtype == b.dtype and a.device == b.device
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert new[0].dtype == torch.int64 and new[1].dtype == torch.float32
    for path, fails in ((before, True), (after, False)):
        for argv, expected in ((["--cuda"], "cuda"), ([], "cpu")):
            script = load(path, argv)  # the model is built here, outside the fake GPU
            with fake_gpu(), torch.no_grad():
                if fails and argv:
                    with pytest.raises(TypeError, match=NOT_AVAILABLE):
                        script.run()
                else:
                    # no --cuda: the CPU, where torch.LongTensor put it
                    assert all(t.device.type == expected for t in script.run())


@pytest.mark.fakecuda
def test_alias_that_follows_its_input_uses_the_input_device(tmp_path, fixdev):
    import numpy as np
    import torch

    require_toolchain()
    before, after = fixed_alone("alias_follows_input", tmp_path, fixdev)
    outputs = []
    for path in (before, after):
        torch.manual_seed(0)
        np.random.seed(0)
        encoder = load(path).Encoder()
        with torch.no_grad():
            outputs.append(encoder(torch.ones(2, 8)))
    for a, b in zip(*outputs):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for path, fails in ((before, True), (after, False)):
        encoder = load(path).Encoder()
        with fake_gpu(), torch.no_grad():
            encoder.to("cuda")
            x = torch.ones(2, 8).to("cuda")
            if fails:
                with pytest.raises(TypeError, match=NOT_AVAILABLE):
                    encoder(x)
            else:
                mu, z = encoder(x)
                assert z.device.type == "cuda" and z.dtype == torch.float32


def test_typed_cpu_constructor_of_a_device_tensor_raises_on_the_gpu(fixdev):
    """The reported case is a real failure: on the CPU the typed constructor
    returns an alias of an int64 tensor, on the (fake) GPU it raises; the
    `.long()` the message suggests runs on both."""
    import torch

    require_toolchain()
    path = CASES / "reported_cpu_type_of_a_device_tensor.before.py"
    case = load(path)
    scores = torch.tensor([[0.1, 0.9], [0.8, 0.2]])
    assert case.top_columns(scores, 1, "cpu").tolist() == [1, 0]
    with fake_gpu():
        with pytest.raises(TypeError, match="device=cpu"):
            case.top_columns(scores, 1, "cuda")
        labels = torch.tensor([0, 2, 1]).to("cuda")
        with pytest.raises(TypeError, match="device=cpu"):
            case.ranked(labels)
        assert torch.argsort(labels, descending=True).long().device.type == "cuda"
    report = fixdev("--check", "--output-format", "concise", "--select", "legacy-tensor-type", str(path)).stdout.decode()
    assert "use `torch.cat(found).long()`" in report and "use `order.long()`" in report


def test_held_type_name_becomes_the_tensor_it_names(tmp_path, fixdev):
    """`wt = x.type()` then `.type(wt)` → `.to(x)`: on the CPU the same dtype
    and values (the type name there is the CPU's), on a GPU `x`'s own device."""
    import torch

    before, after = fixed_alone("type_name_held", tmp_path, fixdev)
    for score in ([1, 2], [0.5]):
        old, new = load(before).RunningScores().add(score), load(after).RunningScores().add(score)
        assert old.dtype == new.dtype == torch.float32 and old.device == new.device
        torch.testing.assert_close(old, new, rtol=0, atol=0)
