"""Rewrites that real use of 0.1.0 found wrong or missing (issue 10), through
the CLI on files. A fix that stops code from importing or running is the
worst thing fixdev can do, so the rewrites of items 1-3 are executed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import run_fixdev


# Every case is a file of one tree, so fixdev runs once for all of them.
CASES: dict[str, str] = {}


def case(name: str, source: str) -> str:
    CASES[name] = textwrap.dedent(source)
    return name


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Each case as ``<name>.py``, fixed with one ``--apply`` run; the
    originals, checked with one ``--check`` run, in ``original/``."""
    root = tmp_path_factory.mktemp("real_use")
    (root / "original").mkdir()
    for name, source in CASES.items():
        (root / f"{name}.py").write_text(source)
        (root / "original" / f"{name}.py").write_text(source)
    # --unsafe-fixes: some cases are about unsafe fixes (FDV101 takes x's dtype).
    applied = run_fixdev("--apply", "--unsafe-fixes", "--no-cache", "--exclude", "original", ".", cwd=root)
    checked = run_fixdev("--check", "--no-cache", "--output-format", "concise", ".", cwd=root / "original")
    for run in (applied, checked):
        assert b"Traceback" not in run.stderr, run.stderr.decode()
    return root, checked.stdout.decode()


def fixed(tree, name: str) -> str:
    return (tree[0] / f"{name}.py").read_text()


def report(tree, name: str) -> list[str]:
    return [line for line in tree[1].splitlines() if line.startswith(f"{name}.py:")]


# Code run beside the fixed files: name -> code, with torch and without it
# (``import torch`` failing, as on a machine that lacks it).
PROBES: dict[str, str] = {}
PROBES_WITHOUT_TORCH: dict[str, str] = {}

_DRIVER = """
import contextlib, io, json, sys
if sys.argv[2] == "block":
    sys.modules["torch"] = None
results = {}
for name, code in json.loads(sys.argv[1]).items():
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(code, {})
        results[name] = [None, out.getvalue().strip()]
    except BaseException as exc:
        results[name] = [f"{type(exc).__name__}: {exc}", out.getvalue().strip()]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def ran(tree):
    """Every probe's (error or None, printed text), one process per mode."""
    results = {}
    for mode, probes in (("torch", PROBES), ("block", PROBES_WITHOUT_TORCH)):
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, json.dumps(probes), mode],
            cwd=tree[0], capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": str(tree[0])},
        )
        assert done.returncode == 0, done.stderr
        results[mode] = json.loads(done.stdout)
    return results


def runs(ran, name: str, mode: str = "torch") -> str:
    error, printed = ran[mode][name]
    assert error is None, error
    return printed


# -- item 1: the new definition runs after the import it needs ---------------------

LATE_IMPORT = case("late_import", """\
    import warnings
    warnings.filterwarnings("ignore")
    import torch

    x = torch.ones(2).cuda()
    """)
PROBES[LATE_IMPORT] = "import late_import; print(late_import.x.device)"


def test_device_definition_comes_after_a_late_import_torch(tree, ran):
    text = fixed(tree, LATE_IMPORT)
    assert text.index("import torch") < text.index("device = torch.device(")
    assert runs(ran, LATE_IMPORT) == "cpu"


USE_BEFORE_IMPORT = case("use_before_import", """\
    import os
    model = build().cuda()
    import torch
    """)


def test_no_fix_where_the_line_runs_before_import_torch(tree):
    assert fixed(tree, USE_BEFORE_IMPORT) == CASES[USE_BEFORE_IMPORT]
    lines = report(tree, USE_BEFORE_IMPORT)
    assert lines and all("FDV104" in line and "[*]" not in line for line in lines)


IMPORT_THEN_TRY = case("import_then_try", """\
    import torch
    try:
        import apex
    except ImportError:
        apex = None

    def run():
        return torch.ones(2).cuda()
    """)
PROBES[IMPORT_THEN_TRY] = "import import_then_try as m; print(m.run().device)"


def test_device_definition_is_never_put_inside_a_block(tree, ran):
    definition = next(line for line in fixed(tree, IMPORT_THEN_TRY).splitlines() if "torch.device(" in line)
    assert not definition.startswith((" ", "\t"))
    assert runs(ran, IMPORT_THEN_TRY) == "cpu"


# -- item 2: a module-level device bound too late is not reused ----------------------

BOUND_UNDER_MAIN = case("bound_under_main", """\
    import torch
    import torch.nn as nn

    def train():
        model = nn.Linear(2, 2).cuda()
        return model(torch.ones(1, 2))

    if __name__ == "__main__":
        device = torch.device("cuda:0")
        train()
    """)
PROBES[BOUND_UNDER_MAIN] = "import bound_under_main as m; print(m.train().device)"


def test_device_bound_under_main_is_not_used_by_functions(tree, ran):
    assert "nn.Linear(2, 2).to(device)" not in fixed(tree, BOUND_UNDER_MAIN)
    assert runs(ran, BOUND_UNDER_MAIN) == "cpu"


BOUND_AFTER_CALL = case("bound_after_call", """\
    import torch

    def ones():
        return torch.ones(2).cuda()

    first = ones()
    device = torch.device("cpu")
    """)
PROBES[BOUND_AFTER_CALL] = "import bound_after_call as m; print(m.first.device)"


def test_device_bound_after_the_first_call_is_not_used(tree, ran):
    assert "torch.ones(2).to(device)" not in fixed(tree, BOUND_AFTER_CALL)
    assert runs(ran, BOUND_AFTER_CALL) == "cpu"


BOUND_BEFORE_CALL = case("bound_before_call", """\
    import torch

    def ones():
        return torch.ones(2).cuda()

    device = torch.device("cpu")
    first = ones()
    """)
PROBES[BOUND_BEFORE_CALL] = "import bound_before_call as m; print(m.first.device)"


def test_device_bound_before_any_call_is_reused(tree, ran):
    text = fixed(tree, BOUND_BEFORE_CALL)
    assert "return torch.ones(2, device=device)" in text and text.count("torch.device(") == 1
    assert runs(ran, BOUND_BEFORE_CALL) == "cpu"


BOUND_IN_BRANCH = case("bound_in_branch", """\
    import sys
    import torch
    if len(sys.argv) > 5:
        device = torch.device("cpu")
    x = torch.ones(2).cuda()
    """)
PROBES[BOUND_IN_BRANCH] = "import bound_in_branch as m; print(m.x.device)"


def test_device_bound_in_a_branch_is_not_used_after_it(tree, ran):
    assert "torch.ones(2).to(device)" not in fixed(tree, BOUND_IN_BRANCH)
    assert runs(ran, BOUND_IN_BRANCH) == "cpu"


# -- item 3: optional or local torch -------------------------------------------------

OPTIONAL_TORCH = case("optional_torch", """\
    try:
        import torch
    except ImportError:
        torch = None


    def to_gpu(x):
        return x.cuda()
    """)
PROBES_WITHOUT_TORCH[OPTIONAL_TORCH] = "import optional_torch"
PROBES[OPTIONAL_TORCH] = "import torch, optional_torch as m; print(m.to_gpu(torch.ones(2)).device)"


def test_optional_torch_stays_optional(tree, ran):
    assert "\nimport torch" not in fixed(tree, OPTIONAL_TORCH)  # no unconditional import added
    runs(ran, OPTIONAL_TORCH, "block")
    assert runs(ran, OPTIONAL_TORCH) == "cpu"


LOCAL_TORCH = case("local_torch", """\
    def main():
        import torch
        x = torch.ones(2).cuda()
        return x.device
    """)
PROBES_WITHOUT_TORCH[LOCAL_TORCH] = "import local_torch"
PROBES[LOCAL_TORCH] = "import local_torch as m; print(m.main())"


def test_local_import_torch_gets_a_local_device(tree, ran):
    assert not fixed(tree, LOCAL_TORCH).startswith("import torch")
    runs(ran, LOCAL_TORCH, "block")
    assert runs(ran, LOCAL_TORCH) == "cpu"


LOCAL_FROM_IMPORT = case("local_from_import", """\
    def mask(x):
        from torch import ones
        return ones(x.shape)
    """)
PROBES_WITHOUT_TORCH[LOCAL_FROM_IMPORT] = "import local_from_import"
PROBES[LOCAL_FROM_IMPORT] = "import torch, local_from_import as m; print(tuple(m.mask(torch.zeros(2, 3)).shape))"


def test_like_factory_imported_locally_keeps_its_import_local(tree, ran):
    text = fixed(tree, LOCAL_FROM_IMPORT)
    assert "from torch import ones, ones_like" in text and "\nimport torch" not in text
    runs(ran, LOCAL_FROM_IMPORT, "block")
    assert runs(ran, LOCAL_FROM_IMPORT) == "(2, 3)"


# -- item 4: a star import does not hide the file's own names -------------------------

STAR_IMPORT = case("star_import", """\
    from models import *
    import torch
    G_AB = Generator()
    G_AB = G_AB.cuda()
    x = torch.ones(3)
    y = x.cuda(0)
    """)


def test_star_import_does_not_silence_names_the_file_binds(tree):
    assert "G_AB = G_AB.to(device)" in fixed(tree, STAR_IMPORT)
    assert any(line.startswith("star_import.py:6:5: FDV104") and "[*]" not in line for line in report(tree, STAR_IMPORT))


LATE_STAR_IMPORT = case("late_star_import", """\
    import torch
    net = make()
    from models import *
    net.cuda()
    """)


def test_star_import_after_the_binding_may_rebind_the_name(tree):
    assert fixed(tree, LATE_STAR_IMPORT) == CASES[LATE_STAR_IMPORT]


# -- item 5: torch.utils.model_zoo.load_url ---------------------------------------------

MODEL_ZOO = case("model_zoo", """\
    import torch.utils.model_zoo as model_zoo

    def resnet18(model, url):
        model.load_state_dict(model_zoo.load_url(url))
    """)


def test_model_zoo_load_url_gets_map_location(tree):
    assert 'model_zoo.load_url(url, map_location="cpu")' in fixed(tree, MODEL_ZOO)


# -- item 11: a keyword argument is not a binding -----------------------------------------

DEVICE_KEYWORD = case("device_keyword", """\
    import torch

    def run(x):
        y = torch.zeros(2, device=x.device)
        return y.cuda()
    """)


def test_device_keyword_does_not_rename_the_new_variable(tree):
    text = fixed(tree, DEVICE_KEYWORD)
    assert "device = torch.device(" in text and "torch_device" not in text


# -- item 12: an added argument follows the call's layout -----------------------------------

ONE_ARGUMENT_A_LINE = case("one_argument_a_line", """\
    import torch

    def restore(model, path):
        state = torch.load(
            path,
            weights_only=True
        )
        model.load_state_dict(state)
    """)
TRAILING_COMMA = case("trailing_comma", """\
    import torch

    def restore(model, path):
        model.load_state_dict(torch.load(
            path,  # the checkpoint
        ))
    """)


def test_added_argument_follows_a_one_argument_a_line_call(tree):
    text = fixed(tree, ONE_ARGUMENT_A_LINE)
    assert '        weights_only=True,\n        map_location="cpu"\n    )\n' in text
    assert all(line == line.rstrip() for line in text.splitlines()), "no trailing spaces"


def test_added_argument_keeps_a_trailing_comma_and_comments(tree):
    assert '        path,  # the checkpoint\n        map_location="cpu",\n    ))\n' in fixed(tree, TRAILING_COMMA)


STAR_AND_EXCEPT = case("star_and_except", """\
    from models import *
    import torch
    try:
        net = make()
    except ImportError as error:
        net = None
    with open("f") as handle:
        pass
    net = net.cuda()
    """)


def test_star_import_file_with_every_kind_of_binding(tree):
    assert "net = net.to(device)" in fixed(tree, STAR_AND_EXCEPT)


# -- issue 11, item 5: the device to use -----------------------------------------

BUILT_MODULE = case("built_module", """\
    import torch
    import torch.nn as nn

    class Algorithm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("update_count", torch.tensor([0]))
            self.heads = [nn.Linear(n, 2).cuda() for _ in range(3)]

        def update(self, n):
            return torch.zeros(n).cuda() + self.update_count
    """)


def test_module_device_is_not_used_while_the_module_is_built(tree):
    """In __init__ the module's buffers are still on the CPU: naming them would
    leave a plain list of layers behind when the module moves later."""
    text = fixed(tree, BUILT_MODULE)
    assert "nn.Linear(n, 2).to(device)" in text
    assert "torch.zeros(n, device=self.update_count.device)" in text


FUTURES = case("futures", """\
    import torch

    def gather(futs):
        rets = torch.futures.wait_all(futs)
        return torch.stack([ret[0] for ret in rets]).cuda()
    """)


def test_a_list_from_torch_futures_is_not_a_tensor_to_take_a_device_from(tree):
    text = fixed(tree, FUTURES)
    assert "rets.device" not in text and ".to(device)" in text


GUARDED = case("guarded", """\
    import torch

    def build(net, args, x):
        if args.cuda:
            net.cuda()
        if torch.cuda.is_available() and x.is_cuda:
            x = x.cuda()
        return net, x

    train_on_gpu = torch.cuda.is_available()
    model = torch.nn.Linear(2, 2)
    if train_on_gpu:
        model.cuda()
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model).cuda()
    """)


def test_cuda_calls_under_a_cuda_test_are_left_alone(tree):
    assert fixed(tree, GUARDED) == CASES[GUARDED]
    assert report(tree, GUARDED) == []


CPU_SCRIPT = case("cpu_script", """\
    import torch

    actor_critic, ob_rms = torch.load("model.pt")
    print(actor_critic)
    """)


def test_a_script_that_never_names_a_gpu_loads_onto_the_cpu(tree):
    assert 'torch.load("model.pt", map_location="cpu")' in fixed(tree, CPU_SCRIPT)


CHECKPOINT_DICT = case("checkpoint_dict", """\
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = torch.nn.Linear(2, 2).to(device)
    checkpoint = torch.load("ckpt.pth")
    net.load_state_dict(checkpoint["net"])
    best_acc = checkpoint["acc"]
    """)


def test_a_checkpoint_dict_read_into_load_state_dict_loads_onto_the_device(tree):
    assert 'torch.load("ckpt.pth", map_location=device)' in fixed(tree, CHECKPOINT_DICT)


def test_a_loaded_checkpoint_read_any_other_way_is_only_reported(tmp_path):
    source = "import torch\ncheckpoint = torch.load('c.pth')\nnet.cuda()\nuse(checkpoint)\nnet.load_state_dict(checkpoint['net'])\n"
    (tmp_path / "c.py").write_text(source)
    done = run_fixdev("--diff", "--no-cache", "--select", "FDV105", "c.py", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == b""
    assert b"FDV105" in done.stderr


# -- issue 12: numpy-on-device on real code (udacity deep-learning-v2-pytorch) ----

FLAG_HANDLED_NUMPY = """\
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

train_on_gpu = torch.cuda.is_available()
net = nn.Linear(8, 4)
if train_on_gpu:
    net.cuda()


def predict(x, top_k):
    inputs = torch.from_numpy(x)
    if train_on_gpu:
        inputs = inputs.cuda()
    p = F.softmax(net(inputs), dim=1).data
    if train_on_gpu:
        p = p.cpu()  # move to cpu
    p, top_ch = p.topk(top_k)
    top_ch = top_ch.numpy().squeeze()
    p = p.numpy().squeeze()
    return p, top_ch


images = torch.randn(2, 8)
if train_on_gpu:
    images = images.cuda()
_, preds_tensor = torch.max(net(images), 1)
preds = np.squeeze(preds_tensor.numpy()) if not train_on_gpu else np.squeeze(preds_tensor.cpu().numpy())
with torch.no_grad():
    top = net(images).numpy()
"""


def test_numpy_reads_the_code_already_handles_for_a_gpu_are_left_alone(tmp_path):
    """A result copied back under the flag that moved the input (`if
    train_on_gpu: p = p.cpu()`), and a `.numpy()` in the branch of `x if not
    train_on_gpu else y` that runs without a GPU, read host tensors: fixdev
    had added `.detach().cpu()` to 10 such reads. The last read is a real one."""
    (tmp_path / "predict.py").write_text(FLAG_HANDLED_NUMPY)
    done = run_fixdev("--apply", "--no-cache", "--select", "FDV108", "predict.py", cwd=tmp_path)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    text = (tmp_path / "predict.py").read_text()
    assert text == FLAG_HANDLED_NUMPY.replace("top = net(images).numpy()", "top = net(images).cpu().numpy()")


# -- issue 12: hard-coded-cuda on torch's own tree ---------------------------------

SYNC_FLAG_AND_SCALER = """\
import torch
from torch.amp.grad_scaler import GradScaler


def run_and_sync(fn, args):
    from torch.cuda import synchronize

    fn(*args)
    need_sync = False
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_cuda:
            need_sync = True
            break
    if need_sync:
        synchronize()


def sync_when_asked(need_sync):
    if need_sync:
        torch.cuda.synchronize()


class ShardedGradScaler(GradScaler):
    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16) -> None:
        super().__init__(device, init_scale=init_scale)


class Runner:
    def __init__(self, model, device="cuda"):
        super().__init__()
        self.model = model.to(device)
"""


def test_cuda_flag_set_for_cuda_tensors_and_a_grad_scaler_base_are_left_alone(tmp_path):
    """`if need_sync: synchronize()`, where need_sync is set only for CUDA
    tensors, runs only with CUDA; a scaler's device handed to GradScaler's
    __init__ only warns without CUDA (torch/_dynamo/repro/aoti.py,
    torch/distributed/fsdp/sharded_grad_scaler.py). A flag the caller passes,
    and a device a plain class places a model on, are still fixed."""
    (tmp_path / "sync.py").write_text(SYNC_FLAG_AND_SCALER)
    done = run_fixdev("--apply", "--no-cache", "--select", "FDV109", "sync.py", cwd=tmp_path)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    text = (tmp_path / "sync.py").read_text()
    expected = SYNC_FLAG_AND_SCALER.replace(
        "    if need_sync:\n        torch.cuda.synchronize()\n",
        "    if need_sync:\n        if torch.cuda.is_available():\n            torch.cuda.synchronize()\n",
    ).replace('def __init__(self, model, device="cuda"):', 'def __init__(self, model, device="cuda" if torch.cuda.is_available() else "cpu"):')
    assert text == expected


TENSORRT_SCRIPT = """\
import numpy as np
import tensorrt as trt
import torch

device = torch.device('cuda:0')
logger = trt.Logger(trt.Logger.INFO)
"""


def test_a_tensorrt_script_is_gpu_code_on_purpose(tmp_path):
    """A TensorRT engine runs only on an NVIDIA GPU: a CPU fallback for its
    device is no fix (yolov7's tools/YOLOv7trt.ipynb)."""
    (tmp_path / "trt_infer.py").write_text(TENSORRT_SCRIPT)
    done = run_fixdev("--diff", "--no-cache", "--select", "FDV109", "trt_infer.py", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == b"", done.stdout.decode()
    (tmp_path / "plain.py").write_text(TENSORRT_SCRIPT.replace("import tensorrt as trt\n", ""))
    done = run_fixdev("--diff", "--no-cache", "--select", "FDV109", "plain.py", cwd=tmp_path)
    assert b"torch.cuda.is_available()" in done.stdout


DETACHED_WHERE_BOUND = """\
import torch
import torch.nn as nn

net = nn.Linear(4, 2).to("cuda")
x = torch.randn(3, 4).to("cuda")
scores = net(x).detach()
a = scores.numpy()
y = net(x).detach()
y = net(x)
b = y.numpy()
"""


def test_a_value_detached_where_it_is_bound_gets_no_second_detach(tmp_path):
    """`scores = net(x).detach()` records no gradient: reading it needs
    `.cpu()` only. A name also bound from the model itself still gets
    `.detach().cpu()`."""
    (tmp_path / "read.py").write_text(DETACHED_WHERE_BOUND)
    done = run_fixdev("--apply", "--no-cache", "--select", "FDV108", "read.py", cwd=tmp_path)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    text = (tmp_path / "read.py").read_text()
    assert "a = scores.cpu().numpy()\n" in text and "b = y.detach().cpu().numpy()\n" in text
