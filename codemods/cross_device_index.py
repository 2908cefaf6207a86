"""FDV111 cross-device-index: ``host[device_index]`` → ``host[device_index.cpu()]``."""

from __future__ import annotations

import ast
import re

import libcst as cst

from fixdev.engine.rule import Invalid, Rule

from fixdev.analysis import file_analysis as analysis
from fixdev.analysis.flow import HOST
from .numpy_on_device import runs_only_without_cuda

# Expressions a `.cpu()` can follow without parentheses.
ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
# "index": a host tensor read by an index on a device; "index-relative": the
# index's place is not shown, or the table is a module's attribute that is a
# plain tensor only on some paths (the index goes to the table's device).
SINK_KINDS = ("index", "index-relative")
RELATIVE_MESSAGE = "Tensor on the host is indexed by a tensor that may live on a device; move the index to the indexed tensor's device"
# What code that names or moves to a device holds.
DEVICE_CODE = re.compile(r"\.(?:to|cuda)\s*\(|device")
# Tables whose text a fix may repeat (`self.table[idx.to(self.table.device)]`).
CHAINS = (ast.Name, ast.Attribute)


class CrossDeviceIndex(Rule):
    """
    ## What it does
    Finds a tensor that lives on the host read by an index or mask tensor
    that lives on a device (`table[idx]`, `labels[mask]`, `x[:, idx]`), as
    the device-flow analysis shows them, and moves the index to the host:
    `table[idx.cpu()]`. The result stays on the host, where the code kept
    it before. The same where the index is a tensor (made by a torch
    operation, `torch.argsort(scores)`) whose place the code does not show,
    in a file that meets devices (a library, or code naming a device): its
    copy on the host is right wherever it lives. And where the table is a
    module's attribute that is a plain tensor on some path of `__init__` and
    a parameter or buffer on another (`if learn: self.w = nn.Parameter(self.w)`),
    read in a method by an index on the module's side: `self.w[t.to(self.w.device)]`,
    right on both paths.

    ## Why is this bad?
    Indexing checks that every index tensor is on the CPU or on the indexed
    tensor's device. On a GPU, `cpu_tensor[cuda_index]` raises `indices
    should be either on cpu or on the same device as the indexed tensor
    (cpu)`. The other way round is legal: a GPU tensor may be indexed by
    CPU indices.

    ## Example
    ```python
    model = Net().to(device)
    class_ids = torch.tensor([3, 7, 9])
    with torch.no_grad():
        best = model(images.to(device)).argmax(1)
    ids = class_ids[best]
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    class_ids = torch.tensor([3, 7, 9])
    with torch.no_grad():
        best = model(images.to(device)).argmax(1)
    ids = class_ids[best.cpu()]
    ```

    ## Fix safety
    The index is copied to the host (a synchronisation with the GPU, as
    indexing across devices would have been); the result is the one a CPU
    run computes, on the host as before.

    ## When it stays silent
    When the indexed tensor may live on a device (and is not such a module
    attribute), or where it lives is not known (a function's parameter);
    when the index is not shown to be a tensor (a parameter: it may be a
    list or a slice), or lives on the host; in a script that runs on the CPU
    only; for a 0-dim index (`x[t.argmax()]`
    reads it as a number, which works across devices); for assignments
    (`x[idx] = v` moves the indices itself); where the read runs only
    without CUDA (the `else` of `if torch.cuda.is_available():`). Also when
    the indexed tensor meets device tensors elsewhere (the indexing result
    is combined with them, or the tensor is fed to a model on the device):
    it has to move to the device anyway, and the rule reporting that meeting
    (`factory-device`, `unmoved-input`) moves it where it is made, which
    fixes the indexing too.
    """

    code = "FDV111"
    name = "cross-device-index"
    group = "mismatch"
    message = "Tensor on the host is indexed by a tensor on a device; move the index to the host"
    # `def`/`class`: a library, whose callers choose devices ("index-relative"),
    # with a host tensor made by a torch factory to index
    trigger = (r"\]", r"\.(?:to|cuda)\s*\(|device|\bdef\b|\bclass\b")

    @classmethod
    def screen(cls, screening) -> bool:
        if not DEVICE_CODE.search(screening.text):
            # only a relative sink is this rule's here (visit_Module): a file that meets devices, holding a factory
            if not re.search(analysis.FACTORY_CALL, screening.text) or not analysis.flow_for(screening).meets_devices():
                return False
            return analysis.has_sink(screening, "index-relative", at=analysis.index_reads(screening))
        # such sinks form only where an index may be a tensor: the runs of the
        # scopes holding one (a fifth of a file's scopes, on real code)
        return analysis.has_sink(screening, *SINK_KINDS, at=analysis.index_reads(screening))

    VALID = [
        "import torch\nx = torch.randn(5, device='cuda')\nidx = torch.arange(2)\ny = x[idx]\n",
        "import torch\nx = torch.randn(5)\nidx = torch.arange(2, device='cuda')\nx[idx] = 0.0\n",
        "import torch\nx = torch.randn(5)\ni = torch.randn(5, device='cuda').argmax()\ny = x[i]\n",
        "import torch\ndef f(x):\n    idx = torch.arange(2, device='cuda')\n    return x[idx]\n",
        "import torch\ndef f(idx):\n    return torch.arange(5)[idx]\n",
        "import torch\ndef f(values):\n    return torch.arange(3)[torch.argsort(torch.as_tensor(values))]\nprint(f([3, 1, 2]))\n",
        "import torch\ndevice = torch.device('cuda')\nx = torch.randn(5)\nidx = torch.arange(2, device=device)\ny = x[idx] * torch.ones(2, device=device)\n",
        (
            "import torch\nscores = torch.randn(5)\nif torch.cuda.is_available():\n    scores = scores.cuda()\nnames = torch.arange(5)\n"
            "if not torch.cuda.is_available():\n    best = names[scores > 0]\n"
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nx = torch.randn(5)\nidx = torch.arange(2, device='cuda')\ny = x[idx]\n",
            "import torch\nx = torch.randn(5)\nidx = torch.arange(2, device='cuda')\ny = x[idx.cpu()]\n",
        ),
        Invalid(
            "import torch\nx = torch.randn(5, 3)\nscores = torch.randn(5, device='cuda')\ny = x[scores > 0, :2]\n",
            "import torch\nx = torch.randn(5, 3)\nscores = torch.randn(5, device='cuda')\ny = x[(scores > 0).cpu(), :2]\n",
        ),
        Invalid(
            "import torch\nx = torch.zeros(5, 3)\nidx = torch.arange(2).cuda()\nx[:, idx] += 1\n",
            "import torch\nx = torch.zeros(5, 3)\nidx = torch.arange(2).cuda()\nx[:, idx.cpu()] += 1\n",
        ),
        # an index whose place is not shown: its host copy is right wherever it lives
        Invalid(
            "import torch\ndef ranked(scores):\n    return torch.arange(5)[torch.argsort(scores)]\n",
            "import torch\ndef ranked(scores):\n    return torch.arange(5)[torch.argsort(scores).cpu()]\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, learn):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
            "        self.w = torch.ones(4)\n        if learn:\n            self.w = nn.Parameter(self.w)\n"
            "    def forward(self, x):\n        t = torch.zeros(2, dtype=torch.long, device=x.device)\n        return self.fc(x) * self.w[t].to(x.device)\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, learn):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n"
            "        self.w = torch.ones(4)\n        if learn:\n            self.w = nn.Parameter(self.w)\n"
            "    def forward(self, x):\n        t = torch.zeros(2, dtype=torch.long, device=x.device)\n        return self.fc(x) * self.w[t.to(self.w.device)].to(x.device)\n",
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        flow = analysis.flow_of(self)
        sinks = flow.sinks()
        # host values that meet a device elsewhere: other rules move them where they are made
        met = {origin for sink in sinks if sink.kind in ("module-input", "operand", "relative") for origin in sink.origins}
        # without a device named, only a module's own placement is "on a device":
        # a plain tensor attribute it indexes is constant-buffer's (a buffer moves with it)
        kinds = SINK_KINDS if DEVICE_CODE.search(self.context.text) else ("index-relative",)
        for sink in sinks:
            if sink.kind not in kinds or met.intersection(sink.origins) or runs_only_without_cuda(self, flow, sink.node):
                continue
            # sink.other: the index on a device (a second one, if any, is the next round's finding)
            index = sink.other
            start, end = flow.span(index)
            move, message = ".cpu()", None
            if sink.kind == "index-relative":
                message = RELATIVE_MESSAGE
                if flow.value(sink.value).placements != {HOST}:  # a module's attribute on the host on some path
                    if not _plain_chain(sink.value):
                        self.report_at(*flow.span(sink.node), message)
                        continue
                    move = f".to({flow.text[slice(*flow.span(sink.value))]}.device)"
            if isinstance(index, ATOMS):
                edits = [self.insert(end, move)]
            else:
                edits = [self.insert(start, "("), self.insert(end, ")" + move)]
            what = "to the host" if move == ".cpu()" else "to the indexed tensor's device"
            self.report_at(*flow.span(sink.node), message, fix=edits, fix_message=f"Move the index {what}: `{move[1:]}`")


def _plain_chain(node: ast.AST) -> bool:
    """``table`` or ``self.table``: names and attributes only."""
    while type(node) is ast.Attribute:
        node = node.value
    return type(node) is ast.Name
