"""What the device-flow analysis believes, case by case.

Each case is a snippet with a marked expression: a line ``#^ EXPR`` points at
the first occurrence of ``EXPR`` on the nearest line above it (found through
``FileFlow.node_at``, so character offsets are exercised too). Snippets get
``HEADER`` first unless they import something themselves.

Expected answers are written as ``what placement|placement``: ``tensor Host``,
``module Device(device)``, ``tensor Device(None)|Host``; placements sorted.
"""

from __future__ import annotations

import ast
import re
import textwrap

import pytest

from fixdev.analysis.flow import HOST, UNKNOWN, Device, FileFlow, SameAs, What

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport numpy as np\nfrom torch.utils.data import DataLoader\n"


def prepare(snippet: str) -> str:
    snippet = textwrap.dedent(snippet).lstrip("\n")
    return snippet if "import" in snippet else HEADER + snippet


def marked(flow: FileFlow, text: str) -> ast.AST:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#^"):
            expression = line.split("#^", 1)[1].strip()
            j = i - 1
            while lines[j].lstrip().startswith("#^"):
                j -= 1
            found = re.search(r"(?<![\w.])" + re.escape(expression) + r"(?!\w)", lines[j])
            column = found.start()
            start = offsets[j] + column
            node = flow.node_at(start, start + len(expression))
            assert node is not None, f"no node for {expression!r}"
            return node
    raise AssertionError("no #^ marker")


def describe(flow: FileFlow, node: ast.AST) -> str:
    value = flow.value(node)
    places = "|".join(sorted({repr(p) for p, _ in flow.where(node)}))
    return f"{value.what.value} {places}".strip()


def check(snippet: str) -> tuple[FileFlow, ast.AST]:
    text = prepare(snippet)
    flow = FileFlow(text)
    return flow, marked(flow, text)


# -- where a value lives -------------------------------------------------------------------

WHERE = [
    # factories
    ("x = torch.zeros(3)\ny = x\n#^ y", "tensor Host"),
    ("x = torch.randn(2, 3, dtype=torch.float16)\n#^ x", "tensor Host"),
    ("d = torch.device('cuda')\nx = torch.zeros(3, device=d)\n#^ x", "tensor Device(d)"),
    ("x = torch.zeros(3, device='cuda')\n#^ x", 'tensor Device("cuda")'),
    ("x = torch.zeros(3, device='cpu')\n#^ x", "tensor Host"),
    ("x = torch.zeros(3, device=some_device())\n#^ x", "tensor Unknown"),
    ("dd = dict(device=device, dtype=dtype)\nx = torch.zeros(3, **dd)\n#^ x", "tensor Unknown"),
    ("dd = {'device': 'cuda'}\nx = torch.zeros(3, **dd)\n#^ x", 'tensor Device("cuda")'),
    ("m = nn.Linear(2, 2, device='cuda')\n#^ m", 'module Device("cuda")'),
    ("m = nn.Linear(2, 2, **factory_kwargs)\n#^ m", "module Unknown"),
    ("a = np.ones(3)\nx = torch.from_numpy(a)\n#^ x", "tensor Host"),
    ("a = np.ones(3)\nx = torch.as_tensor(a)\n#^ x", "tensor Host"),
    ("x = torch.tensor([1.0, 2.0])\n#^ x", "tensor Host"),
    ("def f(data):\n    x = torch.tensor(data)\n    return x\n#^ x", "tensor Unknown"),
    ("y = torch.ones(3).cuda()\nx = torch.as_tensor(y)\n#^ x", "tensor Device(None)"),
    ("x = torch.Tensor(np.zeros(3))\n#^ x", "tensor Host"),
    ("x = torch.cuda.FloatTensor(3)\n#^ x", "tensor Device(None)"),
    ("y = torch.zeros(3, device='cuda')\nx = torch.zeros_like(y)\n#^ x", 'tensor Device("cuda")'),
    # a default device may be in effect: factories are not known to be on the host
    ("torch.set_default_device('cuda')\nx = torch.zeros(3)\n#^ x", "tensor Unknown"),
    ("def f():\n    return torch.ones(2)\ntorch.set_default_device('cuda')\nx = torch.zeros(3)\n#^ x", "tensor Unknown"),
    ("with torch.device('cuda'):\n    x = torch.zeros(3)\n#^ x", "tensor Unknown"),
    ("with torch.device('cuda'):\n    pass\nx = torch.zeros(3)\n#^ x", "tensor Host"),
    ("with torch.autocast('cuda'):\n    x = torch.zeros(3)\n#^ x", "tensor Host"),
    # moves
    ("device = 'cuda'\nx = torch.zeros(3).to(device)\n#^ x", "tensor Device(device)"),
    ("x = torch.zeros(3).cuda()\n#^ x", "tensor Device(None)"),
    ("x = torch.zeros(3, device='cuda').cpu()\n#^ x", "tensor Host"),
    ("x = torch.zeros(3).to(torch.float16)\n#^ x", "tensor Host"),
    ("x = torch.zeros(3).to(dtype=torch.float16)\n#^ x", "tensor Host"),
    ("y = torch.zeros(3, device='cuda')\nx = torch.zeros(3).type_as(y)\n#^ x", 'tensor Device("cuda")'),
    ("y = torch.zeros(3, device='cuda')\nx = torch.zeros(3).to(y)\n#^ x", 'tensor Device("cuda")'),
    ("y = torch.zeros(3, device='cuda')\nx = torch.zeros(3).to(y.device)\n#^ x", 'tensor Device("cuda")'),
    ("x = torch.zeros(3).to('cpu')\n#^ x", "tensor Host"),
    ("x = torch.zeros(3).to(args.device)\n#^ x", "tensor Device(args.device)"),
    ("x = torch.zeros(3).to(DEVICE)\n#^ x", "tensor Device(DEVICE)"),
    ("x = torch.zeros(3).to(whatever)\n#^ x", "tensor Unknown"),
    ("device = f'cuda:{rank}'\nx = torch.zeros(3).to(device)\n#^ x", "tensor Device(device)"),
    ("name = 'cuda:' + str(rank)\nx = torch.zeros(3).to(name)\n#^ x", "tensor Unknown"),
    ("y = torch.ones(3, device='cuda')\nx = torch.zeros(3).to(y.dtype)\n#^ x", "tensor Host"),
    ("x = torch.zeros(3).type(torch.cuda.FloatTensor)\n#^ x", "tensor Device(None)"),
    ("def f(t):\n    x = torch.tensor(0).type(t.type())\n    return x\n#^ x", "tensor SameAs(t)"),
    # modules
    ("class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\nm = Net()\n#^ m", "module Host"),
    ("class Net(nn.Module):\n    pass\nm = Net()\nm.to('cuda')\nm\n#^ m", 'module Device("cuda")'),
    # a module of the file given modules holds them wherever they are
    ("class Wrap(nn.Module):\n    def __init__(self, inner):\n        super().__init__()\n        self.inner = inner\nw = Wrap(nn.Linear(2, 2).cuda())\n#^ w", "module Unknown"),
    ("class Wrap(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.inner = build(n)\nw = Wrap(2)\n#^ w", "module Unknown"),
    ("class Wrap(nn.Module):\n    def __init__(self, inner):\n        super().__init__()\n        self.inner = inner\nw = Wrap(get_model())\n#^ w", "module Unknown"),
    ("class Net(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.n = n\n        self.fc = nn.Linear(n, n)\nm = Net(4)\n#^ m", "module Host"),
    ("class Net(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.fc = nn.Linear(n, n)\nm = Net(args.n)\n#^ m", "module Host"),
    ("m = nn.Linear(2, 2)\nm.cuda()\nm\n#^ m", "module Device(None)"),
    ("m = nn.Linear(2, 2)\nm2 = m.to('cuda')\nm\n#^ m", 'module Device("cuda")'),
    ("m = nn.Linear(2, 2)\nalias = m\nm.cuda()\nalias\n#^ alias", "module Device(None)"),
    ("m = nn.Linear(2, 2).cuda()\nm.cpu()\nm\n#^ m", "module Host"),
    ("m = nn.Linear(2, 2).to('cuda').half()\n#^ m", 'module Device("cuda")'),
    ("m = nn.Linear(2, 2).cuda()\ny = m(torch.ones(2, device='cuda'))\n#^ y", "tensor Device(None)"),
    ("act = nn.ReLU()\nx = torch.zeros(3, device='cuda')\ny = act(x)\n#^ y", 'tensor Device("cuda")'),
    ("act = nn.Sequential(nn.ReLU(), nn.Flatten())\ny = act(torch.zeros(3))\n#^ y", "tensor Host"),
    ("layers = [nn.Linear(2, 2).to('cuda') for _ in range(3)]\nm = nn.Sequential(*layers)\n#^ m", 'module Device("cuda")'),
    ("m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())\n#^ m", "module Host"),
    ("m = nn.ModuleList([nn.Linear(2, 2).cuda(), nn.Linear(2, 2)])\n#^ m", "module Device(None)|Host"),
    ("m = nn.Sequential(OrderedDict(fc=nn.Linear(2, 2)))\n#^ m", "module Unknown"),
    ("m = nn.Linear(2, 2).cuda()\nw = m.weight\n#^ w", "tensor Device(None)"),
    ("m = nn.DataParallel(nn.Linear(2, 2).cuda())\n#^ m", "module Device(None)"),
    # a module passed to a function the analysis does not follow may come back moved
    ("m = nn.Linear(2, 2)\nprepare(m)\nm\n#^ m", "module Unknown"),
    ("m = nn.Linear(2, 2)\nprint(m)\nm\n#^ m", "module Host"),
    # a module the code shows by its calls
    ("import torch\nmodel = build()\nmodel.eval()\nmodel.cuda()\nmodel\n#^ model", "module Device(None)"),
    ("import torch\nx = build()\nx.cuda()\nx\n#^ x", "unknown Unknown"),
    # tensor methods and arithmetic keep the device
    ("x = torch.zeros(3, device='cuda')\ny = x.view(3, 1).float()\n#^ y", 'tensor Device("cuda")'),
    ("x = torch.zeros(3, device='cuda')\ny = x * 2 + 1\n#^ y", 'tensor Device("cuda")'),
    ("x = torch.zeros(3, device='cuda')\ny = x @ torch.ones(3)\n#^ y", 'tensor Device("cuda")'),
    ("x = torch.zeros(3)\ny = -x.abs()\n#^ y", "tensor Host"),
    ("x = torch.zeros(3)\ny = torch.cat([x, x])\n#^ y", "tensor Host"),
    ("x = torch.zeros(3, device='cuda')\ny = torch.cat([x, torch.ones(3)])\n#^ y", 'tensor Device("cuda")'),
    ("x = torch.zeros(3)\nn = x.shape[0]\n#^ n", "scalar"),
    ("x = torch.zeros(3)\nn = x.sum().item()\n#^ n", "scalar"),
    ("x = torch.zeros(3, device='cuda')\na = x.cpu().numpy()\n#^ a", "array"),
    # devices
    ("x = torch.zeros(3)\nd = x.device\n#^ d", "device Host"),
    ("d = torch.device('cuda')\n#^ d", "device Device(torch.device('cuda'))"),
    ("device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nx = torch.zeros(1, device=device)\n#^ x", "tensor Device(device)"),
    ("device = 'cuda' if torch.cuda.is_available() else 'cpu'\nd = device\n#^ d", "device Device(device)"),
    ("device = torch.device('cpu')\nx = torch.zeros(3).to(device)\n#^ x", "tensor Host"),
    ("def f(x):\n    d = x.device\n    return d\n#^ d", "device SameAs(x)"),
    ("def f(device):\n    return torch.zeros(3, device=device)\n#^ torch.zeros(3, device=device)", "tensor Device(device)"),
    # loaders
    ("loader = DataLoader(ds, batch_size=4)\nfor xb, yb in loader:\n    xb\n#^ xb", "tensor Host"),
    ("loader = DataLoader(ds)\nfor i, (xb, yb) in enumerate(loader):\n    yb\n#^ yb", "tensor Host"),
    ("loader = DataLoader(ds)\nfor batch in loader:\n    x = batch[0]\n#^ x", "tensor Host"),
    ("loader = DataLoader(ds)\nfor batch in loader:\n    batch\n#^ batch", "batch Host"),
    ("loader = DataLoader(ds)\nfor batch in loader:\n    x = batch['image']\n#^ x", "tensor Host"),
    ("loader = DataLoader(ds)\nx, y = next(iter(loader))\n#^ x", "tensor Host"),
    ("for batch in DataLoader(ds):\n    for k in batch:\n        batch[k] = batch[k].to('cuda')\n    x = batch['image']\n#^ x", 'tensor Device("cuda")|Host'),
    ("from tqdm import tqdm\nimport torch\nfrom torch.utils.data import DataLoader\nfor x, y in tqdm(DataLoader(ds)):\n    x\n#^ x", "tensor Host"),
    ("loader = DataLoader(ds)\nfor xb, yb in loader:\n    xb = xb.to('cuda')\n    xb\n#^ xb", 'tensor Device("cuda")'),
    ("loader = DataLoader(ds)\nfor batch in loader:\n    batch = {k: v.to('cuda') for k, v in batch.items()}\n    x = batch['input_ids']\n#^ x", 'tensor Device("cuda")'),
    ("def collate(items):\n    return [t.to('cuda') for t in items]\nfor x in DataLoader(ds, collate_fn=collate):\n    x\n#^ x", "unknown Unknown"),
    # the file's collate_fn makes the batch: one tensor here; tuples of items there (detection's zip)
    ("def collate(items):\n    return torch.stack(items)\nfor x in DataLoader(ds, collate_fn=collate):\n    x\n#^ x", "tensor Host"),
    ("def collate(batch):\n    return tuple(zip(*batch))\nfor images, targets in DataLoader(ds, collate_fn=collate):\n    images\n#^ images", "unknown Unknown"),
    ("def collate(batch):\n    xs, ys = zip(*batch)\n    return torch.stack(xs), torch.tensor(ys)\nfor x, y in DataLoader(ds, collate_fn=collate):\n    y\n#^ y", "tensor Host"),
    # a dataset of the file: its __getitem__'s item through the default collate
    ("class D(Dataset):\n    def __getitem__(self, i):\n        return {'x': torch.zeros(3), 'name': 'a'}\nfor b in DataLoader(D()):\n    b['name']\n#^ b['name']", "unknown Unknown"),
    ("class D(Dataset):\n    def __getitem__(self, i):\n        return {'x': torch.zeros(3), 'name': 'a'}\nfor b in DataLoader(D()):\n    b['x']\n#^ b['x']", "tensor Host"),
    ("for x in DataLoader(ds, collate_fn=imported_collate):\n    x\n#^ x", "unknown Unknown"),
    ("from torch.utils.data import DataLoader, TensorDataset\nimport torch\nds = TensorDataset(torch.zeros(4, 2, device='cuda'))\nfor (x,) in DataLoader(ds):\n    x\n#^ x", "unknown Unknown"),
    ("from torch.utils.data import DataLoader, TensorDataset\nimport torch\nds = TensorDataset(torch.zeros(4, 2))\nfor (x,) in DataLoader(ds):\n    x\n#^ x", "tensor Host"),
    ("class Data(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n        return torch.zeros(2).to(self.device)\nfor x in DataLoader(Data()):\n    x\n#^ x", "unknown Unknown"),
    ("def run(loader: DataLoader):\n    for x, y in loader:\n        x\n#^ x", "tensor Host"),
    # joins, loops, rebinding
    ("x = torch.zeros(3)\nif c:\n    x = x.cuda()\nx\n#^ x", "tensor Device(None)|Host"),
    ("x = torch.zeros(3)\nif c:\n    x = x.cuda()\nelse:\n    x = x.to('cuda')\nx\n#^ x", 'tensor Device("cuda")|Device(None)'),
    ("x = torch.zeros(3)\nx = x.cuda()\nx\n#^ x", "tensor Device(None)"),
    ("x = torch.zeros(3)\nfor i in range(3):\n    x = x.cuda()\nx\n#^ x", "tensor Device(None)|Host"),
    ("x = torch.zeros(3)\nfor i in range(3):\n    y = x\n#^ y\n    x = x.cuda()", "tensor Device(None)|Host"),
    ("x = torch.zeros(3)\nwhile c:\n    x = x.cuda()\n    break\nx\n#^ x", "tensor Device(None)|Host"),
    ("x = torch.zeros(3)\nwhile True:\n    x = x.cuda()\n    break\nx\n#^ x", "tensor Device(None)"),
    ("x = torch.zeros(3)\ntry:\n    x = x.cuda()\nexcept RuntimeError:\n    pass\nx\n#^ x", "tensor Device(None)|Host"),
    ("x = torch.zeros(3)\nif c:\n    raise ValueError\nx = x.cuda()\nx\n#^ x", "tensor Device(None)"),
    ("def f(c):\n    x = torch.zeros(3)\n    if c:\n        return x\n    x = x.cuda()\n    return x\n#^ x", "tensor Device(None)"),
    ("with torch.no_grad():\n    x = torch.zeros(3).cuda()\nx\n#^ x", "tensor Device(None)"),
    ("a, b = torch.zeros(3).cuda(), torch.zeros(3)\n#^ b", "tensor Host"),
    ("a, b = torch.zeros(3).cuda(), torch.zeros(3)\n#^ a", "tensor Device(None)"),
    ("x = torch.zeros(3)\nx += torch.ones(3)\nx\n#^ x", "tensor Host"),
    ("xs = [t.cuda() for t in items]\n#^ xs", "unknown Device(None)"),
    ("xs = [torch.zeros(2).cuda() for _ in range(3)]\n#^ xs", "batch Device(None)"),
    ("xs = []\nfor i in range(3):\n    xs.append(torch.zeros(2))\ny = torch.stack(xs)\n#^ y", "tensor Host"),
    ("h = torch.zeros(3)\nfor step in range(4):\n    h = torch.zeros(3, device='cuda') + h\nh\n#^ h", 'tensor Device("cuda")|Host'),
    ("def f(xs):\n    if (n := len(xs)) > 0:\n        y = torch.zeros(n)\n        return y\n#^ y", "tensor Host"),
    ("x = torch.zeros(3)\nfirst = x[0]\n#^ first", "tensor Host"),
    # what the code does not show
    ("def f(x):\n    return x\n#^ x", "unknown SameAs(x)"),
    ("def f(x: torch.Tensor):\n    return x\n#^ x", "tensor SameAs(x)"),
    ("def f(m: nn.Module):\n    return m\n#^ m", "module SameAs(m)"),
    ("x = load_something()\n#^ x", "unknown Unknown"),
    ("x = torch.load('x.pt')\n#^ x", "unknown Unknown"),
    ("x = torch.zeros(3)\ny = x + unknown_thing\n#^ y", "tensor Host|Unknown"),
    # names resolve through imports and scopes
    ("import torch as t\nx = t.zeros(3)\n#^ x", "tensor Host"),
    ("from torch import zeros\nx = zeros(3)\n#^ x", "tensor Host"),
    ("from torch import zeros as z\nx = z(3)\n#^ x", "tensor Host"),
    ("from torch import nn\nimport torch\nm = nn.Linear(2, 2)\n#^ m", "module Host"),
    ("import torch.nn\nm = torch.nn.Linear(2, 2)\n#^ m", "module Host"),
    ("import torch\ndef zeros(n):\n    return [0] * n\nx = zeros(3)\n#^ x", "scalar"),
    ("import torch\ndef f(torch):\n    x = torch.zeros(3)\n    return x\n#^ x", "unknown Unknown"),
    ("import torch\ndef f():\n    import numpy as torch\n    x = torch.zeros(3)\n    return x\n#^ x", "array"),
    ("from torch import *\nx = zeros(3)\n#^ x", "tensor Host"),
    ("from torch import *\nfrom mylib import *\nx = zeros(3)\n#^ x", "unknown Unknown"),
    ("import torch\nx = zeros(3)\n#^ x", "unknown Unknown"),
    # summaries of the file's functions
    ("def load(a):\n    return torch.from_numpy(a).float()\nx = load(np.ones(3))\n#^ x", "tensor Host"),
    ("def move(t, device):\n    return t.to(device)\nx = move(torch.zeros(3), 'cuda')\n#^ x", 'unknown Device("cuda")'),
    ("def ident(t):\n    return t * 2\nx = ident(torch.zeros(3).cuda())\n#^ x", "tensor Device(None)"),
    ("def gen():\n    yield torch.zeros(3)\nx = gen()\n#^ x", "unknown Unknown"),
    # iterated over, a generator of this file gives what it yields, where it lives on every path
    ("def gen():\n    yield torch.zeros(3)\nfor t in gen():\n    y = t\n#^ t", "tensor Host"),
    ("def gen(a, b):\n    yield a, b\nfor t, u in gen(torch.zeros(3), 1):\n    y = t\n#^ t", "tensor Host"),
    ("def gen(a, b):\n    yield a, b\nfor t, u in gen(torch.zeros(3), 1):\n    y = u\n#^ u", "unknown Unknown"),
    ("def gen(d):\n    yield torch.zeros(3).to(d)\nfor t in gen('cuda'):\n    y = t\n#^ t", "unknown Unknown"),
    ("def gen(a):\n    yield a\ndef f(x):\n    for t in gen(x):\n        y = t\n#^ t", "unknown Unknown"),
    # torch re-exported by a module of the project is torch
    ("from common import torch\nx = torch.zeros(3)\n#^ x", "tensor Host"),
    ("from .common import torch as th\nx = th.zeros(3).cuda()\n#^ x", "tensor Device(None)"),
    # an instance of the file's class whose __iter__ is a generator: what it makes on the host itself
    ("class B:\n    def __iter__(self):\n        yield torch.zeros(3)\nfor t in B():\n    y = t\n#^ t", "tensor Host"),
    ("class B:\n    def __init__(self, a):\n        self.a = a\n    def __iter__(self):\n        yield self.a\nfor t in B(torch.zeros(3)):\n    y = t\n#^ t", "unknown Unknown"),
    ("class B:\n    def __init__(self, d):\n        self.device = d\n    def __iter__(self):\n        yield torch.zeros(3).to(self.device)\nfor t in B('cuda'):\n    y = t\n#^ t", "unknown Unknown"),
    ("class B:\n    def __iter__(self):\n        return iter([torch.zeros(3)])\nfor t in B():\n    y = t\n#^ t", "unknown Unknown"),
    # ... or whose __iter__ returns self beside a __next__: what __next__ returns
    ("class B:\n    def __iter__(self):\n        return self\n    def __next__(self):\n        return torch.zeros(3)\nfor t in B():\n    y = t\n#^ t", "tensor Host"),
    ("class B:\n    def __iter__(self):\n        return iter(self.rows)\n    def __next__(self):\n        return torch.zeros(3)\nfor t in B():\n    y = t\n#^ t", "unknown Unknown"),
    # ... or with no __iter__ at all, read by index: a map-style dataset's items; not a dict's keys
    ("class D:\n    def __getitem__(self, i):\n        return torch.zeros(3)\nfor t in D():\n    y = t\n#^ t", "tensor Host"),
    ("class D(dict):\n    def __getitem__(self, i):\n        return torch.zeros(3)\nfor t in D():\n    y = t\n#^ t", "unknown Unknown"),
    ("def f(n):\n    if n == 0:\n        return torch.zeros(3)\n    return f(n - 1)\nx = f(3)\n#^ x", "unknown Host|Unknown"),
    # facts flow into functions the file calls
    ("def show(t):\n    return t\n#^ t\nshow(torch.zeros(3).cuda())", "tensor Device(t.device)"),
    ("def show(t):\n    return t\n#^ t\nshow(torch.zeros(3).cuda())\nshow(torch.zeros(3))", "tensor Device(t.device)|Host"),
    ("def show(t):\n    return t\n#^ t\nshow(torch.zeros(3).cuda())\ncallbacks = [show]", "unknown SameAs(t)"),
    # what shows a parameter is a tensor, wherever it lives
    ("def f(x):\n    return x.size(0)\n#^ x", "tensor SameAs(x)"),
    ("def f(x):\n    return x.unsqueeze(1)\n#^ x", "tensor SameAs(x)"),
    ("def f(x):\n    return torch.cat([x, x])\n#^ x", "tensor SameAs(x)"),
    ("def f(x):\n    return torch.cat([x[:, 1:]])\n#^ x", "tensor SameAs(x)"),
    ("def f(x):\n    return F.relu(x)\n#^ x", "tensor SameAs(x)"),
    # NumPy 2 arrays share these; a list's first item is no slice of a tensor
    ("def f(x):\n    return x.view(-1), x.reshape(3), x.T, x.shape, x.device\n#^ x", "unknown SameAs(x)"),
    ("def f(x):\n    return torch.cat([x[0]])\n#^ x", "unknown SameAs(x)"),
    ("def f(x):\n    return torch.pow(x, torch.ones(3)), torch.mul(x, 2)\n#^ x", "unknown SameAs(x)"),  # torch.pow(2.0, t) works
    ("def f(x):\n    return torch.tensor(x), torch.zeros(x)\n#^ x", "unknown SameAs(x)"),
    # an attribute a method of a plain class shows is a tensor, given to the constructor
    ("class S:\n    def __init__(self, A):\n        self.A = A\n    def n(self):\n        a = self.A\n#^ a\n        return a.size(0) + self.A.dim()\n", "tensor SameAs(self.A)"),
    # bound again before the use: the use shows what the new value is
    ("def f(x):\n    x = g(x)\n    return x.dim()\ndef g(v):\n    return v\n#^ v", "unknown SameAs(v)"),
]


@pytest.mark.parametrize("snippet, expected", WHERE, ids=[f"{i:03d}" for i in range(len(WHERE))])
def test_where(snippet, expected):
    flow, node = check(snippet)
    assert describe(flow, node) == expected


# -- classes: facts flow between methods ---------------------------------------------------

NET = """
import torch
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.w = nn.Parameter(torch.ones(n))
        self.register_buffer("mask", torch.ones(n))
        self.scale = torch.ones(n)
        self.act = nn.ReLU()

    def forward(self, x):
        h = self.fc(x)
        a = h * self.w
        b = self.mask
        c = self.scale
        d = self.act(x)
        return a, b, c, d
"""

CLASS_CASES = [
    (NET + "#^ h", "h", "tensor Device(self.w.device)"),
    (NET, "a", "tensor Device(self.w.device)"),
    (NET, "b", "tensor Device(self.w.device)"),
    (NET, "c", "tensor Host"),  # a plain tensor attribute does not follow .to()
    (NET, "d", "unknown SameAs(x)"),
]


@pytest.mark.parametrize("text, name, expected", CLASS_CASES)
def test_module_attributes(text, name, expected):
    text = textwrap.dedent(text)
    flow = FileFlow(text)
    node = next(n for n in ast.walk(flow.tree) if type(n) is ast.Name and n.id == name and type(n.ctx) is ast.Store)
    assert describe(flow, node) == expected


TRAINER = """
import torch
from torch.utils.data import DataLoader

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

class Trainer:
    def __init__(self, model: torch.nn.Module, valid_loader: DataLoader):
        self.model = model.to(DEVICE)
        self.valid_loader = valid_loader

    def validate(self):
        with torch.no_grad():
            inputs, target = next(iter(self.valid_loader))
            output = self.model(inputs)
        return output
"""


def test_class_facts_flow_into_other_methods():
    flow = FileFlow(TRAINER)
    names = {n.id: n for n in ast.walk(flow.tree) if type(n) is ast.Name and type(n.ctx) is ast.Store}
    assert describe(flow, names["output"]) == "tensor Device(DEVICE)"
    assert describe(flow, names["inputs"]) == "tensor Host"
    model = next(n for n in ast.walk(flow.tree) if type(n) is ast.Attribute and n.attr == "model" and type(n.ctx) is ast.Load)
    assert describe(flow, model) == "module Device(DEVICE)"


def test_attributes_set_by_a_helper_init_calls():
    text = textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class Cell(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.proj = nn.Linear(n, n)
                self.init_states(n)

            def init_states(self, n):
                self.h = torch.zeros(n)

            def forward(self, x):
                state = self.h
                return self.proj(x) + state
        """
    )
    flow = FileFlow(text)
    state = next(n for n in ast.walk(flow.tree) if type(n) is ast.Name and n.id == "state")
    assert describe(flow, state) == "tensor Host"
    [sink] = flow.sinks()
    assert sink.kind == "operand" and ast.unparse(sink.value) == "state"
    assert [ast.unparse(o) for o in sink.origins] == ["torch.zeros(n)"]


def test_attribute_reassigned_elsewhere_is_unknown():
    text = textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class Att(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
                self.mask = None

            def forward(self, x):
                if self.mask is None:
                    self.mask = torch.ones(2)
                m = self.mask
                return m

            def other(self):
                m2 = self.mask
                return m2
        """
    )
    flow = FileFlow(text)
    names = {n.id: n for n in ast.walk(flow.tree) if type(n) is ast.Name and type(n.ctx) is ast.Store}
    assert describe(flow, names["m"]) == "unknown Host|Unknown"
    assert describe(flow, names["m2"]) == "unknown Unknown"


FOLLOWS = "tensor Device(next(self.parameters()).device)"


@pytest.mark.parametrize("move, expected", [
    # the module's own `to` moves it as Module.to moves a buffer: it lives where the module does
    ("self.scale = self.scale.to(device)", FOLLOWS),
    # moved somewhere `to` does not take from its arguments: nothing is known
    ("self.scale = self.scale.to('cpu')", "unknown Host|Unknown"),
    # set to something else there: nothing is known
    ("self.scale = device", "unknown Host|Unknown"),
])
def test_attribute_moved_by_the_class_own_to(move, expected):
    text = textwrap.dedent(
        f"""
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
                self.scale = torch.ones(2)

            def forward(self, x):
                s = self.scale
                return self.fc(x) * s

            def to(self, device):
                {move}
                return super().to(device)
        """
    )
    flow = FileFlow(text)
    names = {n.id: n for n in ast.walk(flow.tree) if type(n) is ast.Name and type(n.ctx) is ast.Store}
    assert describe(flow, names["s"]) == expected
    assert bool(flow.sinks()) is (expected != FOLLOWS)


# -- sinks -----------------------------------------------------------------------------------


def sinks(snippet: str) -> list[str]:
    flow = FileFlow(prepare(snippet))
    return [
        f"{s.kind} {ast.unparse(s.value)} from {', '.join(ast.unparse(o) for o in s.origins)} -> {s.device}"
        for s in flow.sinks()
    ]


SINKS = [
    # the first seed article: a factory's tensor fed to a model moved with .to(device)
    (
        """
        class SimpleNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 5)
            def forward(self, x):
                return self.fc(x)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = SimpleNet().to(device)
        x = torch.randn(3, 10)
        output = model(x)
        """,
        ["module-input x from torch.randn(3, 10) -> device"],
    ),
    # the second seed article's title error: a loader batch fed to a moved model
    (
        """
        from torchvision import datasets, models
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = models.resnet18().to(device)
        criterion = torch.nn.CrossEntropyLoss()
        loader = DataLoader(datasets.CIFAR10("data"), batch_size=32, shuffle=True)
        for images, labels in loader:
            outputs = model(images)
            loss = criterion(outputs, labels)
        """,
        [
            "module-input images from images -> device",
            "operand labels from labels -> device",
        ],
    ),
    # moved as they should be: silent
    (
        """
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(10, 2).to(device)
        loader = DataLoader(ds)
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            loss = nn.functional.cross_entropy(model(images), labels)
        """,
        [],
    ),
    # both sides move under the same condition: silent
    (
        """
        model = nn.Linear(10, 2)
        x = torch.randn(3, 10)
        if args.cuda:
            model.cuda()
            x = x.cuda()
        y = model(x)
        """,
        [],
    ),
    (
        """
        use_cuda = torch.cuda.is_available()
        model = nn.Linear(10, 2)
        if use_cuda:
            model = model.cuda()
        for x, y in DataLoader(ds):
            if use_cuda:
                x, y = x.cuda(), y.cuda()
            out = model(x)
        """,
        [],
    ),
    # only the model moves under the flag: the device path fails
    (
        """
        cuda = True if torch.cuda.is_available() else False
        disc = nn.Linear(4, 1)
        if cuda:
            disc.cuda()
        real = torch.autograd.Variable(imgs.type(Tensor), requires_grad=True)
        validity = disc(real)
        grad = torch.autograd.grad(validity, real, torch.ones(real.size(0), 1), create_graph=True)[0]
        """,
        ["operand torch.ones(real.size(0), 1) from torch.ones(real.size(0), 1) -> validity.device"],
    ),
    # a host module and host inputs: silent
    ("model = nn.Linear(2, 2)\nmodel(torch.zeros(2))\n", []),
    # an unknown model: silent
    ("model = torch.load('m.pt')\nmodel(torch.zeros(2))\n", []),
    ("model = get_model().cuda()\nmodel(torch.zeros(2))\n", []),
    # DataParallel moves its inputs
    ("model = nn.DataParallel(nn.Linear(2, 2).cuda())\nmodel(torch.zeros(2))\n", []),
    # a 0-dim host tensor combines with a device tensor legally
    ("x = torch.zeros(3, device='cuda')\ny = x * torch.tensor(2.0)\n", []),
    ("x = torch.zeros(3, device='cuda')\ns = torch.ones(4).sum()\ny = x / s\n", []),
    ("x = torch.zeros(3, device='cuda')\ny = x + torch.tensor([2.0])\n", ["operand torch.tensor([2.0]) from torch.tensor([2.0]) -> \"cuda\""]),
    # a tensor indexed by a number may be 0-dim; a numpy scalar is not a tensor
    ("x = torch.zeros(3, device='cuda')\nstd = torch.FloatTensor([2.0]).pow(2)\ny = x / (2 * std[0])\n", []),
    ("x = torch.zeros(3, device='cuda')\nstep = np.log(3) / np.log(10)\ny = (1 - step) * x\n", []),
    ("x = torch.zeros(3, device='cuda')\ndef f(step):\n    return torch.tensor(step)\ny = x * torch.tensor(len(x))\n", []),
    # a device variable the host side is moved with under a flag while the model always moves: silent
    (
        """
        device = "cuda" if args.cuda else "cpu"
        model = nn.Linear(2, 2).to(device)
        x = torch.zeros(2)
        if args.cuda:
            x = x.cuda()
        y = model(x)
        """,
        [],
    ),
    # the model moves under a condition, the input never: the device path fails
    (
        """
        model = nn.Linear(2, 2)
        if torch.cuda.is_available():
            model = model.cuda()
        y = model(torch.zeros(2))
        """,
        ["module-input torch.zeros(2) from torch.zeros(2) -> next(model.parameters()).device"],
    ),
    # both on a device, named differently: silent
    ("device = 'cuda' if ok else 'cpu'\nmodel = nn.Linear(2, 2).cuda()\ny = model(torch.zeros(2).to(device))\n", []),
    # the batch moved by a helper of the file
    (
        """
        def to_device(batch, device):
            return [t.to(device) for t in batch]
        device = torch.device("cuda")
        model = nn.Linear(2, 2).to(device)
        for batch in DataLoader(ds):
            x, y = to_device(batch, device)
            out = model(x)
        """,
        [],
    ),
    # ... or by a helper the analysis cannot see: silent
    (
        """
        from utils import to_device
        import torch
        from torch.utils.data import DataLoader
        model = torch.nn.Linear(2, 2).cuda()
        for batch in DataLoader(ds):
            x, y = to_device(batch)
            out = model(x)
        """,
        [],
    ),
    # a dataset of this file that moves its items: the batches are not known to be on the host
    (
        """
        class Data(torch.utils.data.Dataset):
            def __init__(self, x, device):
                self.x = x.to(device)
            def __getitem__(self, i):
                return self.x[i]
        model = nn.Linear(2, 2).cuda()
        for x in DataLoader(Data(torch.zeros(4, 2), "cuda")):
            model(x)
        """,
        [],
    ),
    # host index into a device tensor is legal
    ("x = torch.zeros(3, device='cuda')\nidx = torch.arange(2)\ny = x[idx]\n", []),
    # a host tensor read by a device index (or mask) fails; a 0-dim index is read as a number; writing moves the indices
    ("x = torch.zeros(3)\nidx = torch.arange(2, device='cuda')\ny = x[idx]\n", ["index x from torch.zeros(3) -> \"cuda\""]),
    ("x = torch.zeros(3, 2)\nmask = torch.ones(3, device='cuda') > 0\ny = x[mask, 1:]\n", ["index x from torch.zeros(3, 2) -> \"cuda\""]),
    ("x = torch.zeros(3, 2)\nidx = torch.arange(2, device='cuda')\nx[:, idx] += 1\n", ["index x from torch.zeros(3, 2) -> \"cuda\""]),
    ("x = torch.zeros(3)\nidx = torch.arange(2, device='cuda')\nx[idx] = 1.0\n", []),
    ("x = torch.zeros(3)\ni = torch.ones(3, device='cuda').argmax()\ny = x[i]\n", []),
    ("x = torch.zeros(3)\nidx = torch.arange(2, device='cuda')\ny = x[idx.cpu()]\n", []),
    ("def f(x):\n    idx = torch.arange(2, device='cuda')\n    return x[idx]\n", []),
    # torch functions, comparisons, methods, augmented assignment
    ("x = torch.zeros(3, device='cuda')\ny = torch.cat([x, torch.ones(3)])\n", ["operand torch.ones(3) from torch.ones(3) -> \"cuda\""]),
    ("x = torch.zeros(3, device='cuda')\nm = x > torch.ones(3)\n", ["operand torch.ones(3) from torch.ones(3) -> \"cuda\""]),
    ("x = torch.zeros(3, device='cuda')\nw = torch.ones(3)\ny = x.mul(w)\n", ["operand w from torch.ones(3) -> \"cuda\""]),
    ("x = torch.zeros(3, device='cuda')\nw = torch.ones(3)\nw += x\n", ["operand w from torch.ones(3) -> \"cuda\""]),
    ("x = torch.zeros(3, device='cuda')\nw = torch.ones(3)\ny = x.expand_as(w)\n", []),
    ("x = torch.zeros(3, device='cuda')\nw = torch.ones(3)\nw.copy_(x)\n", []),
    # numpy
    ("x = torch.zeros(3, device='cuda')\na = x.numpy()\n", ["numpy x from torch.zeros(3, device='cuda') -> None"]),
    ("x = torch.zeros(3, device='cuda')\na = np.array(x)\n", ["numpy x from torch.zeros(3, device='cuda') -> None"]),
    ("x = torch.zeros(3, device='cuda')\na = x.detach().cpu().numpy()\n", []),
    ("x = torch.zeros(3)\na = x.numpy()\n", []),
    ("def f(t):\n    return t.numpy()\n", []),
    # a loop-carried state made on the host meets a device on the first pass
    (
        """
        class RNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(4, 4)
            def forward(self, xs):
                h = torch.zeros(1, 4)
                for x in xs:
                    h = self.cell(x, h)
                return h
        """,
        ["module-input h from torch.zeros(1, 4) -> next(self.parameters()).device"],
    ),
    # a factory in forward meets a submodule's output
    (
        """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                mask = torch.ones(x.shape)
                return self.fc(x) * mask
        """,
        ["operand mask from torch.ones(x.shape) -> next(self.parameters()).device"],
    ),
    # ... but not a parameter of unknown place
    (
        """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                mask = torch.ones(x.shape)
                return x * mask
        """,
        [],
    ),
    # a state made on the host in forward, with a possibly given one: may be host
    (
        """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 4)
            def forward(self, x, hidden=None):
                if hidden is None:
                    hidden = torch.zeros(1, 1, 4)
                return self.rnn(x, hidden)
        """,
        ["module-input hidden from torch.zeros(1, 1, 4) -> next(self.parameters()).device"],
    ),
    # a from_numpy result combined with a device tensor
    (
        """
        device = "cuda"
        w = torch.zeros(3, device=device)
        obs = torch.from_numpy(np.zeros(3)).float()
        y = w * obs
        """,
        ["operand obs from torch.from_numpy(np.zeros(3)) -> device"],
    ),
    # a function of the file returns a host tensor that meets a moved model
    (
        """
        def reset(env):
            obs = env.reset()
            return torch.from_numpy(obs).float()
        device = torch.device("cuda")
        policy = nn.Linear(4, 2).to(device)
        obs = reset(env)
        action = policy(obs)
        """,
        ["module-input obs from torch.from_numpy(obs) -> device"],
    ),
    # facts flow into the training function the script calls
    (
        """
        def train(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
        device = torch.device("cuda")
        net = nn.Linear(4, 1).to(device)
        train(net, DataLoader(ds), torch.optim.SGD(net.parameters(), 0.1))
        """,
        ["operand y from y -> device", "module-input x from x -> device"],
    ),
    # the function's name also appears in strings, comments, keyword arguments,
    # as a method of another object and as another scope's parameter: still every use is seen
    (
        """
        def train(model, loader):
            \"\"\"train for one epoch\"\"\"
            model.train()  # train mode
            for x, y in loader:
                model(x)
        def build(train=True):
            return train
        device = torch.device("cuda")
        net = nn.Linear(4, 1).to(device)
        parser.add_argument("--train", help="train the model")
        build(train=False)
        train(net, DataLoader(ds))
        """,
        ["module-input x from x -> device"],
    ),
    # ... but not where it is used as a value
    (
        """
        def train(model, loader):
            for x, y in loader:
                model(x)
        device = torch.device("cuda")
        net = nn.Linear(4, 1).to(device)
        train(net, DataLoader(ds))
        hooks = [train]
        """,
        [],
    ),
    # a submodule set before the model moves moves with it; one set after does not
    (
        """
        from torchvision import models
        import torch
        model = models.resnet18()
        model.fc = torch.nn.Linear(512, 2)
        model.to("cuda")
        out = model.fc(torch.zeros(512).to("cuda"))
        """,
        [],
    ),
    (
        """
        from torchvision import models
        import torch
        model = models.resnet18().to("cuda")
        model.fc = torch.nn.Linear(512, 2)
        out = model.fc(torch.zeros(512).to("cuda"))
        """,
        ['module-on-host model.fc from torch.nn.Linear(512, 2) -> "cuda"'],
    ),
    # a model moved by a function the analysis does not follow: silent
    (
        """
        model = nn.Linear(4, 1)
        model = accelerator.prepare(model)
        out = model(torch.zeros(4))
        """,
        [],
    ),
    # the model moved through a function of the file: seen
    (
        """
        def place(m, device):
            m.to(device)
        model = nn.Linear(4, 1)
        place(model, "cuda")
        out = model(torch.zeros(4))
        """,
        ['module-input torch.zeros(4) from torch.zeros(4) -> "cuda"'],
    ),
    # an agent keeps its device; its observations come from numpy
    (
        """
        class Agent:
            def __init__(self, device):
                self.device = device
                self.net = nn.Linear(4, 2).to(device)
            def act(self, obs):
                obs = torch.from_numpy(obs).float()
                return self.net(obs)
        """,
        ["module-input obs from torch.from_numpy(obs) -> self.device"],
    ),
    # submodules follow their model; forward() is a call of the model
    (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x)
        net = Net().cuda()
        a = net.fc(torch.zeros(4))
        b = net.forward(torch.ones(4))
        """,
        [
            "module-input torch.zeros(4) from torch.zeros(4) -> next(net.fc.parameters()).device",
            "module-input torch.ones(4) from torch.ones(4) -> next(net.parameters()).device",
        ],
    ),
    # a method called on the model gets its arguments as context
    (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def predict(self, x):
                return self.fc(x).argmax(-1)
        net = Net().cuda()
        net.predict(torch.zeros(4))
        """,
        ["module-input x from torch.zeros(4) -> next(self.parameters()).device"],
    ),
    # a subclass's methods see what its base's __init__ set, on the module's device
    (
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
        class Masked(Block):
            def __init__(self):
                super().__init__()
                self.mask = torch.tensor([1.0, 0.0, 1.0, 0.0])
            def forward(self, x):
                return self.fc(x) * self.mask
        """,
        ["operand self.mask from torch.tensor([1.0, 0.0, 1.0, 0.0]) -> next(self.parameters()).device"],
    ),
    # a module of the file checks only the inputs its forward uses with its own parameters
    (
        """
        class MaskConv(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv1d(4, 4, 3)
            def forward(self, x, lengths):
                for i, n in enumerate(lengths):
                    x[i, :, n.item():] = 0
                return self.conv(x)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.mask_conv = MaskConv()
            def forward(self, x, lengths):
                lengths = lengths.cpu().int()
                return self.mask_conv(x, lengths)
        model = MaskConv().cuda()
        y = model(torch.zeros(2, 4, 8), torch.tensor([8, 6]))
        """,
        ["module-input torch.zeros(2, 4, 8) from torch.zeros(2, 4, 8) -> next(model.parameters()).device"],
    ),
    # ... also through a helper forward calls
    (
        """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def encode(self, h):
                return self.fc(h)
            def forward(self, x, n):
                return self.encode(x)
        model = Net().cuda()
        y = model(torch.zeros(4), torch.tensor([3]))
        """,
        ["module-input torch.zeros(4) from torch.zeros(4) -> next(model.parameters()).device"],
    ),
    # CTC takes its targets and lengths on the host
    (
        """
        ctc = nn.CTCLoss()
        log_probs = torch.randn(50, 16, 20).to("cuda").log_softmax(2)
        targets = torch.randint(1, 20, (16, 30))
        loss = ctc(log_probs, targets, torch.full((16,), 50), torch.full((16,), 30))
        loss2 = nn.functional.ctc_loss(log_probs, targets, torch.full((16,), 50), torch.full((16,), 30))
        """,
        [],
    ),
    # a dict batch fed as keywords
    (
        """
        model = nn.Linear(4, 1).cuda()
        for batch in DataLoader(ds):
            out = model(**batch)
        """,
        ["module-input batch from batch -> next(model.parameters()).device"],
    ),
    # a model never moved fed a device tensor; what it returns is not known
    (
        "model = nn.Linear(4, 1)\nout = model(torch.zeros(4).cuda())\ny = out + torch.zeros(1).cuda()\n",
        ["module-on-host model from nn.Linear(4, 1) -> None"],
    ),
    (
        "device = torch.accelerator.current_accelerator()\nmodel = nn.Linear(4, 1)\nout = model(torch.zeros(4).to(device))\n",
        ["module-on-host model from nn.Linear(4, 1) -> device"],
    ),
    # each tensor of a tuple input must be on the model's device
    (
        """
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 4)
            def forward(self, x, device):
                h0 = torch.zeros(1, 1, 4)
                c0 = torch.zeros(1, 1, 4).to(device)
                return self.lstm(x, (h0, c0))
        """,
        ["module-input h0 from torch.zeros(1, 1, 4) -> next(self.parameters()).device"],
    ),
    # a function's parameter that meets a device inside it: each call passing a host value is a finding
    (
        """
        class VAE(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return self.decode(self.fc(x))
            def decode(self, z):
                return self.fc(z)
        model = VAE().to("cuda")
        out = model(torch.zeros(4).to("cuda"))
        sample = model.decode(torch.randn(4))
        """,
        ["module-input z from torch.randn(4) -> next(self.parameters()).device"],
    ),
]


# A host tensor meeting a tensor whose place is not shown: "relative", named by that tensor's device.
SINKS += [
    ("def f(x):\n    return x.unsqueeze(0) * torch.ones(x.shape[0])\n", ["relative torch.ones(x.shape[0]) from torch.ones(x.shape[0]) -> x.device"]),
    (
        "def f(idx, n):\n    if idx.dim() == 1:\n        idx = idx.unsqueeze(1)\n    out = torch.zeros(len(idx), n)\n    out.scatter_(1, idx, 1)\n    return out\n",
        ["relative out from torch.zeros(len(idx), n) -> idx.device"],
    ),
    # mixed on the way with a value of unknown kind (a number, perhaps)
    ("def f(v, s):\n    j = torch.arange(4)\n    c = s ** j\n    return c * torch.unsqueeze(v, -1)\n", ["relative c from torch.arange(4) -> v.device"]),
    # no evidence: x + 1 and x.view work on arrays
    ("def f(x):\n    return x.view(-1) * torch.ones(3)\n", []),
    # two tensors of unknown places: which device to take is not clear
    ("def f(x, y):\n    return x.dim() * y.dim() * (x * y + torch.ones(3))\n", []),
    # the parameter no longer holds the tensor that was met, but `y`, bound once before the factory, does
    ("def f(x):\n    y = x.unsqueeze(0)\n    x = None\n    return y * torch.ones(3)\n", ["relative torch.ones(3) from torch.ones(3) -> y.device"]),
    # bound for the last time at the top of the body, shown a tensor after: its one value is met
    ("def f(x):\n    x = g(x)\n    return x.unsqueeze(0) - torch.ones(3)\n", ["relative torch.ones(3) from torch.ones(3) -> x.device"]),
    # ... but not where the last binding is in a branch, or the factory made before it
    ("def f(x, c):\n    if c:\n        x = g(x)\n    return x.unsqueeze(0) - torch.ones(3)\n", []),
    ("def f(x):\n    o = torch.ones(3)\n    x = g(x)\n    return x.unsqueeze(0) - o\n", []),
    # made inside the torch.cat that reads `t`, a tensor from a parameter mixed with a number
    ("def f(h, s):\n    t = torch.cumsum(h, 0) // s\n    t = torch.cat([torch.zeros(1), t[:-1]])\n", ["relative torch.zeros(1) from torch.zeros(1) -> t.device"]),
    # ... which stays silent where the tensor comes from the host and a number
    ("def f(s):\n    t = torch.cumsum(torch.ones(2), 0) // s\n    t = torch.cat([torch.zeros(1), t[:-1]])\n", []),
    # a 0-dim host tensor combines with any tensor
    ("def f(x):\n    return x.unsqueeze(0) * torch.tensor(2.0)\n", []),
    # a plain class given its tensors: a method shows self.A is one
    (
        "class S:\n    def __init__(self, A):\n        self.A = A\n    def step(self):\n        x = torch.zeros(self.A.size(1))\n        return self.A @ x\n",
        ["relative x from torch.zeros(self.A.size(1)) -> self.A.device"],
    ),
    # ... and without that evidence, nothing
    ("class S:\n    def __init__(self, A):\n        self.A = A\n    def step(self):\n        return self.A @ torch.zeros(3)\n", []),
    # einsum's operands follow its equation
    ("def f(h):\n    c = torch.einsum('ki,kj->ij', h, h)\n    return c + torch.eye(3)\n", ["relative torch.eye(3) from torch.eye(3) -> h.device"]),
    # made by torch from values nothing places: a tensor, named where it was bound once
    (
        "class P:\n    def cov(self):\n        c = torch.einsum('ik,kl->il', self.h, self.p)\n        return c + torch.eye(3)\n",
        ["relative torch.eye(3) from torch.eye(3) -> c.device"],
    ),
    # bound twice: named where the factory is made in the expression that reads c ...
    (
        "class P:\n    def cov(self):\n        c = torch.einsum('ik,kl->il', self.h, self.p)\n        c = c.mean()\n        return c + torch.eye(3)\n",
        ["relative torch.eye(3) from torch.eye(3) -> c.device"],
    ),
    # ... not where it is made before (c may hold another tensor there); by a method NumPy shares: no such name
    ("class P:\n    def cov(self):\n        e = torch.eye(3)\n        c = torch.einsum('ik,kl->il', self.h, self.p)\n        c = c.mean()\n        return c + e\n", []),
    ("class P:\n    def cov(self):\n        c = self.h.reshape(3)\n        return c + torch.eye(3)\n", []),
    # a script run on the CPU only: nothing moves, nothing names a device
    ("def f(x):\n    return x.unsqueeze(0) * torch.ones(3)\nprint(f(load()))\n", []),
    # the same script once it names a device
    ("def f(x):\n    return x.unsqueeze(0) * torch.ones(3)\nmodel.to(device)\nprint(f(load()))\n", ["relative torch.ones(3) from torch.ones(3) -> x.device"]),
    # issue 24 item 3: a tokenizer's BatchEncoding on the host, given whole or read by key
    (
        "model = nn.Linear(4, 2).to(device)\nenc = tok(['a'], return_tensors='pt')\nmodel(**enc)\nmodel(enc['input_ids'])\n",
        ["module-input enc from tok(['a'], return_tensors='pt') -> device", "module-input enc['input_ids'] from tok(['a'], return_tensors='pt') -> device"],
    ),
    # moved as it is made; made for another framework
    ("model = nn.Linear(4, 2).to(device)\nenc = tok(['a'], return_tensors='pt').to(device)\nmodel(**enc)\n", []),
    ("model = nn.Linear(4, 2).to(device)\nenc = tok(['a'], return_tensors='np')\nmodel(**enc)\n", []),
    # generate() feeds the model like forward
    ("model = nn.Linear(4, 2).to(device)\nids = tok.encode('a', return_tensors='pt')\nmodel.generate(ids)\n", ["module-input ids from tok.encode('a', return_tensors='pt') -> device"]),
    # an unknown iterator's value, shown to be a tensor: an 'unplaced' sink, from its binding
    ("def f(device):\n    model = nn.Linear(4, 2).to(device)\n    for x in batches():\n        model(x.view(x.size(0), -1))\n", ["unplaced x.view(x.size(0), -1) from x -> device"]),
    # not shown to be a tensor; made from a parameter; in an nn.Module's method
    ("def f(device):\n    model = nn.Linear(4, 2).to(device)\n    for x in batches():\n        model(x)\n", []),
    ("def f(device, data):\n    model = nn.Linear(4, 2).to(device)\n    for x in data:\n        model(x.view(x.size(0), -1))\n", []),
]


@pytest.mark.parametrize("snippet, expected", SINKS, ids=[f"{i:02d}" for i in range(len(SINKS))])
def test_sinks(snippet, expected):
    assert sinks(snippet) == expected


def test_a_device_imported_under_a_device_name():
    text = TRAINER.replace('DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")', "from core.constants import DEVICE")
    [sink] = FileFlow(text).sinks()
    assert sink.kind == "module-input" and ast.unparse(sink.value) == "inputs" and sink.device == "DEVICE"


def test_trainer_validation_batch_is_a_sink():
    flow = FileFlow(TRAINER)
    [sink] = flow.sinks()
    assert sink.kind == "module-input"
    assert ast.unparse(sink.value) == "inputs"
    assert sink.device == "DEVICE"
    [origin] = sink.origins
    assert type(origin) is ast.Name and origin.id == "inputs" and origin.lineno == 14


# -- the device to use ---------------------------------------------------------------------

DEVICE_AT = [
    # a tensor the line works with
    ("def f(x):\n    mask = torch.ones(x.shape)\n#^ torch.ones(x.shape)", "x.device"),
    ("def f(x: torch.Tensor, n):\n    return torch.arange(n) + x\n#^ torch.arange(n)", "x.device"),
    # a host tensor on the line is not the device to use
    ("def f(n):\n    a = torch.zeros(n)\n    return torch.arange(n) + a\n#^ torch.arange(n)", None),
    # the module's own device
    (
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
        "    def forward(self):\n        return torch.ones(2)\n#^ torch.ones(2)",
        "next(self.parameters()).device",
    ),
    (
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(2))\n"
        "    def forward(self):\n        return torch.ones(2)\n#^ torch.ones(2)",
        "self.w.device",
    ),
    (
        "import torch\nimport pytorch_lightning as pl\nclass M(pl.LightningModule):\n"
        "    def training_step(self, batch, i):\n        return torch.ones(2)\n#^ torch.ones(2)",
        "self.device",
    ),
    # a module without parameters has no device of its own
    ("class M(nn.Module):\n    def forward(self):\n        return torch.ones(2)\n#^ torch.ones(2)", None),
    # a device variable in reach
    ("device = torch.device('cuda')\nx = torch.ones(2)\n#^ torch.ones(2)", "device"),
    ("x = torch.ones(2)\n#^ torch.ones(2)\ndevice = torch.device('cuda')", None),
    ("device = torch.device('cuda')\ndef f():\n    return torch.ones(2)\n#^ torch.ones(2)", "device"),
    ("def f():\n    return torch.ones(2)\n#^ torch.ones(2)\ndevice = torch.device('cuda')", "device"),
    ("def f(dev):\n    return torch.ones(2)\n#^ torch.ones(2)", "dev"),
    ("if c:\n    device = 'cuda'\nx = torch.ones(2)\n#^ torch.ones(2)", None),
    ("for device in devices:\n    pass\nx = torch.ones(2)\n#^ torch.ones(2)", None),
    ("class T:\n    def __init__(self, device):\n        self.device = device\n    def run(self):\n        return torch.ones(2)\n#^ torch.ones(2)", "self.device"),
    ("args = parser.parse_args()\nmodel.to(args.device)\nx = torch.ones(2)\n#^ torch.ones(2)", "args.device"),
    ("args = parser.parse_args()\nmodel.to(args.device)\ndef f():\n    return torch.ones(2)\n#^ torch.ones(2)", "args.device"),
    ("def f(args):\n    return torch.ones(2)\n#^ torch.ones(2)\nargs = parser.parse_args()\nmodel.to(args.device)", None),
    # a flag
    ("args = parser.parse_args()\nif args.cuda:\n    model.cuda()\nx = torch.ones(2)\n#^ torch.ones(2)", '"cuda" if args.cuda else "cpu"'),
    # ... only when it places a model: a flag that keeps some tensors on the CPU is not the device
    ("args = parser.parse_args()\nbank = torch.zeros(9)\nif args.use_cuda:\n    bank = bank.cuda()\nx = torch.ones(2)\n#^ torch.ones(2)", None),
    # a function's flag is its caller's: `use_cuda` places the model where `args.use_cuda` is tested
    ("def f(bank, use_cuda):\n    if use_cuda:\n        bank = bank.cuda()\n    x = torch.ones(2)\n#^ torch.ones(2)\nif args.use_cuda:\n    net = nn.Linear(2, 2).cuda()", '"cuda" if use_cuda else "cpu"'),
    # nothing
    ("x = torch.ones(2)\n#^ torch.ones(2)", None),
]


@pytest.mark.parametrize("snippet, expected", DEVICE_AT, ids=[f"{i:02d}" for i in range(len(DEVICE_AT))])
def test_device_at(snippet, expected):
    flow, node = check(snippet)
    assert flow.device_at(node) == expected


DEVICE_AT_MOVING = [
    # the value's own source names no device: it is where the value is (issue 25)
    ("def f(audio: torch.Tensor, n):\n    y = F.pad(audio, (0, n - audio.size(0)))\n#^ F.pad(audio, (0, n - audio.size(0)))", None),
    ("def f(audio: torch.Tensor):\n    padded = F.pad(audio, (0, 4))\n    y = padded * audio.size(0)\n#^ padded", None),
    # nor a tensor whose placement is unknown (lengths stay on the CPU on purpose)
    ("def f(x, lengths: torch.Tensor):\n    return pack(x, lengths.size(0))\n#^ x", None),
    # ... unless the moved value then meets it: the original needed it on the GPU
    ("def f(scores, n):\n    mask = (torch.arange(scores.size(1)) < n).cuda()\n#^ torch.arange(scores.size(1)) < n\n    return scores.masked_fill(~mask, 0)", "scores.device"),
    ("def f(scores, n):\n    mask = (torch.arange(scores.size(1)) < n).cuda()\n#^ torch.arange(scores.size(1)) < n\n    return mask", None),
    # a tensor moved to a device does
    ("def f(b, dev):\n    h = torch.ones(3).to(dev)\n    return b * h\n#^ b", "h.device"),
]


@pytest.mark.parametrize("snippet, expected", DEVICE_AT_MOVING, ids=[f"{i:02d}" for i in range(len(DEVICE_AT_MOVING))])
def test_device_at_for_a_moved_value(snippet, expected):
    flow, node = check(snippet)
    assert flow.device_at(node, moving=True) == expected


# -- offsets and robustness ---------------------------------------------------------------


def test_node_at_and_span_on_non_ascii_lines():
    text = 'import torch\nname = "héllo wörld"; x = torch.zeros(3)\n# ünïcode\ny = x  # ☃\n'
    flow = FileFlow(text)
    start = text.index("torch.zeros(3)")
    node = flow.node_at(start, start + len("torch.zeros(3)"))
    assert type(node) is ast.Call and flow.span(node) == (start, start + len("torch.zeros(3)"))
    # libcst spans include parentheses and whitespace
    y = text.index("y = x")
    assert flow.node_at(y + 4, y + 5).id == "x"
    assert flow.where(flow.node_at(y + 4, y + 5)) == flow.where(flow.node_at(start, start + 14))


def test_node_at_parentheses_and_crlf():
    text = "import torch\r\nx = (torch.zeros(3) + 1)\r\ny = ( x )\r\n"
    flow = FileFlow(text)
    start = text.index("(torch")
    node = flow.node_at(start, text.index(")\r\ny") + 1)
    assert type(node) is ast.BinOp
    y = text.index("( x )")
    assert flow.node_at(y, y + 5).id == "x"
    assert flow.node_at(text.index("= (") + 2, text.index("= (") + 4) is None


def test_byte_order_mark():
    text = "\ufeffimport torch\nx = torch.zeros(3)\n"
    flow = FileFlow(text)
    start = text.index("torch.zeros")
    node = flow.node_at(start, start + len("torch.zeros(3)"))
    assert flow.span(node) == (start, start + len("torch.zeros(3)"))
    assert flow.what(node) is What.TENSOR


def test_text_python_cannot_parse_has_no_facts():
    flow = FileFlow("def f(:\n")
    assert flow.parsed is False and flow.sinks() == []


def test_parsing_prints_no_warnings(recwarn):
    FileFlow('import torch\nx = 1()\ny = "\\d"\n').sinks()
    assert not [w for w in recwarn if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]


def test_tree_without_text():
    tree = ast.parse("import torch\nx = torch.zeros(3)\n")
    flow = FileFlow(tree)
    call = tree.body[1].value
    assert flow.where(call) == frozenset({(HOST, call)})
    with pytest.raises(ValueError):
        flow.node_at(0, 1)


def test_origins_point_at_the_binding():
    text = prepare("device = 'cuda'\nw = torch.zeros(2, device=device)\nfor xb, yb in DataLoader(ds):\n    z = xb * w\n")
    flow = FileFlow(text)
    [sink] = flow.sinks()
    [origin] = sink.origins
    assert type(origin) is ast.Name and origin.id == "xb" and type(origin.ctx) is ast.Store
    assert sink.device == "device"


def test_placements_and_origins_are_exposed():
    text = prepare("device = 'cuda'\nx = torch.zeros(3)\ny = x.to(device)\n")
    flow = FileFlow(text)
    x_call = flow.tree.body[-2].value
    y = flow.tree.body[-1].targets[0]
    assert flow.where(x_call) == frozenset({(HOST, x_call)})
    [(placement, origin)] = flow.where(y)
    assert placement == Device("device", flow.tree) and origin is flow.tree.body[-1].value
    assert flow.qualified_name(x_call.func) == "torch.zeros"
    assert UNKNOWN is not HOST and SameAs("x") == SameAs("x")


def test_answers_do_not_depend_on_the_order_of_questions():
    text = prepare(
        """
        def a(x):
            return b(x) + torch.zeros(3)
        def b(x):
            return a(x) if x else x.cuda()
        y = a(torch.ones(3))
        """
    )
    first = FileFlow(text)
    answers_first = [describe(first, n) for n in ast.walk(first.tree) if isinstance(n, ast.expr)]
    second = FileFlow(text)
    second.sinks()
    answers_second = [describe(second, n) for n in ast.walk(second.tree) if isinstance(n, ast.expr)]
    assert answers_first == answers_second


def test_optimizers_are_known_with_the_calls_that_made_them():
    from fixdev.analysis.flow import OPTIMIZER

    text = prepare(
        """
        import torch
        import torch.nn as nn
        from torch import optim
        model = nn.Linear(2, 2)
        if resume:
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        else:
            opt = optim.adam.Adam(model.parameters())
        opt.load_state_dict(state)
        scheduler = optim.lr_scheduler.StepLR(opt, 3)
        scheduler.load_state_dict(state)
        class Trainer:
            def __init__(self):
                self.model = nn.Linear(2, 2)
                self.opt = optim.AdamW(self.model.parameters())
            def resume(self, state):
                self.opt.load_state_dict(state)
        """
    )
    flow = FileFlow(text)
    loads = {n.lineno: n.func.value for n in ast.walk(flow.tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "load_state_dict"}
    makers = {n.lineno for n in ast.walk(flow.tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") in ("SGD", "Adam", "AdamW")}
    opt, scheduler, attribute = (flow.value(loads[line]) for line in sorted(loads))
    assert opt.ref == OPTIMIZER and {call.lineno for call in opt.parts} == set(sorted(makers)[:2]) and len(makers) == 3
    assert scheduler.ref is None
    assert attribute.ref == OPTIMIZER and {call.lineno for call in attribute.parts} == {max(makers)}


# -- facts from the run's other files (codemods.project) -----------------------------------

SUMMARIES = [
    ("def f():\n    return torch.from_numpy(np.zeros(3))", ("tensor", "host", False)),
    ("def f():\n    return torch.tensor(3.0)", ("tensor", "host", True)),
    ("def f():\n    return torch.zeros(3).cuda()", ("tensor", "device", False)),
    ("device = torch.device('cuda')\ndef f():\n    return torch.zeros(3, device=device)", ("tensor", "device", False)),
    ("def f():\n    a = torch.zeros(3)\n    return a, a.cuda()", ("parts", ((0, ("tensor", "host", False)), (1, ("tensor", "device", False))), None)),
    ("def f(n):\n    return DataLoader(torch.utils.data.TensorDataset(torch.zeros(n, 3))), n", ("parts", ((0, ("loader",)), (1, None)), None)),
    ("def f(n):\n    return DataLoader(torch.utils.data.TensorDataset(torch.zeros(n, 3)))", ("loader",)),
    ("def f():\n    return nn.Linear(3, 3)", ("module", "host", 0)),
    ("def f():\n    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')", ("device",)),
    ("def f():\n    return np.zeros(3)", ("array",)),
    ("@torch.no_grad()\ndef f():\n    return torch.zeros(3)", ("tensor", "host", False)),
    ("class C:\n    @staticmethod\n    def f():\n        return torch.zeros(3)\nf = C.f", None),  # f: bound by an assignment
    # what depends on the arguments, or on more than the function shows, is unknown
    ("def f(x):\n    return x", None),
    ("def f(x):\n    return x.cuda()", None),
    ("def f(x, device):\n    return x.to(device)", None),
    ("def f(x):\n    return torch.zeros(3, device=x.device)", None),
    ("def f(ds):\n    return DataLoader(ds)", None),
    ("def f(x):\n    if x:\n        return torch.zeros(3)\n    return torch.zeros(3).cuda()", None),
    ("def f():\n    yield torch.zeros(3)", None),
    ("@cached\ndef f():\n    return torch.zeros(3)", None),
    ("def f():\n    return torch.zeros(3)\nf = wrapped(f)", None),
    ("try:\n    from fast import f\nexcept ImportError:\n    def f():\n        return torch.zeros(3)", None),
]


@pytest.mark.parametrize("source, expected", SUMMARIES)
def test_what_another_files_function_returns(tmp_path, source, expected):
    from fixdev.analysis.project import Project

    (tmp_path / "other.py").write_text(prepare(source) + "\n")
    facts = Project([tmp_path / "other.py"]).for_file(tmp_path / "main.py")
    assert facts.fact("other.f") == expected
    assert facts.used() == (("other.f", expected),)


def test_a_call_resolved_through_the_project(tmp_path):
    from fixdev.analysis.project import Project

    (tmp_path / "data.py").write_text(prepare("def load_batch():\n    return torch.from_numpy(np.zeros(3))\n"))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .inner import make\n")
    (tmp_path / "pkg" / "inner.py").write_text(prepare("def make():\n    return torch.zeros(3).cuda()\n"))
    text = prepare(
        """
        import torch
        import data
        from pkg import make
        x = data.load_batch()
        #^ x
        y = make()
        z = other.load_batch()
        """
    )
    project = Project([tmp_path / "data.py", tmp_path / "pkg" / "__init__.py", tmp_path / "pkg" / "inner.py", tmp_path / "main.py"], root=tmp_path)
    flow = FileFlow(text, project=project.for_file(tmp_path / "main.py"))
    node = marked(flow, text)
    assert describe(flow, node) == "tensor Host"
    (origin,) = {o for _, o in flow.where(node)}
    assert isinstance(origin, ast.Name) and origin.id == "x" and isinstance(origin.ctx, ast.Store), "made where this file binds it"
    names = {n.targets[0].id: n.targets[0] for n in flow.tree.body if isinstance(n, ast.Assign)}
    assert describe(flow, names["y"]) == "tensor Device(None)"
    assert describe(flow, names["z"]) == "unknown Unknown"
    alone = FileFlow(text)
    assert describe(alone, marked(alone, text)) == "unknown Unknown", "without the project"


# -- parameters a function treats as tensors (what rules assume of a module's inputs) -----

TENSOR_PARAMETERS = [
    ("def f(x, n):\n    return x.view(n, -1)\n", ["x"]),
    ("def f(x: torch.Tensor, y):\n    return y\n", ["x"]),
    ("def f(x: torch.Tensor | None = None):\n    return x\n", ["x"]),
    ("def f(x, y):\n    return x + y\n", []),  # `+` works on numbers too
    ("def f(a, b):\n    return a.shape, b.keys()\n", ["a"]),
    ("def f(model, x):\n    model.to(x.device)\n    return model(x)\n", ["x"]),  # .to is a module's method too
    (
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
        "    def forward(self, inputs, mask):\n        return self.fc(inputs)\n",
        ["inputs"],
    ),
    (
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 2\n"
        "    def forward(self, inputs):\n        return self.helper(inputs)\n",
        [],  # self.helper is not a submodule
    ),
]


@pytest.mark.parametrize("snippet, expected", TENSOR_PARAMETERS)
def test_tensor_parameters(snippet, expected):
    text = prepare(snippet)
    flow = FileFlow(text)
    function = flow.function_at(text.rindex("def ") + 4)
    assert function is not None and function.name in ("f", "forward")
    assert flow.tensor_parameters(function) == expected


def test_function_at_is_the_innermost_function():
    text = prepare("x = 1\nclass A:\n    y = 2\n    def m(self):\n        def inner():\n            return 3\n        return inner\n")
    flow = FileFlow(text)
    assert flow.function_at(text.index("x = 1")) is None
    assert flow.function_at(text.index("y = 2")) is None
    assert flow.function_at(text.index("return 3")).name == "inner"
    assert flow.function_at(text.index("return inner")).name == "m"


# -- the strings and comments the name index skips ----------------------------------------

_TRICKY_LITERALS = [
    "x = 'it''s'  # a 'quoted' comment\n",
    'x = "a \\" b" + \'c \\\' d\'\n',
    "x = '''one ' two '' three \\''' four'''\ny = 1\n",
    'x = """a "" b \\""" c"""  # after\n',
    "x = '''\nmodel\n''' # model\n",
    "x = '''a'''\ny = '''b''' + \"\"\"c\"\"\"\nz = \"\"\"d\"\"\"\n",
    "x = 'a\\\\'; y = \"#not a comment\"\n",
    "x = r'\\d+' + b\"\\x00\" # trailing\n",
    "s = 'x' \\\n    'y'\n",
]


def _literals_by_tokenizer(text: str) -> list[tuple[int, int]]:
    import io
    import tokenize

    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    found = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            start = line_starts[token.start[0] - 1] + token.start[1]
            end = line_starts[token.end[0] - 1] + token.end[1]
            prefix = len(token.string) - len(token.string.lstrip("rRbBuU"))  # the regex starts at the quote
            found.append((start + prefix, end))
    return found


@pytest.mark.parametrize("text", _TRICKY_LITERALS)
def test_strings_and_comments_are_found_as_the_tokenizer_finds_them(text: str) -> None:
    """Names in strings and comments are not uses (``Mentions``): the
    pattern that finds them agrees with CPython's tokenizer (no f-strings here:
    their tokens differ between Python versions)."""
    from fixdev.analysis.flow.mentions import STRINGS_AND_COMMENTS

    assert [m.span() for m in STRINGS_AND_COMMENTS.finditer(text)] == _literals_by_tokenizer(text)


def test_the_device_in_reach_costs_one_run_per_scope_however_many_fixes_ask(monkeypatch):
    """A generated file of n ``.cuda()`` lines asks ``device_at`` n times
    (issue 26: 45,000 lines ran 12 minutes). Each answer once re-ran the
    interpreter over the whole module: n runs of n statements. Counted, not
    timed: twice the findings must be the same runs and at most twice the
    statements interpreted."""
    from fixdev.analysis.flow import interpreter
    from fixdev.engine.core import Engine
    from fixdev.engine.registry import all_rules

    counts = {"runs": 0, "statements": 0}
    run, block = interpreter.Run.run, interpreter.Run.block

    def counted_run(self):
        counts["runs"] += 1
        return run(self)

    def counted_block(self, statements, state):
        counts["statements"] += len(statements)
        return block(self, statements, state)

    monkeypatch.setattr(interpreter.Run, "run", counted_run)
    monkeypatch.setattr(interpreter.Run, "block", counted_block)
    engine = Engine(all_rules())

    def work(lines: int) -> tuple[int, int]:
        counts.update(runs=0, statements=0)
        text = "import torch\n\n" + "".join(f"x{i} = torch.zeros(3).cuda()\n" for i in range(lines))
        findings = engine.lint(text)
        assert sum(f.name == "cuda-call" for f in findings) == lines
        return counts["runs"], counts["statements"]

    runs, statements = work(100)
    more_runs, more_statements = work(200)
    assert more_runs == runs
    assert more_statements <= 2 * statements


ENTRY_LOSS = """
class Loss:
    def __init__(self, model):
        self.device = next(model.parameters()).device
    def __call__(self, p, targets):
        return self.match(p, targets)
    def match(self, p, targets):
        return torch.cat((targets.repeat(3, 1), torch.ones(3, 1, device=self.device)), 1)
"""


@pytest.mark.parametrize(
    "source, expected",
    [
        # met in the helper, moved where the class takes it from outside: once
        (ENTRY_LOSS, [("__call__", "targets", "self.device", "match")]),
        # a caller in the file that already moved it: the helper need not
        (ENTRY_LOSS.replace("return self.match(p, targets)", "return self.match(p, targets.to(self.device))"), []),
        # not shown to be a tensor (targets + 1 works on arrays and numbers)
        (ENTRY_LOSS.replace("targets.repeat(3, 1)", "targets + 1"), []),
        # an nn.Module's method: its caller places its inputs
        (ENTRY_LOSS.replace("class Loss:", "class Loss(nn.Module):"), []),
    ],
)
def test_entry_moves(source, expected):
    flow = FileFlow(prepare(source))
    assert [(e.function.name, e.name, e.device, e.origin.name) for e in flow.entry_moves()] == expected


def test_ast_children_are_the_child_nodes_but_the_load_and_store_markers():
    """The walks' step reads no identifier or number fields and takes whole
    lists where the grammar's lists hold nodes only: every list that may hold
    names or None (``global``, ``nonlocal``, ``{**d}``, a keyword-only
    parameter without a default, a class pattern's keyword attributes) still
    gives exactly its nodes."""
    from fixdev.analysis.flow import ast_children

    source = textwrap.dedent(
        """
        import torch, torch.nn as nn
        from . import mod as m
        def f(a, /, b=1, *args, c, d=torch.zeros(2), **kw) -> int:
            global g
            def inner():
                nonlocal a
                return {**kw, "k": a, **{}}
            x: int = 1
            x += f"{a!r:>{b}}"
            for i, (j, *k) in enumerate(args):
                del k
            with open(x) as h, open(b):
                pass
            try:
                pass
            except (ValueError, TypeError) as e:
                raise RuntimeError() from e
            match a:
                case Point(1, y=2, z=[q, *rest]) | {"k": 3, **others}:
                    pass
                case str() as s if s:
                    pass
            return [z async for z in b if z] and (lambda u, *, v: u)(1, v=2)
        @dataclass
        class C(Base, metaclass=M):
            attr: int = 0
        """
    )
    seen = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.expr_context):
            continue
        seen.add(type(node))
        expected = [child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.expr_context)]
        found = ast_children(node)
        assert len(found) == len(expected) and all(a is b for a, b in zip(found, expected)), type(node).__name__
    assert {ast.Global, ast.Nonlocal, ast.Dict, ast.arguments, ast.MatchClass, ast.MatchMapping} <= seen


@pytest.mark.parametrize(
    "read, may",
    [("x[0]", False), ("x[:, 1:]", False), ("x[-1, ..., None]", False), ("x[i]", True), ("x[:, idx]", True), ("x[~mask]", True)],
)
def test_only_an_index_that_may_be_a_tensor_is_where_index_sinks_form(read, may):
    from fixdev.analysis.flow.sinks import may_index_by_tensor

    node = ast.parse(read, mode="eval").body
    assert may_index_by_tensor(node) is may
