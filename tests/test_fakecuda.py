"""Proof that the fixes fix: each runnable fixture pair is executed. Before the
fix the code fails the way it fails on a real GPU; after it, it runs; on the
CPU both give the same result. How to run each case is in the rule folder's
``run.toml``, so the fixture files stay plain, realistic code."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from unittest import mock

import pytest

from tests.conftest import FIXTURES
from tests.fakecuda import MISMATCH, fake_gpu, require_toolchain

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.fakecuda

CASES = [
    pytest.param(folder.name, name, spec, id=f"{folder.name}/{name}")
    for folder in sorted(FIXTURES.iterdir())
    if (folder / "run.toml").is_file()
    for name, spec in tomllib.loads((folder / "run.toml").read_text()).items()
]
_counter = itertools.count()


@pytest.fixture(autouse=True)
def toolchain():
    require_toolchain()


def load(path: Path):
    """Import a fixture file as a fresh module."""
    spec = importlib.util.spec_from_file_location(f"fixture_{next(_counter)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pair(rule: str, case: str) -> tuple[Path, Path]:
    return FIXTURES / rule / f"{case}.before.py", FIXTURES / rule / f"{case}.after.py"


def evaluate(expression: str, fixture=None):
    """A ``run.toml`` argument: with torch, nn, the stand-ins of
    ``tests/standins.py`` (``Tokenizer()``, ``TinyLM()``) and, as
    ``fixture``, the fixture file being run (``fixture.Scorer()``)."""
    from tests import standins

    return eval(expression, standins.names(fixture))


def build(module, spec):
    import torch

    torch.manual_seed(0)
    model = getattr(module, spec["build"])(*[evaluate(a) for a in spec.get("args", [])])
    model.eval()
    return model


def inputs(spec):
    import torch

    torch.manual_seed(1)
    dtype = getattr(torch, spec.get("dtype", "float32"))
    return [torch.randn(*shape).to(dtype) for shape in spec["inputs"]]


def forward(model, spec, xs, device="cpu"):
    import torch

    if "prepare" in spec:
        getattr(model, spec["prepare"])(device)
    torch.manual_seed(2)
    with torch.no_grad():
        return model(*xs)


def run_on_fake_gpu(model, spec):
    xs = inputs(spec)
    with fake_gpu():
        model.to("cuda")
        out = forward(model, spec, [x.to("cuda") for x in xs], "cuda")
        return out.device


def test_at_least_two_runnable_cases_per_rule():
    from fixdev.engine.registry import all_rules

    # Not unused-noqa's: its fixes change comments only, nothing to run.
    counts = {rule.name: sum(1 for case in CASES if case.values[0] == rule.name) for rule in all_rules() if not rule.judges_noqa}
    assert all(n >= 2 for n in counts.values()), counts


# Pairs this harness cannot run (its limits, not the fixes'): the function
# builds its model inside the call, and FakeTensorMode cannot move a module
# made inside it ("Couldn't swap Linear.weight"), or the file picks its device
# at import, which this harness does outside the fake GPU; or it packs
# sequences, whose packed size depends on the lengths' values. The virtual GPU of
# tests/test_runtime.py runs them, before failing and after completing.
FAKE_MODE_CANNOT_RUN = {
    *(f"unregistered-submodule/{case}" for case in ("model_never_moved_helper", "model_never_moved_loop", "trainer_stores_model", "scorer_given_encoder")),
    *(f"numpy-on-device/{case}" for case in ("packed_lengths_from_padding", "packed_lengths_annotated", "packed_lengths_made_on_device")),
}


@pytest.mark.parametrize("rule, case, spec", [
    pytest.param(*case.values, id=case.id, marks=[pytest.mark.xfail(strict=True, reason="a module built inside the fake mode, or a device picked at import")]
                 if case.id in FAKE_MODE_CANNOT_RUN else []) for case in CASES])
def test_fix_is_proved_by_running_it(rule, case, spec):
    before_path, after_path = pair(rule, case)
    kind = spec["kind"]
    before, after = load(before_path), load(after_path)
    if kind in ("module", "buffer"):
        check_module(before, after, spec)
        if kind == "buffer":
            check_state_dict_compatible(before, after, spec)
    elif kind == "script":
        check_script(before_path, after_path, spec)
    elif kind == "checkpoint":
        check_checkpoint(before, after, spec)
    elif kind == "function":
        check_function(before, after, spec)
    elif kind == "cache":
        check_cache(before, after, spec)
    elif kind == "optimizer":
        check_optimizer(before, after, spec)
    elif kind == "moves_itself":
        check_script(before_path, after_path, spec)
        check_moves_itself(before_path, after_path, spec)
    else:
        pytest.fail(f"unknown kind {kind!r} in {rule}/run.toml")


def check_module(before, after, spec):
    import torch

    with pytest.raises(RuntimeError, match=MISMATCH):
        run_on_fake_gpu(build(before, spec), spec)
    assert run_on_fake_gpu(build(after, spec), spec).type == "cuda"
    expected = forward(build(before, spec), spec, inputs(spec))
    actual = forward(build(after, spec), spec, inputs(spec))
    if not spec.get("dtype_may_change"):
        assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.to(expected.dtype), expected)


def check_moves_itself(before_path, after_path, spec):
    """The module is on the (fake) GPU and its inputs stay on the CPU: the
    before's `.cuda()` moves them, and the after's `.to(...)` must too. With
    `call`, the function gets its arguments as written (modules moved to the
    GPU, tensors left on the CPU), the file imported under the fake GPU so a
    module-level device definition sees one."""
    import torch

    for path in (before_path, after_path):
        if "call" in spec:
            args = [evaluate(a) for a in spec.get("args", [])]  # modules are built outside the mode
            with fake_gpu():
                module = load(path)
                args = [a.to("cuda") if isinstance(a, torch.nn.Module) else a for a in args]
                out = getattr(module, spec["call"])(*args)
        else:
            model = build(load(path), spec)
            with fake_gpu():
                model.to("cuda")
                out = forward(model, spec, inputs(spec), "cuda")
        assert isinstance(out, torch.Tensor)


def check_cache(before, after, spec):
    """A module that caches a tensor on its first forward: run once on the
    CPU, then move it to the GPU and run again. Before the fix the cached
    tensor stayed behind; after it, it moved with the module."""
    for module, should_fail in ((before, True), (after, False)):
        model = build(module, spec)
        forward(model, spec, inputs(spec))  # fills the cache on the CPU
        if should_fail:
            with pytest.raises(RuntimeError, match=MISMATCH):
                run_on_fake_gpu(model, spec)
        else:
            assert run_on_fake_gpu(model, spec).type == "cuda"


def check_state_dict_compatible(before, after, spec):
    old = build(before, spec).state_dict()
    fixed = build(after, spec)
    fixed.load_state_dict(old, strict=True)
    assert set(fixed.state_dict()) == set(old)


def check_script(before_path, after_path, spec):
    # fresh imports: module-level device definitions read torch.cuda.is_available()
    for path, should_fail in ((before_path, True), (after_path, False)):
        module = load(path)
        def run():
            if "build" in spec:
                return forward(build(module, spec), spec, inputs(spec))
            return getattr(module, spec["call"])(*[evaluate(a) for a in spec.get("args", [])])
        if should_fail:
            with pytest.raises((AssertionError, RuntimeError), match=spec.get("fails_with", "Torch not compiled with CUDA enabled")):
                run()
        else:
            run()
    if "gpu_args" in spec:
        # the after also runs on the (fake) GPU, given these (made on the CPU)
        args = [evaluate(a) for a in spec["gpu_args"]]
        with fake_gpu():
            getattr(load(after_path), spec["call"])(*args)


def check_checkpoint(before, after, spec, tmp_path_factory=None):
    import tempfile

    import torch
    import torch.nn as nn

    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "checkpoint.pth")
        torch.manual_seed(0)
        with mock.patch("torch.serialization.location_tag", return_value="cuda:0"):
            torch.save(nn.Linear(10, 5).state_dict(), path)
        extra = [evaluate(a) for a in spec.get("args", [])]
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            getattr(before, spec["call"])(path, *extra)
        restored = getattr(after, spec["call"])(path, *extra)
        torch.manual_seed(0)
        torch.testing.assert_close(restored.weight, nn.Linear(10, 5).weight)


def check_optimizer(before, after, spec):
    """A function that builds an optimizer, loads a checkpoint's optimizer
    state into it and moves the model (FDV112), called as ``call(model,
    checkpoint, *args)``. The checkpoint holds ``spec["optimizer"]``'s state
    after one step. On the fake GPU the next step fails before the fix and
    runs after it; on the CPU (``cpu_args``) both step to the same weights."""
    import torch
    import torch.nn as nn

    def model():
        torch.manual_seed(0)
        return evaluate(spec.get("model", "nn.Linear(4, 2)"))

    def step(net, optimizer):
        for parameter in net.parameters():
            parameter.grad = torch.ones_like(parameter)
        optimizer.step()

    def checkpoint():
        trained = model()
        optimizer = eval(spec["optimizer"], {"torch": torch, "nn": nn, "model": trained})
        step(trained, optimizer)
        return {"model": trained.state_dict(), "optimizer": optimizer.state_dict()}

    def resume(module, net, args):
        return getattr(module, spec["call"])(net, checkpoint(), *[evaluate(a) for a in args])

    for module, should_fail in ((before, True), (after, False)):
        net = model()  # built on the CPU, outside the fake mode
        with fake_gpu():
            optimizer = resume(module, net, spec.get("args", ["'cuda'"]))
            if should_fail:
                with pytest.raises(RuntimeError, match=MISMATCH):
                    step(net, optimizer)
            else:
                step(net, optimizer)
    stepped = []
    for module in (before, after):
        net = model()
        step(net, resume(module, net, spec.get("cpu_args", ["'cpu'"])))
        stepped.append([parameter.detach() for parameter in net.parameters()])
    for was, now in zip(*stepped):
        torch.testing.assert_close(now, was)


def check_function(before, after, spec):
    import torch

    for module, should_fail in ((before, True), (after, False)):
        args = [evaluate(a, module) for a in spec.get("args", [])]
        with fake_gpu():
            # move_args = false: the function moves its model itself, as a
            # training function does (a second move of a module already on the
            # fake GPU fails in FakeTensorMode: "Couldn't swap Linear.weight")
            moving = spec.get("move_args", True)
            moved = [a.to("cuda") if moving and isinstance(a, (torch.nn.Module, torch.Tensor)) else a for a in args]
            call = lambda: getattr(module, spec["call"])(*moved)  # noqa: E731
            if should_fail:
                # fails_with: the error a GPU gives where it is not a mismatch
                # (a legacy constructor rejects a CUDA device)
                with pytest.raises(RuntimeError, match=spec.get("fails_with", MISMATCH)):
                    call()
            else:
                call()


def test_seed_program_rewritten_by_fixdev_trains_on_a_fake_gpu(tmp_path, fixdev):
    """The second article's RobustModel/Trainer program, end to end: fixdev
    rewrites it; before, it fails on CPU-only torch and mismatches on a GPU;
    after, it trains on the CPU and its training forward pass and loss run on
    the fake GPU."""
    import math
    import shutil

    import torch
    import torch.nn as nn

    program = Path(__file__).parent / "programs" / "robust_trainer.py"
    fixed_path = tmp_path / "robust_trainer.py"
    shutil.copyfile(program, fixed_path)
    # the buffer and the draw on x's device are unsafe fixes (a buffer follows .half(), the draw
    # draws from the GPU's generator): the program documents them, so they are applied
    result = fixdev("--apply", "--unsafe-fixes", str(fixed_path))
    assert result.returncode == 0, result.stderr.decode()
    fixed_text = fixed_path.read_text()
    for expected in ('self.register_buffer("noise_scale"', "torch.randn(x.shape, device=x.device)", "model.to(device)", "data.to(device), target.to(device)"):
        assert expected in fixed_text

    before, after = load(program), load(fixed_path)
    with pytest.raises((AssertionError, RuntimeError), match="Torch not compiled with CUDA enabled"):
        before.main()
    loss = after.main()  # a full training epoch on the CPU, backward included
    assert math.isfinite(loss)

    def step_on_fake_gpu(module):
        # Autograd cannot run on fake CUDA tensors in a CPU-only build, so the
        # step on the fake GPU is the forward pass and the loss (where devices
        # meet); backward and the optimizer ran on the CPU in main() above.
        torch.manual_seed(0)
        model = module.RobustModel(input_dim=12, hidden_dim=8, num_classes=3)
        data, target = torch.randn(4, 12), torch.randint(0, 3, (4,))
        with fake_gpu():
            model.to("cuda")
            model.train()
            output = model(data.to("cuda"))
            return nn.CrossEntropyLoss()(output, target.to("cuda")).device

    with pytest.raises(RuntimeError, match=MISMATCH):
        step_on_fake_gpu(before)
    assert step_on_fake_gpu(after).type == "cuda"


IN_PLACE = """\
import numpy as np
import torch


def running_total(arr, steps):
    base = torch.from_numpy(arr)
    total = base.cuda()
    for s in steps:
        total += s
    return total


def zero_first(x):
    y = x.to("cuda")
    y.view(-1)[0] = 0.0
    return y


def scaled(w):
    h = w.cuda()
    h.mul_(2)
    return h.sum()
"""


def test_a_move_written_in_place_keeps_its_copy_on_the_cpu(fixdev):
    # `.cuda()` / `.to("cuda")` always copy a CPU tensor; `.to(device)` on the
    # CPU returns the tensor itself. A later in-place write would land in the
    # caller's tensor, the NumPy array behind from_numpy, or a leaf autograd
    # must keep, unless the rewrite says copy=True (issue 25).
    import numpy as np
    import torch

    fixed = fixdev("--apply", "--select", "FDV104,FDV109", "--stdin-filename", "steps.py", "-", stdin=IN_PLACE.encode()).stdout.decode()
    assert fixed.count("copy=True") == 3, fixed
    namespace: dict = {}
    exec(compile(fixed, "steps.py", "exec"), namespace)  # runs on this CPU-only build: device is the CPU
    arr = np.zeros(3, dtype=np.float32)
    assert namespace["running_total"](arr, [1.0, 2.0]).tolist() == [3.0, 3.0, 3.0]
    assert arr.tolist() == [0.0, 0.0, 0.0], "the NumPy array behind from_numpy is untouched"
    x = torch.ones(2, 2)
    namespace["zero_first"](x)
    assert x.tolist() == [[1.0, 1.0], [1.0, 1.0]], "the caller's tensor is untouched"
    w = torch.zeros(3, requires_grad=True)
    # sigmoid's backward reads its output: written through an alias, backward
    # raises "modified by an inplace operation"; the copy may be written
    namespace["scaled"](torch.sigmoid(w)).backward()
    assert w.grad.tolist() == [0.5, 0.5, 0.5]


LAYER_WRITTEN = """\
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return x * self.weight


def identity_gate(width, build=Gate):
    gate = build(width).cuda()
    gate.weight.data.fill_(1.0)
    out = gate(torch.ones(2, width).cuda())
    out *= 3
    return out
"""


def test_a_layer_whose_parameters_or_output_are_written_gets_no_copy(fixdev):
    # `build(width)` may be any class: what shows it is no tensor is the code
    # that follows, which writes a parameter of it (`gate.weight.data`) and
    # its output (`out *= 3`), neither a view of the moved value. Module.to()
    # rejects copy=True ("does not accept copy argument") and moves in place.
    fixed = fixdev("--apply", "--select", "FDV104", "--stdin-filename", "gate.py", "-", stdin=LAYER_WRITTEN.encode()).stdout.decode()
    assert "build(width).to(device)" in fixed and "copy=True" not in fixed, fixed
    namespace: dict = {}
    exec(compile(fixed, "gate.py", "exec"), namespace)  # runs on this CPU-only build
    assert namespace["identity_gate"](4).tolist() == [[3.0] * 4] * 2
