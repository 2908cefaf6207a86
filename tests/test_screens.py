"""Rule screens (``Rule.screen``) only save work: a file a screen turns away
would have given that rule no finding. Checked by linting every example and
fixture twice, with the screens and with every screen passing everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixdev.engine.core import Engine
from fixdev.engine.registry import all_rules
from fixdev.engine.rule import Rule

ROOT = Path(__file__).resolve().parent.parent
TEXTS = sorted(
    [*(case.code for rule in all_rules() for case in rule.INVALID), *(code for rule in all_rules() for code in rule.VALID)]
    + [path.read_text(encoding="utf-8") for path in sorted((ROOT / "fixtures").rglob("*.before.py"))]
    + [path.read_text(encoding="utf-8") for path in sorted((ROOT / "tests" / "programs").rglob("*.py"))]
)


def _findings(text: str) -> list[tuple]:
    return [(f.code, f.start, f.end, f.message, f.fix) for f in Engine(all_rules()).lint(text)]


def test_there_are_texts_and_screens_to_check():
    assert len(TEXTS) > 250
    screened = [rule.code for rule in all_rules() if rule.__dict__.get("screen") is not None]
    assert len(screened) >= 10, screened


def test_screens_hide_no_finding(monkeypatch):
    with_screens = [_findings(text) for text in TEXTS]
    monkeypatch.setattr(Rule, "screen", classmethod(lambda cls, screening: True))
    for rule in all_rules():
        if "screen" in rule.__dict__:
            monkeypatch.setattr(rule, "screen", classmethod(lambda cls, screening: True))
    without = [_findings(text) for text in TEXTS]
    differ = [text for text, a, b in zip(TEXTS, with_screens, without) if a != b]
    assert not differ, f"{len(differ)} texts lose findings to a screen; the first:\n{differ[0]}"
    assert sum(map(len, without)) > 200  # the texts do hold findings to lose


@pytest.mark.parametrize("rule", [rule for rule in all_rules() if "screen" in rule.__dict__], ids=lambda rule: rule.code)
def test_a_screen_turns_files_away(rule):
    """A screen is finer than its trigger: some VALID example the trigger
    matches is turned away before libcst parses it."""
    import ast

    from fixdev.engine.rule import Screening

    turned_away = [code for code in rule.VALID if rule.might_match(code) and not rule.screen(Screening(code, ast.parse(code)))]
    assert turned_away or not any(rule.might_match(code) for code in rule.VALID), rule.code


_HEAD = "import torch\nimport torch.nn as nn\n"
_MODULE = _HEAD + "class M(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"

# (rule, text, whether the screen passes it): each text turned away is one the
# visit finds nothing in, each one passed a shape the visit reports.
TIGHTER = [
    # FDV113: a class with no base is no module class
    ("FDV113", _HEAD + "class Agent:\n    \"\"\"Holds its nets, not an nn.Module.\"\"\"\n    def __init__(self):\n        self.nets = [nn.Linear(4, 4)]\n    def run(self, x):\n        return self.nets[0](x)\n", False),
    # FDV113: nor is one derived from plain `object` only, unless a star import may bind `object` (and `Linear`)
    ("FDV113", _HEAD + "class Agent(object):\n    \"\"\"Holds its nets, not an nn.Module.\"\"\"\n    def __init__(self):\n        self.nets = [nn.Linear(4, 4)]\n"
     "    def run(self, x):\n        return self.nets[0](x)\n", False),
    ("FDV113", "from torch.nn import *\nclass Net(object):  # a Module all the same\n    def __init__(self):\n        super().__init__()\n        self.fc = Linear(4, 4)\n"
     "        self.layers = [Linear(4, 4), Linear(4, 4)]\n    def forward(self, x):\n        return self.layers[0](self.fc(x))\n", True),
    # FDV113: an empty dict is never filled by the rule's adds (`self.heads[k] = ...` sets an element)
    ("FDV113", _MODULE + "        self.heads = {}\n        self.heads['a'] = nn.Linear(d, d)\n    def forward(self, x):\n        return self.heads['a'](x)\n", False),
    # FDV113: an empty list filled with what no torch import names
    ("FDV113", _MODULE + "        self.info = []\n        self.info.append(dict(c=d))\n    def forward(self, x):\n        return x, self.info\n", False),
    # FDV113: a local list of another module's calls (math.ceil names nothing in torch)
    ("FDV113", "import math\n" + _MODULE + "        sizes = [math.ceil(d / 2) for _ in range(2)]\n        self.sizes = sizes\n    def forward(self, x):\n        return x.view(*self.sizes)\n", False),
    # FDV113: forward calls a layer through self (no qualified name) or a class with no base
    ("FDV113", _MODULE + "        self.LSTM = nn.LSTM(d, d)\n    def forward(self, x):\n        return self.LSTM(x)\n", False),
    ("FDV113", _HEAD + "class Pair:\n    pass\nclass M(nn.Module):\n    def forward(self, x):\n        return Pair()\n", False),
    # FDV113: an empty local list filled with layers, then stored: reported
    ("FDV113", _MODULE + "        layers = []\n        layers.append(nn.Linear(d, d))\n        self.layers = layers\n    def forward(self, x):\n        return self.layers[0](x)\n", True),
    # FDV113: an empty list filled with layers through the attribute: reported
    ("FDV113", _MODULE + "        self.layers = []\n        self.layers.append(nn.Linear(d, d))\n    def forward(self, x):\n        return self.layers[0](x)\n", True),
    # FDV109: choices of device surely under a CUDA test, or in a function named for CUDA
    ("FDV109", _HEAD + "def pick(use_cuda):\n    if use_cuda:\n        device = 'cuda'\n    else:\n        device = 'cpu'\n    return device\n", False),
    ("FDV109", _HEAD + "def autocast_dtype(device='cuda'):\n    return torch.get_autocast_dtype(device)\n", False),
    # FDV109: a parameter the function compares
    ("FDV109", _HEAD + "def run(x, device='cuda'):\n    if device == 'cpu':\n        return x\n    return x * 2\n", False),
    # FDV109: a literal no torch call takes, a device type, a method of no torch name
    ("FDV109", _HEAD + "import os\nname = os.environ.get('DEV', 'cuda')\n", False),
    ("FDV109", _HEAD + "def f(x):\n    with torch.autocast(device_type='cuda'):\n        return x * 2\n", False),
    ("FDV109", _HEAD + "class Engine:\n    def wait(self):\n        self._stream.synchronize()\n", False),
    ("FDV109", _HEAD + "class Spec(dict, device='cuda'):\n    pass\n", False),
    # FDV109: uses surely under a CUDA test: device=, torch.device in a use's place, a move not of meets_a_caller's shape
    ("FDV109", _HEAD + "def make(n, use_cuda):\n    if use_cuda:\n        return torch.zeros(n, device='cuda')\n    return torch.zeros(n)\n", False),
    ("FDV109", _HEAD + "def make(x, use_cuda):\n    if use_cuda:\n        x = x.to(torch.device('cuda'))\n    return x\n", False),
    ("FDV109", _HEAD + "def make(x):\n    if torch.cuda.is_available():\n        return x.to('cuda') * 2\n    return x\n", False),
    # FDV109: a move of that shape: reported where it meets the caller's value (the first INVALID example's shape)
    ("FDV109", _HEAD + "def f(out, k):\n    t = torch.arange(k)\n    if torch.cuda.is_available():\n        t = t.to('cuda')\n    return out[:, 0] * t\n", True),
    # FDV109: the same choice with no test around it, and a call with none: reported
    ("FDV109", _HEAD + "def pick(use_cuda):\n    device = 'cuda'\n    return device\n", True),
    ("FDV109", _HEAD + "def wait():\n    torch.cuda.synchronize()\n", True),
    # FDV106: a receiver the flow places nowhere it knows (another module's object: a model, maybe)
    ("FDV106", _HEAD + "from zoo import build\ndef place(device):\n    model = build()\n    model.to(device)\n", False),
    # FDV106: a parameter the function treats as a tensor (``_follows_tensor_parameters``)
    ("FDV106", _HEAD + "def place(x, device):\n    n = x.size(0)\n    x.to(device)\n    return n\n", True),
    ("FDV106", _HEAD + "def place(device):\n    x = torch.ones(3)\n    x.to(device)\n    return x\n", True),
    # FDV104: a .cuda() surely under a CUDA flag, not T = T.cuda() right under `if <call>:`
    ("FDV104", _HEAD + "def place(m, use_cuda):\n    if use_cuda:\n        m = m.cuda()\n    return m\n", False),
    ("FDV104", _HEAD + "cuda = torch.cuda.is_available()\nnet = nn.Linear(2, 2)\nif cuda:\n    net.cuda()\n", False),
    ("FDV104", _HEAD + "net = nn.Linear(2, 2)\nnet.cuda()\n", True),
    # FDV102: a call in a module's method no torch import names (a builtin `range`, NumPy's zeros)
    ("FDV102", _HEAD + "class M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.fc = nn.Linear(3, 3)\n        self.n = n\n"
     "    def forward(self, x):\n        if x.is_cuda:\n            return nn.parallel.data_parallel(self.fc, x, range(self.n))\n        return self.fc(x)\n", False),
    ("FDV102", "import numpy as np\n" + _HEAD + "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 3)\n"
     "    def forward(self, x):\n        return self.fc(x) + np.zeros(3)\n", False),
    ("FDV102", _HEAD + "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(3, 3)\n"
     "    def forward(self, x):\n        bias = torch.zeros(x.size(0), 3)\n        return self.fc(x) + bias\n", True),
    # FDV102: factories only in a module's `__init__` (parameters, buffers: constant-buffer's), or given `device=`
    ("FDV102", _MODULE + "        self.w = nn.Parameter(torch.zeros(d))\n        self.register_buffer('b', torch.ones(d))\n"
     "    def forward(self, x):\n        return x * self.w + self.b + torch.ones(d, device=x.device)\n", False),
    # FDV102: ... but one in a plain class's `__init__` is visit_Module's, and passes (there it meets a device)
    ("FDV102", _HEAD + "device = torch.device('cuda')\nclass Meter:\n    def __init__(self, n):\n        self.total = torch.zeros(n)\n"
     "    def add(self, x):\n        self.total = self.total + x\nm = Meter(3)\nm.add(torch.ones(3, device=device))\n", True),
    # FDV102: ... and so does one in a static `__init__` helper of a module, where no `self` is bound
    ("FDV102", _HEAD + "device = torch.device('cuda')\nclass M(nn.Module):\n    @staticmethod\n    def __init__(n):\n        return torch.zeros(n) + torch.ones(n, device=device)\n", True),
    # FDV102: ... and an arm of a conditional expression, even in a module's `__init__` (visit_IfExp's)
    ("FDV102", _MODULE + "        self.s = x.mean() if x.numel() else torch.tensor(0.0)\n".replace("x", "d"), True),
    # FDV111: no index that may be a tensor (constants, slices, a negated number): no run is asked for
    ("FDV111", _HEAD + "x = torch.randn(5, 3)\ni = torch.randn(5, device='cuda').argmax(0)\ny = x[0] + x[:, 1] + x[-1, ..., None]\n", False),
    ("FDV111", _HEAD + "x = torch.randn(5, 3)\nscores = torch.randn(5, device='cuda')\ny = x[scores > 0, :2]\n", True),
    # FDV105: a load of the file the code has just written (``_reads_what_it_wrote``)
    ("FDV105", _HEAD + "torch.save(torch.zeros(3), 'w.pt')\nw = torch.load('w.pt')\n", False),
    ("FDV105", _HEAD + "w = torch.load('w.pt')\n", True),
    # FDV110: a typed CPU constructor given a name passes only where the flow
    # says that name is a tensor that may be off the host
    ("FDV110", _HEAD + "labels = [0, 1]\nidx = torch.LongTensor(labels)\n", False),
    ("FDV110", _HEAD + "def targets(labels):\n    return torch.LongTensor(labels)\n", False),
    ("FDV110", _HEAD + "x = torch.randn(3).cuda()\nidx = torch.LongTensor(x.argmax(0, keepdim=True))\n", True),
    ("FDV110", _HEAD + "def f(x):\n    return torch.LongTensor(torch.cat([x.unsqueeze(0), x.unsqueeze(0)]))\nf(torch.ones(2).cuda())\n", True),
    # FDV103: a plain class without its own `to` (its callers place its tensors)
    ("FDV103", _HEAD + "class Store:\n    def __init__(self, n):\n        self.r = torch.zeros(n)\n    def total(self):\n        return self.r.sum()\n", False),
    ("FDV103", _HEAD + "class Store(object):\n    def __init__(self, n):\n        self.r = torch.zeros(n)\n    def total(self):\n        return self.r.sum()\n", False),
    # FDV103: a plain class whose `to` moves the tensor, or that reads another apart from the moves
    ("FDV103", _HEAD + "class Store:\n    def __init__(self, n):\n        self.r = torch.zeros(n)\n        self.m = torch.ones(n)\n"
     "    def to(self, device):\n        self.r = self.r.to(device)\n    def count(self):\n        return self.m.tolist()\n", False),
    ("FDV103", _HEAD + "class Store:\n    def __init__(self, n):\n        self.r = torch.zeros(n)\n        self.m = torch.ones(n)\n"
     "    def to(self, device):\n        self.r = self.r.to(device)\n    def masked(self):\n        return self.r * self.m\n", True),
]


@pytest.mark.parametrize("code, text, passes", TIGHTER, ids=[f"{code}-{i}" for i, (code, _, _) in enumerate(TIGHTER)])
def test_a_screen_turns_away_what_the_visit_is_silent_on(code, text, passes):
    import ast

    from fixdev.engine.rule import Screening

    rule = next(rule for rule in all_rules() if rule.code == code)
    assert rule.screen(Screening(text, ast.parse(text))) is passes
    found = [f for f in Engine([rule]).lint(text, triggers=False) if f.code == code]
    assert bool(found) is passes, found
