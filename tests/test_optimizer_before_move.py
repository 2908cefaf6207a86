"""FDV112's edges, through the CLI: what moves the model's move up, and what
only reports it."""

from __future__ import annotations

import json

import pytest

HEAD = "import torch\nimport torch.nn as nn\n\n\n"


def _run(tmp_path, fixdev, source: str, newline: str = "\n"):
    path = tmp_path / "train.py"
    path.write_bytes(source.replace("\n", newline).encode())
    check = fixdev("--output-format", "json", "--no-cache", "--select", "FDV112", "train.py", cwd=tmp_path)
    findings = json.loads(check.stdout)
    fixdev("--apply", "--no-cache", "--select", "FDV112", "train.py", cwd=tmp_path)
    return findings, path.read_bytes().decode()


FIXED = [
    pytest.param(
        "def f(model, state, use_gpu):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    if use_gpu: model.cuda()\n    return opt\n",
        "def f(model, state, use_gpu):\n    if use_gpu: model.cuda()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    return opt\n",
        id="one-line-guard",
    ),
    pytest.param(
        "def f(model, state, device):\n    # the optimizer\n    opt = torch.optim.Adam(model.parameters())\n    opt.load_state_dict(state)\n\n    # to the GPU\n    # (all of it)\n    model.to(device)  # in place\n    return opt\n",
        "def f(model, state, device):\n    # to the GPU\n    # (all of it)\n    model.to(device)  # in place\n    # the optimizer\n    opt = torch.optim.Adam(model.parameters())\n    opt.load_state_dict(state)\n\n    return opt\n",
        id="comments-travel",
    ),
    pytest.param(
        "def f(model, state, device):\n    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])\n    model.eval()\n    opt.load_state_dict(state)\n    model.to(device)\n    return opt\n",
        "def f(model, state, device):\n    model.to(device)\n    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])\n    model.eval()\n    opt.load_state_dict(state)\n    return opt\n",
        id="gathered-parameters",
    ),
    # no one place before the optimizer: the move goes up to just before the load
    pytest.param(
        "def f(model, state, device, fresh):\n    if fresh:\n        opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    else:\n        opt = torch.optim.Adam(model.parameters())\n"
        "    opt.load_state_dict(state)\n    model.to(device)\n    return opt\n",
        "def f(model, state, device, fresh):\n    if fresh:\n        opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    else:\n        opt = torch.optim.Adam(model.parameters())\n"
        "    model.to(device)\n    opt.load_state_dict(state)\n    return opt\n",
        id="made-in-two-places",
    ),
    # past a wrapper: the wrapped model is the one moved
    pytest.param(
        "def f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    model = nn.DataParallel(model)\n    model.to(device)\n    return opt\n",
        "def f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    model.to(device)\n    opt.load_state_dict(state)\n    model = nn.DataParallel(model)\n    return opt\n",
        id="wrapped-between",
    ),
    # the model runs before the resume branch: the move goes up to just before
    # it; `args.start = ...` leaves the `args.cuda` the move reads alone
    pytest.param(
        "def f(model, args):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    print(model(torch.zeros(1, 2)))\n\n    if args.resume:\n        state = torch.load(args.resume, map_location='cpu')\n"
        "        opt.load_state_dict(state['opt'])\n        args.start = state['epoch']\n\n    if args.cuda:\n        model.cuda()\n\n    return opt\n",
        "def f(model, args):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    print(model(torch.zeros(1, 2)))\n\n    if args.cuda:\n        model.cuda()\n\n    if args.resume:\n        state = torch.load(args.resume, map_location='cpu')\n"
        "        opt.load_state_dict(state['opt'])\n        args.start = state['epoch']\n\n    return opt\n",
        id="resume-branch",
    ),
]


@pytest.mark.parametrize("before, after", FIXED)
def test_the_move_goes_up(tmp_path, fixdev, before, after):
    findings, text = _run(tmp_path, fixdev, HEAD + before)
    assert [f["code"] for f in findings] == ["FDV112"] and findings[0]["fix"] is not None
    assert text == HEAD + after


def test_line_endings_are_kept(tmp_path, fixdev):
    before, after = FIXED[0].values[0], FIXED[0].values[1]
    _, text = _run(tmp_path, fixdev, HEAD + before, newline="\r\n")
    assert text == (HEAD + after).replace("\n", "\r\n")


REPORTED = [
    pytest.param(
        "def f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    model.to(device); print('moved')\n    return opt\n",
        id="not-alone-on-its-line",
    ),
    pytest.param(
        "def f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    device = torch.device(device)\n    model.to(device)\n    return opt\n",
        id="device-bound-between",
    ),
    pytest.param(
        "def check(m):\n    return m\n\n\ndef f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    check(None)\n    model.to(device)\n    return opt\n",
        id="file-function-called-between",
    ),
    pytest.param(
        "class T:\n    def __init__(self, model: nn.Module, state, device):\n        self.model = model\n"
        "        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)\n        self.opt.load_state_dict(state)\n"
        "        self.warm_up()\n        self.model.to(device)\n\n    def warm_up(self):\n        pass\n",
        id="method-called-between",
    ),
    pytest.param(
        "def f(model, state, device, x):\n    net = model\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    y = net(x)\n    model.to(device)\n    return opt, y\n",
        id="alias-runs-between",
    ),
    pytest.param(
        "def f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    model = nn.DataParallel(model, device_ids=ids())\n    model.to(device)\n    return opt\n",
        id="wrapped-with-a-call-between",
    ),
]


@pytest.mark.parametrize("before", REPORTED)
def test_reported_without_a_fix(tmp_path, fixdev, before):
    findings, text = _run(tmp_path, fixdev, HEAD + before)
    assert [f["code"] for f in findings] == ["FDV112"] and findings[0]["fix"] is None
    assert text == HEAD + before


SILENT = [
    pytest.param(
        "def f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    if device is None:\n        opt.load_state_dict(state)\n    else:\n        model.to(device)\n    return opt\n",
        id="other-branch",
    ),
    pytest.param(
        "def f(state, device):\n    model = nn.Linear(2, 2).to(device)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    model.to(device)\n    return opt\n",
        id="already-on-the-device",
    ),
    pytest.param(
        "def f(model, other, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    other.to(device)\n    return opt\n",
        id="another-module-moves",
    ),
    pytest.param(
        "def f(model, state, device):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n    def later():\n        model.to(device)\n    return opt, later\n",
        id="moved-in-a-nested-function",
    ),
]


@pytest.mark.parametrize("before", SILENT)
def test_silent(tmp_path, fixdev, before):
    findings, text = _run(tmp_path, fixdev, HEAD + before)
    assert findings == [] and text == HEAD + before


def test_a_move_of_the_model_under_another_name_is_reported(tmp_path, fixdev):
    before = (
        "def f(state, device):\n    model = nn.Linear(2, 2)\n    model_without_ddp = model\n"
        "    opt = torch.optim.SGD(model_without_ddp.parameters(), lr=0.1)\n    opt.load_state_dict(state)\n"
        "    model.to(device)\n    return opt\n"
    )
    findings, text = _run(tmp_path, fixdev, HEAD + before)
    assert [f["code"] for f in findings] == ["FDV112"] and findings[0]["fix"] is None
    assert text == HEAD + before


HELPER = (
    "import torch\n\n\ndef load_epoch(path, model, optimizer):\n    state = torch.load(path, map_location='cpu')\n"
    "    model.load_state_dict(state['model'])\n    optimizer.load_state_dict(state['optimizer'])\n"
)
CALLER = (
    "import torch\nfrom torch import optim\nimport checkpoints\n\n\ndef train(model, make_optimizer, path, device):\n"
    "    optimizer = make_optimizer(model)\n    scheduler = optim.lr_scheduler.StepLR(optimizer, 10)\n"
    "    checkpoints.load_epoch(path, model, optimizer)\n    model.to(device)\n    return optimizer, scheduler\n"
    "\n\nif __name__ == '__main__':\n    from models import build, build_optimizer\n    train(build(), build_optimizer, 'last.pt', 'cuda')\n"  # a script: it runs (a report in dead code is dropped)
)


def _run_files(tmp_path, fixdev, files: dict):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    check = fixdev("--output-format", "json", "--no-cache", "--select", "FDV112", ".", cwd=tmp_path)
    return json.loads(check.stdout)


def test_a_helper_of_another_file_loading_the_optimizer_is_reported(tmp_path, fixdev):
    """The optimizer (shown one by the scheduler it is given) and the model go to
    another file's function that loads both; the model moves only after."""
    findings = _run_files(tmp_path, fixdev, {"checkpoints.py": HELPER, "train.py": CALLER})
    assert [(f["filename"].split("/")[-1], f["code"], f["location"]["row"], f["fix"]) for f in findings] == [("train.py", "FDV112", 9, None)]


@pytest.mark.parametrize(
    "helper, caller",
    [
        pytest.param(HELPER.replace("    model.load_state_dict", "    model.to('cuda')\n    model.load_state_dict"), CALLER, id="helper-moves"),
        pytest.param(HELPER, CALLER.replace("    scheduler = optim.lr_scheduler.StepLR(optimizer, 10)\n", "    scheduler = None\n"), id="not-shown-an-optimizer"),
        pytest.param(HELPER, CALLER.replace("    model.to(device)\n    return", "    return").replace("    optimizer = make", "    model.to(device)\n    optimizer = make"), id="moved-first"),
        pytest.param(HELPER.replace("optimizer.load_state_dict", "print"), CALLER, id="optimizer-not-loaded"),
    ],
)
def test_a_helper_that_does_not_show_the_bug_is_silent(tmp_path, fixdev, helper, caller):
    assert _run_files(tmp_path, fixdev, {"checkpoints.py": helper, "train.py": caller}) == []
