"""The virtual GPU (``fixdev.gpu.runtime``, issue 27) runs each runnable
fixture pair of the ``mismatch`` and ``state`` rules with real values: the
buggy version fails at a line its fix changes, the fixed one completes. How
to run a pair is in the rule folder's ``run.toml`` (read as
tests/test_fakecuda.py reads it)."""

from __future__ import annotations

import difflib
import importlib.util
import itertools
import sys
import traceback
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

torch = pytest.importorskip("torch")
nn = torch.nn

from fixdev.engine.registry import rule_infos  # noqa: E402
from fixdev.gpu.runtime import CPU_WHEEL, DeviceError, NumpyDeviceError, virtual_gpu  # noqa: E402

GROUPS = ("mismatch", "state")
RULES = {info.name for info in rule_infos() if info.group in GROUPS}
CASES = [
    pytest.param(folder.name, name, spec, id=f"{folder.name}/{name}")
    for folder in sorted(FIXTURES.iterdir())
    if folder.name in RULES and (folder / "run.toml").is_file()
    for name, spec in tomllib.loads((folder / "run.toml").read_text()).items()
]
DEVICE_ERRORS = (DeviceError, NumpyDeviceError)
_counter = itertools.count()


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"runtime_fixture_{next(_counter)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def evaluate(expression: str, fixture=None):
    from tests import standins

    return eval(expression, standins.names(fixture))


def fix_from_error(exc: BaseException, path: Path) -> bool:
    """What ``fixdev --traceback`` does with the error as printed: apply its
    fix (unsafe ones too, as the fixtures show them) to ``path``; whether the
    file changed."""
    from fixdev.diagnose import traceback as tracebacks
    from fixdev.files.runner import Overrides

    text = path.read_text()
    log = "".join(traceback.format_exception(exc))
    overrides = Overrides(select=None, extend_select=(), ignore=(), unsafe_fixes=True)
    tracebacks.run(log, [path], "apply", overrides, "concise", True, False, False, lambda *a, **k: None)
    return path.read_text() != text


def failing_frame(exc: BaseException, path: Path) -> int:
    """The deepest frame of the error in the fixture file: the user's line."""
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if Path(frame.filename) == path]
    assert lines, f"the error never passed through {path.name}"
    return lines[-1]


def test_the_mismatch_and_state_rules_all_have_runnable_pairs():
    assert RULES and RULES == {case.values[0] for case in CASES}


def start(spec: dict) -> tuple[int, tuple]:
    """The machine a case's bug shows on and the errors it fails with: a
    script's on a CPU-only one (``--gpus 0``), the rest on one GPU."""
    if spec["kind"] == "script":
        return 0, (AssertionError, RuntimeError)
    return 1, DEVICE_ERRORS


@pytest.mark.parametrize("rule, case, spec", CASES)
def test_buggy_fails_on_the_virtual_gpu_in_its_own_file_and_fixed_completes(rule, case, spec):
    before, after = FIXTURES / rule / f"{case}.before.py", FIXTURES / rule / f"{case}.after.py"
    gpus, expected = start(spec)
    with virtual_gpu(gpus):
        with pytest.raises(expected) as caught:
            run_case(before, spec)
        if gpus == 0:
            assert CPU_WHEEL in str(caught.value)
        if spec["kind"] != "optimizer":  # FDV112's file only resumes; the step that fails is the harness's
            failing_frame(caught.value, before)
        out = run_case(after, spec)
        if spec["kind"] in ("module", "buffer", "cache"):  # .device read under the runtime, where it is virtual
            assert out.device == torch.device("cuda", 0)


# Errors whose fix `--traceback` does not make from the traceback alone (its
# limits, not the runtime's): the failing line is far from the fix (a string
# comparison that skipped a move, a list of layers never registered, an
# optimizer loaded before the move) or the traceback names only torch's lines;
# or the failing frame's values are parameters its caller gave as `**batch`,
# which `--traceback` does not follow out to the caller; or a class's own
# `to()` that forgot a tensor (the error is where the tensor is read); or
# an error `--traceback` has no family for yet (packing's CPU-only lengths).
TRACEBACK_CANNOT_FIX = {
    "constant-buffer/cached_mask_none", "unmoved-input/dict_batch_kwargs", "discarded-to/dict_item",
    *(f"numpy-on-device/{case}" for case in ("packed_lengths_from_padding", "packed_lengths_annotated", "packed_lengths_made_on_device")),
    *(f"device-string-compare/{case}" for case in ("str_of_tensor_device", "str_of_rank_device", "str_of_annotated_device", "device_built_from_parameter")),
    *(f"constant-buffer/{case}" for case in ("own_to_misses_one", "own_to_after_super", "own_to_passes_everything", "plain_storage_to")),
    "device-string-compare/field_given_a_device", "unmoved-input/sibling_token_types",
    *(f"device-string-compare/{case}" for case in ("tensor_device_cuda", "indexed_string", "constructor_without_index", "membership",
                                                    "parameter_device", "device_from_setup", "union_parameter", "cpu_check_always_true")),
    *(f"optimizer-before-move/{case}" for case in ("resume_then_move", "gpu_flag_guard", "moved_with_its_comment", "param_groups_gathered_in_a_loop",
                                                    "resume_branch_before_the_wrapper", "optimizer_picked_by_name")),
    *(f"unregistered-submodule/{case}" for case in ("heads_dict", "appended_blocks", "local_list_stored", "trainer_stores_model", "scorer_given_encoder")),
}


@pytest.mark.parametrize("rule, case, spec", [
    pytest.param(*case.values, id=case.id, marks=[pytest.mark.xfail(strict=True, reason="--traceback has no fix for this error")]
                 if case.id in TRACEBACK_CANNOT_FIX else []) for case in CASES])
def test_the_fix_traceback_makes_from_the_error_completes(rule, case, spec, tmp_path):
    """Rounds as ``fixdev --run --apply`` takes them: run, fix from the
    error's traceback, run again, until the program completes."""
    before = FIXTURES / rule / f"{case}.before.py"
    gpus, expected = start(spec)
    copy = tmp_path / before.name
    copy.write_text(before.read_text())
    with virtual_gpu(gpus):
        for _ in range(3):
            try:
                run_case(copy, spec)
                return
            except expected as exc:
                assert fix_from_error(exc, copy), "".join(traceback.format_exception_only(exc))
    pytest.fail("still failing after 3 rounds of fixes")


def run_case(path: Path, spec: dict):
    """Run one fixture file as its run.toml says, on the virtual GPU."""
    module = load(path)  # under the runtime: a module-level device reads torch.cuda.is_available()
    kind = spec["kind"]
    if kind in ("module", "buffer", "cache"):
        torch.manual_seed(0)
        model = getattr(module, spec["build"])(*[evaluate(a) for a in spec.get("args", [])]).eval()
        torch.manual_seed(1)
        xs = [torch.randn(*shape).to(getattr(torch, spec.get("dtype", "float32"))) for shape in spec["inputs"]]
        if kind == "cache":
            with torch.no_grad():
                model(*xs)  # fills the cache on the CPU
        model.to("cuda")
        if "prepare" in spec:
            getattr(model, spec["prepare"])("cuda")
        with torch.no_grad():
            return model(*[x.to("cuda") for x in xs])
    if kind == "function":
        args = [evaluate(a, module) for a in spec.get("args", [])]
        if spec.get("move_args", True):
            args = [a.to("cuda") if isinstance(a, (nn.Module, torch.Tensor)) else a for a in args]
        return getattr(module, spec["call"])(*args)
    if kind == "script":
        return getattr(module, spec["call"])(*[evaluate(a) for a in spec.get("args", [])])
    if kind == "optimizer":
        return run_optimizer(module, spec)
    pytest.fail(f"kind {kind!r} has no runner here")


def run_optimizer(module, spec):
    """FDV112: resume from a checkpoint (one step of ``optimizer``), then a
    real step on the virtual GPU."""

    def model():
        torch.manual_seed(0)
        return evaluate(spec.get("model", "nn.Linear(4, 2)"))

    def step(net, optimizer):
        for parameter in net.parameters():
            parameter.grad = torch.ones_like(parameter)  # on the parameter's device
        optimizer.step()

    trained = model()
    optimizer = eval(spec["optimizer"], {"torch": torch, "nn": nn, "model": trained})
    step(trained, optimizer)
    checkpoint = {"model": trained.state_dict(), "optimizer": optimizer.state_dict()}
    net = model()
    resumed = getattr(module, spec["call"])(net, checkpoint, *[evaluate(a) for a in spec.get("args", ["'cuda'"])])
    step(net, resumed)
    return next(net.parameters())


def train_cnn(device: str, steps: int = 4) -> list[float]:
    """A small CNN, SGD with momentum: the losses, by .item()."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        images = torch.randn(4, 3, 16, 16, generator=generator).to(device)
        labels = torch.randint(0, 10, (4,), generator=generator).to(device)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        assert loss.device.type == device and next(model.parameters()).grad.device.type == device
        losses.append(loss.item())
    return losses


def test_a_cnn_trains_on_the_virtual_gpu_with_the_cpu_losses_to_the_bit():
    plain = train_cnn("cpu")
    with virtual_gpu(1):
        virtual = train_cnn("cuda")
    assert virtual == plain
    assert len(set(plain)) == len(plain), "the steps change the model"


def test_the_runtime_leaves_torch_as_it_found_it():
    available = torch.cuda.is_available
    with virtual_gpu(1):
        assert torch.cuda.is_available() and torch.cuda.device_count() == 1
        x = torch.ones(2, 3).cuda()
        assert x.is_cuda and x.get_device() == 0 and "device='cuda:0'" in repr(x)
    assert torch.cuda.is_available is available
    assert x.device.type == "cpu", "outside the runtime a tensor is what it really is"


def test_mixing_a_device_tensor_with_host_ones_raises_pytorchs_errors():
    with virtual_gpu(2):
        x = torch.randn(2, 3, 8, 8).cuda()
        host = torch.randn(8)
        with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cpu!"):
            x + host
        assert (x + torch.tensor(2.0)).device == torch.device("cuda:0"), "a 0-dim CPU tensor combines"
        with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cuda:1!"):
            x + x.to("cuda:1")
        conv = nn.Conv2d(3, 4, 3).cuda()
        with pytest.raises(RuntimeError, match=r"Input type \(torch.FloatTensor\) and weight type \(torch.cuda.FloatTensor\) should be the same"):
            conv(x.cpu())
        with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
            x.numpy()
        with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same device"):
            host[torch.tensor([0]).cuda()]
        assert x[torch.tensor([0])].is_cuda, "a CPU index may index a device tensor"
        assert x.cuda() is x and x.cpu() is not x and x.to("cuda:1") is not x
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            x.to("cuda:2")


def test_parameters_data_and_module_moves_keep_their_device():
    with virtual_gpu(1):
        net = nn.Linear(3, 2)
        net.cuda()
        assert net.weight.is_cuda and isinstance(net.weight, nn.Parameter)
        assert nn.Parameter(torch.zeros(2).cuda()).is_cuda
        net.weight.data = torch.zeros(2, 3)  # .data = is a copy between devices, never checked
        assert not net.weight.is_cuda
        net.weight.data.copy_(torch.ones(2, 3).cuda())  # copy_ joins devices legally
        assert torch.cuda.memory_allocated() > 0
        net.to("cpu")
        assert not net.bias.is_cuda
        assert torch.ones(2).pin_memory().sum().item() == 2.0, "pinning is a no-op"


def test_gpus_0_is_a_cpu_only_machine():
    with virtual_gpu(0):
        assert not torch.cuda.is_available() and torch.cuda.device_count() == 0
        with pytest.raises(AssertionError, match=CPU_WHEEL):
            torch.ones(2).cuda()
        with pytest.raises(AssertionError, match=CPU_WHEEL):
            torch.zeros(2, device="cuda")
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        assert (torch.ones(2).to(device) * 2).sum().item() == 4.0


BUGGY = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        mask = torch.ones(x.shape)
        return self.fc(x * mask)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
print("loss", model(torch.randn(3, 4, device=device)).sum().item())
"""


def test_run_apply_turns_a_buggy_script_into_one_that_completes(tmp_path, fixdev):
    script = tmp_path / "train.py"
    script.write_text(BUGGY)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 1
    err = shown.stderr.decode()
    assert f"device error at {script}:12: in forward: RuntimeError: Expected all tensors" in err
    assert "FDV101" in err and script.read_text() == BUGGY, "without --apply nothing is written"
    fixed = fixdev("--run", "--apply", "--unsafe-fixes", "--", "python", str(script), cwd=tmp_path)
    err = fixed.stderr.decode()
    assert fixed.returncode == 0, err
    assert "round 1: fixed; running again" in err and "round 2: the command completed" in err
    assert "torch.ones_like(x)" in script.read_text() and b"loss" in fixed.stdout


def test_run_gpus_0_fails_a_cuda_call_as_a_cpu_wheel_and_passes_the_exit_code_on(tmp_path, fixdev):
    script = tmp_path / "cuda_call.py"
    script.write_text("import torch\nx = torch.ones(2).cuda()\nprint(x.device)\n")
    cpu_only = fixdev("--run", "--gpus", "0", "--", "python", str(script), cwd=tmp_path)
    assert cpu_only.returncode == 1 and CPU_WHEEL in cpu_only.stderr.decode()
    one_gpu = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    assert one_gpu.returncode == 0 and one_gpu.stdout.decode().strip() == "cuda:0"
    script.write_text("import sys\nsys.exit(3)\n")
    assert fixdev("--run", "--", "python", str(script), cwd=tmp_path).returncode == 3
    refused = fixdev("--run", "--", "python", "-I", str(script), cwd=tmp_path)
    assert refused.returncode == 2 and b"-I" in refused.stderr


# ---------------------------------------------------------------------------
# Through `fixdev --run`, as a user runs a script (issue 27's missing items)
# ---------------------------------------------------------------------------

RNN_CASES = """\
import torch
import torch.nn as nn

# each case: the layer's device, the input's, the hidden state's (None: none given)
for kind in (nn.LSTM, nn.GRU, nn.RNN):
    for layer, data, hidden in (("cuda", "cpu", None), ("cuda", "cuda", "cpu"), ("cuda", "cpu", "cuda"), ("cpu", "cuda", None)):
        net = kind(4, 3, batch_first=True).to(layer)
        x = torch.randn(2, 5, 4, device=data)
        h = None if hidden is None else torch.zeros(1, 2, 3, device=hidden)
        if hidden is not None and kind is nn.LSTM:
            h = (h, torch.zeros(1, 2, 3, device=hidden))
        try:
            net(x, h)
            print(kind.__name__, "ran")
        except RuntimeError as exc:
            print(kind.__name__, exc)
    out, _ = kind(4, 3).cuda()(torch.randn(5, 2, 4).cuda())
    print(kind.__name__, "on one device:", out.device)

# a packed sequence's sizes stay on the CPU, as on a GPU
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
packed = pack_padded_sequence(torch.randn(3, 5, 4).cuda(), torch.tensor([5, 2, 4]), batch_first=True, enforce_sorted=False)
padded, lengths = pad_packed_sequence(nn.LSTM(4, 3, batch_first=True).cuda()(packed)[0], batch_first=True)
print("packed:", padded.device, lengths.device)
"""


def test_run_rnn_layers_raise_pytorchs_own_messages_which_side_is_where(tmp_path, fixdev):
    script = tmp_path / "rnn_cases.py"
    script.write_text(RNN_CASES)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    out = shown.stdout.decode().splitlines()
    for kind in ("LSTM", "GRU", "RNN"):
        assert [line.split(" ", 1)[1] for line in out if line.startswith(kind + " ")] == [
            "Input and parameter tensors are not at the same device, found input tensor at cpu and parameter tensor at cuda:0",
            "Input and hidden tensors are not at the same device, found input tensor at cuda:0 and hidden tensor at cpu",
            "Input and hidden tensors are not at the same device, found input tensor at cpu and hidden tensor at cuda:0",
            "Input and parameter tensors are not at the same device, found input tensor at cuda:0 and parameter tensor at cpu",
            "on one device: cuda:0",
        ]
    assert out[-1] == "packed: cuda:0 cpu"
    assert b"cuDNN" not in shown.stderr, "the virtual GPU has no cuDNN to warn about"


RNN_HIDDEN = """\
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self, features, hidden, tags):
        super().__init__()
        self.hidden = hidden
        self.rnn = nn.LSTM(features, hidden, batch_first=True)
        self.out = nn.Linear(hidden, tags)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), self.hidden)
        c0 = torch.zeros(1, x.size(0), self.hidden)
        y, _ = self.rnn(x, (h0, c0))
        return self.out(y)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Tagger(8, 16, 3).to(device)
print("score", model(torch.randn(2, 5, 8, device=device)).sum().item())
"""

RNN_PARAMETER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
encoder = nn.GRU(16, 32, batch_first=True).to(device)
loader = DataLoader(TensorDataset(torch.randn(16, 10, 16)), batch_size=8)

for (batch,) in loader:
    states, last = encoder(batch)
    print("state", tuple(last.shape))
"""


@pytest.mark.parametrize("source, line, function, message, fixed", [
    pytest.param(RNN_HIDDEN, 15, "forward", "Input and hidden tensors are not at the same device, found input tensor at cuda:0 and hidden tensor at cpu",
                 "h0 = torch.zeros(1, x.size(0), self.hidden, device=x.device)", id="hidden"),
    pytest.param(RNN_PARAMETER, 10, "<module>", "Input and parameter tensors are not at the same device, found input tensor at cpu and parameter tensor at cuda:0",
                 "batch = batch.to(device)", id="parameter"),
])
def test_run_explains_and_fixes_an_rnn_error_as_traceback_does(tmp_path, fixdev, source, line, function, message, fixed):
    script = tmp_path / "recurrent.py"
    script.write_text(source)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    err = shown.stderr.decode()
    assert shown.returncode == 1, err
    assert f"device error at {script}:{line}: in {function}: RuntimeError: {message}" in err
    assert "error: a recurrent layer's input is on" in err
    assert fixed in shown.stdout.decode(), "the fix, as a diff"
    done = fixdev("--run", "--apply", "--", "python", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert fixed in script.read_text() and "round 2: the command completed" in done.stderr.decode()


THREADS = """\
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
weights = torch.randn(4, 4, device=device)
moved = []


class Prefetch(threading.Thread):  # a subclass with its own run(), as prefetchers are written
    def run(self):
        moved.append(torch.randn(2, 4).cuda())


def score(rows):
    batch = torch.randn(rows, 4)
    return (batch @ weights).sum().item()


prefetch = Prefetch()
prefetch.start()
prefetch.join()
print("prefetched on", moved[0].device)
with ThreadPoolExecutor(max_workers=2) as pool:
    print("moved in a worker:", pool.submit(lambda: torch.ones(2).cuda().device).result())
    print("score", pool.submit(score, 3).result())
"""


def test_run_catches_cuda_calls_and_mismatches_in_threads_and_pool_workers(tmp_path, fixdev):
    script = tmp_path / "threads.py"
    script.write_text(THREADS)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    out, err = shown.stdout.decode(), shown.stderr.decode()
    assert "prefetched on cuda:0" in out and "moved in a worker: cuda:0" in out, err
    assert shown.returncode == 1, err
    assert f"device error at {script}:18: in score: RuntimeError: Expected all tensors to be on the same device" in err
    assert "FDV102" in err or "FDV107" in err


THREAD_ERROR = """\
import threading

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
table = torch.randn(10, 3, device=device)


def lookup():
    offsets = torch.arange(3)
    print("row", (table[2] + offsets).sum().item())


worker = threading.Thread(target=lookup)
worker.start()
worker.join()
print("main thread done")
"""


def test_run_reports_a_device_error_that_ends_a_thread(tmp_path, fixdev):
    """An uncaught error ends only its thread (the program goes on and may
    exit 0), as threading.excepthook prints it; --run still reports it."""
    script = tmp_path / "lookup.py"
    script.write_text(THREAD_ERROR)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    err = shown.stderr.decode()
    assert "main thread done" in shown.stdout.decode()
    assert shown.returncode == 1, err
    assert f"device error at {script}:11: in lookup: RuntimeError: Expected all tensors" in err
    fixed = fixdev("--run", "--apply", "--", "python", str(script), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr.decode()
    assert "offsets = torch.arange(3, device=device)" in script.read_text() and b"row" in fixed.stdout


DEFAULT_DEVICE = """\
import torch
import torch.nn as nn

torch.set_default_device("cuda")
made = torch.zeros(3)
layer = nn.Linear(3, 2)
print("default:", made.device, layer.weight.device, torch.get_default_device())
print("with cuda:", (made + torch.ones(3).cuda()).device, layer(made).device)
try:
    made + torch.ones(3, device="cpu")
except RuntimeError as exc:
    print("with cpu:", exc)
torch.set_default_device(None)
with torch.device("cuda"):
    inside = torch.randn(2)
print("block:", inside.device, torch.zeros(1).device)
try:
    inside * torch.arange(2)
except RuntimeError as exc:
    print("block with cpu:", exc)
"""


def test_run_default_device_cuda_places_factories_on_the_virtual_gpu(tmp_path, fixdev):
    script = tmp_path / "default_device.py"
    script.write_text(DEFAULT_DEVICE)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    mixed = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    assert shown.stdout.decode().splitlines() == [
        "default: cuda:0 cuda:0 cuda:0", "with cuda: cuda:0 cuda:0", f"with cpu: {mixed}",
        "block: cuda:0 cpu", f"block with cpu: {mixed}",
    ]
    cpu_only = fixdev("--run", "--gpus", "0", "--", "python", str(script), cwd=tmp_path)
    err = cpu_only.stderr.decode()
    assert cpu_only.returncode == 1 and f"AssertionError: {CPU_WHEEL}" in err, err
    assert f'File "{script}", line 5' in err, "fails at the first factory, as a CPU wheel does"


CELL_CASES = """\
import torch
import torch.nn as nn

# each case: the cell's device, the input's, the hidden state's (None: none given)
for kind in (nn.LSTMCell, nn.GRUCell, nn.RNNCell):
    for layer, data, hidden in (("cuda", "cuda", "cpu"), ("cuda", "cpu", None), ("cpu", "cuda", None)):
        net = kind(4, 3).to(layer)
        h = None if hidden is None else torch.zeros(2, 3, device=hidden)
        if h is not None and kind is nn.LSTMCell:
            h = (h, torch.zeros(2, 3, device=hidden))
        try:
            net(torch.randn(2, 4, device=data), h)
            print(kind.__name__, "ran")
        except RuntimeError as exc:
            print(kind.__name__, exc)
try:
    nn.LSTMCell(4, 3).cuda()(torch.randn(2, 4).cuda(), (torch.zeros(2, 3).cuda(), torch.zeros(2, 3)))
except RuntimeError as exc:
    print("cell state:", exc)
"""


def test_run_rnn_cells_raise_the_message_of_the_kernel_that_meets_two_devices(tmp_path, fixdev):
    """aten's cells check no devices: on a CUDA input the LSTM and GRU cells
    multiply (mm) and then call the fused kernel, otherwise they call linear
    (addmm), the hidden state's first (the GRU: the input's first); each
    kernel's wrapper names the argument off the first one's device."""
    (tmp_path / "cells.py").write_text(CELL_CASES)
    shown = fixdev("--run", "--", "python", "cells.py", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    got = "Expected all tensors to be on the same device, but got {} is on {}, different from other tensors on {} (when checking argument in method wrapper_CUDA_{})"
    mm_hidden, addmm_cpu, mm_weight = got.format("mat2", "cuda:0", "cpu", "mm"), got.format("mat1", "cpu", "cuda:0", "addmm"), got.format("mat2", "cpu", "cuda:0", "mm")
    assert shown.stdout.decode().splitlines() == [
        *(f"{kind} {message}" for kind in ("LSTMCell", "GRUCell") for message in (mm_hidden, addmm_cpu, mm_weight)),
        *(f"RNNCell {message}" for message in (addmm_cpu, addmm_cpu, got.format("mat1", "cuda:0", "cpu", "addmm"))),
        "cell state: " + got.format("cx", "cpu", "cuda:0", "_thnn_fused_lstm_cell").replace("CUDA__thnn", "CUDA___thnn"),
    ]


CELL_HIDDEN = """\
import torch
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.cell = nn.GRUCell(features, hidden)

    def forward(self, x):
        h = torch.zeros(x.size(0), self.hidden)
        for step in range(x.size(1)):
            h = self.cell(x[:, step], h)
        return h


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Decoder(8, 16).to(device)
print("state", model(torch.randn(2, 5, 8, device=device)).sum().item())
"""


def test_run_explains_an_rnn_cell_error_and_names_the_move_as_traceback_does(tmp_path, fixdev):
    """The cell's message names a kernel argument (``mat2``), not the two
    devices: ``--traceback`` explains it and names the move to make, which
    it does not write for this form of the message."""
    script = tmp_path / "decoder.py"
    script.write_text(CELL_HIDDEN)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    err = shown.stderr.decode()
    assert shown.returncode == 1, err
    assert f"device error at {script}:14: in forward: RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cuda:0" in err
    assert "why: `h` is made by `torch.zeros(x.size(0), self.hidden)` on line 12 without a `device=`, so on the CPU" in err
    assert "change: move `h` to `x.device` before line 14: `h = h.to(x.device)`" in err


LOAD_TO_DEVICE = """\
import io
import torch
import torch.nn as nn

model = nn.Linear(4, 2).cuda()
buffer = io.BytesIO()
torch.save(model.state_dict(), buffer)
for where in ("cuda", torch.device("cuda:0"), "cpu"):
    buffer.seek(0)
    state = torch.load(buffer, map_location=where, weights_only=True)
    print(where, state["weight"].device, torch.equal(state["weight"].cpu(), model.weight.cpu()))
buffer.seek(0)
state = torch.load(buffer, map_location="cuda")
state["bias"] + torch.ones(2)
"""


def test_run_torch_load_with_a_cuda_map_location_restores_onto_the_virtual_gpu(tmp_path, fixdev):
    # a CPU build cannot move a storage to CUDA: torch.load(map_location="cuda")
    # raised "PyTorch was compiled without CUDA support" under the runtime
    script = tmp_path / "load.py"
    script.write_text(LOAD_TO_DEVICE)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    err = shown.stderr.decode()
    assert shown.stdout.decode().splitlines() == ["cuda cuda:0 True", "cuda:0 cuda:0 True", "cpu cpu True"], err
    assert shown.returncode == 1 and f"device error at {script}:14" in err, "what it loaded is on the device"


MODULE_TO_DTYPE = """\
import torch
import torch.nn as nn

layer = nn.Linear(3, 2).cuda().to(torch.float64)
print(layer.weight.device, layer.weight.dtype)
print(layer(torch.ones(1, 3, dtype=torch.float64).cuda()).device)
layer(torch.ones(1, 3, dtype=torch.float64))
"""


def test_run_module_to_a_dtype_keeps_the_device(tmp_path, fixdev):
    # Module.to(dtype) calls tensor.to(None, dtype, False) on each tensor: the
    # runtime read the None as a device and raised a TypeError
    script = tmp_path / "to_dtype.py"
    script.write_text(MODULE_TO_DTYPE)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    err = shown.stderr.decode()
    assert shown.stdout.decode().splitlines()[:2] == ["cuda:0 torch.float64", "cuda:0"], err
    assert shown.returncode == 1 and f"device error at {script}:7" in err, err


AUTOCAST = """\
import torch
import torch.nn as nn

layer = nn.Linear(4, 4).cuda()
with torch.autocast("cuda", dtype=torch.bfloat16):
    print(layer(torch.randn(2, 4).cuda()).dtype)
with torch.autocast("cuda"):
    print(layer(torch.randn(2, 4).cuda()).dtype, torch.is_autocast_enabled("cpu"))
with torch.autocast("cuda", enabled=False):
    print(layer(torch.randn(2, 4).cuda()).dtype)
"""


def test_run_cuda_autocast_casts_as_the_cpus_autocast(tmp_path, fixdev):
    # CUDA autocast does not cover the CPU kernels the virtual GPU runs: it
    # cast nothing, and AMP code that passes on the CPU failed on dtypes
    script = tmp_path / "autocast.py"
    script.write_text(AUTOCAST)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    assert shown.stdout.decode().splitlines() == ["torch.bfloat16", "torch.float16 True", "torch.float32"]


TYPE_CAST = """\
import torch

x = torch.arange(4).cuda()
cast = x.type(torch.float32)
print(cast.device, cast.dtype, (cast * torch.ones(4).cuda()).device)
"""


def test_run_type_with_a_dtype_keeps_the_device(tmp_path, fixdev):
    # tensor.type(dtype) returned an untagged tensor: on the CPU as far as the
    # program could tell (pytorch-metric-learning's to_dtype casts with it)
    script = tmp_path / "type_cast.py"
    script.write_text(TYPE_CAST)
    shown = fixdev("--run", "--", "python", str(script), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr.decode()
    assert shown.stdout.decode().splitlines() == ["cuda:0 torch.float32 cuda:0"]
