"""FDV107 unmoved-input: a host batch fed to a model on a device gets moved."""

from __future__ import annotations

import ast
import re

import libcst as cst

from fixdev.engine.rule import Edit, Invalid, Rule

from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.flow import ENCODING, HOST, What, ast_walk
from fixdev.analysis.flow.evidence import DATA_CONSTRUCTORS  # torch.tensor, as_tensor, asarray: made where their data is, else on the default device
from fixdev.analysis.paired_moves import paired_moves
from fixdev.analysis.sibling_moves import sibling_moves

# Where a plain class keeps its device (`self.device`), or a move (a plain
# function's model put on a device): the text a file needs for a parameter
# met there (`UnmovedInput._entries`).
ENTRY_TEXT = re.compile(r"self\.\w*dev|\.(?:to|cuda)\(")
# Calls that read a tensor's data on the host: a value used this way after
# the move would now fail, so such values are reported, not moved.
HOST_READS = frozenset({"numpy"})
NUMPY_MODULES = ("np", "numpy")


class UnmovedInput(Rule):
    """
    ## What it does
    Finds tensors, and batches of them, that live on the CPU and reach a
    model or a tensor that lives on a device, and moves them where they are
    made, to the device of the model or tensor they meet:
    - a `DataLoader`'s batch (the first line of the loop becomes `images,
      labels = images.to(device), labels.to(device)`), the parts of
      `next(iter(loader))`, a `torch.from_numpy` result (`obs =
      obs.to(device)` after the assignment); the batch has the shape the
      file's dataset (`__getitem__`) or `collate_fn` gives it;
    - a tokenizer's result (`tokenizer(texts, return_tensors="pt")`, a
      `BatchEncoding`), given to a model (`model(**enc)`, `model.generate`)
      or read by key or attribute (`labels = enc["input_ids"]`,
      `enc.input_ids`): `enc = enc.to(device)` once it is made, once after
      the branches that make it;
    - a dict batch given as `**batch`: `batch = {k: v.to(device) if
      torch.is_tensor(v) else v for k, v in batch.items()}`, only its tensors;
      a list built in the code: `xs = [t.to(device) for t in xs]`;
    - a tensor from a call or an iterator the analysis does not see into
      (`for x, y in batches():`, `img = load_image(path)`), when the code
      shows it is one (`x.size(0)`, `y.unsqueeze(1)`, passed to a torch
      operation); `torch.tensor(obs)` / `torch.as_tensor(obs)` of such data
      (an environment's `reset()`/`step()`, a reader's rows: NumPy arrays or
      lists) is one by construction, moved once made (`state =
      state.to(device)`);
    - an item of the file's own dataset read by hand (`x, y = ds[i]`, `sample
      = ds[0]`), where `__getitem__` makes CPU tensors (`torch.from_numpy`),
      moved as a loader's batch is; so is what a generator function of the
      file yields (`for x, y in pairs(inputs, labels, 4):` of `yield
      inputs[s:e], labels[s:e]`), part by part, where the arguments the loop
      passes make it a CPU tensor on every path (not where the generator
      moves it, or slices a caller's data); and what the `__iter__` of the
      file's class yields, where it makes CPU tensors itself (`for x in
      Batches(4):` of `yield torch.from_numpy(self.rows[s:e])`), or what its
      `__next__` returns where `__iter__` returns `self`, or, with no
      `__iter__` and no base but `object` or `Dataset`, what `__getitem__`
      gives (`for x, y in MyDataset(...):`); not what its constructor was
      given, nor in a class that names or moves to a device;
    - what meets a caller's model that the code moves and calls: `model =
      model.to(device)` or `net.to(device)` of a parameter, then `model(x)`,
      or `self.model = model.to(device)` in a plain class (`x.to(self.device)`
      where the class keeps the device, else `x.to(next(self.model.parameters()).device)`:
      a plain `nn.Module` has no `.device`); a tensor is not callable, so
      what moves with `.to` and is called is a module;
    - a parameter of a plain class's method (a loss, a metric, a trainer:
      no `nn.Module`) that keeps its own device (`self.device =
      next(model.parameters()).device`), where the parameter, shown to be a
      tensor, meets a tensor or module on that device, there or in a helper
      it is passed to (`self.build_targets(p, targets)`): `targets =
      targets.to(self.device)` first in the method that takes it.
    - a parameter of a plain module-level function, shown to be a tensor
      (annotated `Tensor`, `x.size(0)`, `x.unsqueeze(0)`), that meets a
      model the function puts on a device (`model = Net().to(device)`, a
      caller's model moved there, a module-level model moved): `x =
      x.to(device)` first in the function, right wherever the caller put it;
      only for a function nothing else in the file names (a caller in the
      file is followed through it, and moves what it passes).
    - the sibling of a moved argument: `model.generate(input_ids=ids.to(d),
      attention_mask=mask)` where both are read from one container (`ids =
      inputs["input_ids"]`, `mask = inputs.get("attention_mask")`) and the
      sibling goes in as a tensor argument of transformers' models
      (`attention_mask`, `token_type_ids` …): `mask.to(d)`, or `mask.to(d)
      if mask is not None else None` where it may be `None`.
    - another model's tensors updating the class's own in place (an EMA, a
      soft target update): `for mine, theirs in zip(self.shadow.parameters(),
      model.parameters()): mine.lerp_(theirs, w)` (also `.buffers()`,
      `.state_dict().values()`, `add_`, `mul_` …) where another loop of the
      class over such pairs moves them (`mine.copy_(theirs.to(device=
      self.device))`): `theirs.to(device=self.device)`, the same move.
    Only the values that reach the device are moved (labels only when they
    meet the model's output, in the loss).

    ## Why is this bad?
    `model.to(device)` moves the model's parameters, not the data. The first
    forward pass on a GPU fails with `Input type (torch.FloatTensor) and
    weight type (torch.cuda.FloatTensor) should be the same` or `Expected all
    tensors to be on the same device`.

    ## Example
    ```python
    model = Net().to(device)
    for images, labels in loader:
        loss = criterion(model(images), labels)
    ```

    ## Use instead
    ```python
    model = Net().to(device)
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        loss = criterion(model(images), labels)
    ```

    ## Fix safety
    Only the device of the moved tensors changes. The move goes to the
    device of what they meet, named as the code names it (`device`,
    `self.device`, `next(model.parameters()).device`); where what they meet
    stays on the CPU on some path (a model moved only when a GPU is counted),
    only a name that follows it is used (`self.device = self.model.device`),
    else the finding has no fix. A tensor moved to the GPU can no longer be
    read with `.numpy()`: values that are also read that way (or made from
    what moves and read that way) are reported, not moved. A method
    parameter moved at the method's start is the caller's tensor no more
    when it was on the CPU: writes into it in place no longer reach the
    caller (on the device they failed before).

    ## When it stays silent
    When the model and the data move together under the same condition
    (`if args.cuda:`), when where either lives is not known (a function's
    parameter, a dataset that moves its own tensors, `torch.set_default_device`),
    and for factories such as `torch.zeros(n)` (see `factory-device`).
    Silent where the code does not show a value is a tensor or a batch of
    them: a value from an unknown call or iterator not used as only tensors
    are, a loader whose `collate_fn` gives tuples (`tuple(zip(*batch))`), a
    tokenizer called without `return_tensors="pt"`; for what is made from a
    parameter, for `self`'s own calls (also of one of its own modules bound
    to a name: `for block in self.blocks: out = block(x)`, `layer =
    self.layers[i]`, where the flow shows `self.blocks` is a module) and for
    anything in an `nn.Module`'s methods (their callers place their inputs); for a plain class's method
    parameter that no code shows is a tensor, or that a caller in the file
    passes on from its own parameter (the caller moves it) or already moved;
    for a plain function's parameter likewise, and for a function named
    anywhere else in the file, nested in another, or whose model is its
    caller's and not moved there.
    Silent for `torch.tensor(x)` of a parameter (the caller's data, maybe
    already on the device: `torch.tensor` keeps a tensor where it is) or of a
    value the code shows is a tensor, and with `device=` given; for a dataset
    item when the class names a device or moves its tensors itself, or hands
    back what its constructor was given; for an object made here by a call
    the analysis does not see into and moved (`pipe =
    Pipeline.from_pretrained(...).to(device)`: pipelines move their own
    inputs), and for a caller's model bound to anything but its move
    somewhere (`self.model = other` in another method) or moved only under a
    flag.
    Silent for a sibling passed positionally or as another keyword (the
    `lengths` of a packed sequence stay on the CPU; a string or an option
    from the container has no `.to`), moved somewhere in the function, or
    read from another container.
    Silent for another model's tensors where no loop of the class moves
    them, where the move names anything but the instance's attributes (a
    device the method is given), and for `copy_`, which copies across
    devices.
    Silent in the CPU arm of a CUDA test (the `else:` of `if use_cuda:`, the
    body of `if not args.cuda:`) when what is on the device got there only in
    that same test's CUDA arm (`if use_cuda: model.cuda()`): on every run
    both sides are then on the CPU. A model moved whatever the flag says is
    still a finding there.
    Reported without a fix: a value made elsewhere (a parameter, a call
    result), a one-line loop body, a device that is not bound where the move
    would go, values also read with `.numpy()` or NumPy, a whole loader
    batch the code does not show is one tensor (or a dict, or a list), and a
    method parameter that defaults to `None`.
    """

    code = "FDV107"
    name = "unmoved-input"
    group = "mismatch"
    message = "Tensor on the CPU reaches a model or tensor on a device; move it there"
    trigger = r"\.(?:to|cuda)\s*\(|self\.\w*dev"

    @classmethod
    def screen(cls, screening) -> bool:
        return (
            analysis.has_sink(screening, "module-input", "operand", "unplaced")
            or (ENTRY_TEXT.search(screening.text) is not None and analysis.has_entry(screening))
            or (".to(" in screening.text and bool(sibling_moves(analysis.flow_for(screening))))
            or ("zip(" in screening.text and bool(paired_moves(analysis.flow_for(screening))))
        )

    VALID = [
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\nfor x, y in loader:\n    out = model(x)\n",
        # what the object's own layers give is where the object is
        (
            "import torch, torch.nn as nn\nfrom base import Base\nclass Net(Base):\n    def __init__(self):\n        super().__init__()\n"
            "        self.layers = nn.ModuleList([nn.Linear(2, 2)])\n    def forward(self, x):\n        y = torch.zeros(2, device=self.device)\n"
            "        for layer in self.layers:\n            h = layer(x)\n            y = y + h.relu()\n        return y\n"
        ),
        (
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "device = torch.device('cuda')\nmodel = nn.Linear(4, 2).to(device)\n"
            "for x, y in DataLoader(ds):\n    x = x.to(device)\n    out = model(x)\n"
        ),
        (
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "model = nn.Linear(4, 2)\nif args.cuda:\n    model.cuda()\n"
            "for x, y in DataLoader(ds):\n    if args.cuda:\n        x = x.cuda()\n    out = model(x)\n"
        ),
        "import torch.nn as nn\ndef run(model, x):\n    return model(x)\n",
        # the else: of `if use_cuda:`: the model moved only under that test (issue 25)
        (
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "use_cuda = torch.cuda.is_available()\nmodel = nn.Linear(4, 2)\nif use_cuda:\n    model = model.cuda()\n"
            "for x, y in DataLoader(ds):\n    if use_cuda:\n        out = model(x.cuda())\n    else:\n        out = model(x)\n"
            "    if not use_cuda:\n        loss = out - y\n"
        ),
        (
            "import torch, torch.nn as nn\nmodel = nn.Linear(4, 2)\nif args.cuda:\n    model.cuda()\n"
            "def evaluate(a):\n    if args.cuda:\n        return model(torch.from_numpy(a).cuda())\n"
            "    else:\n        t = torch.from_numpy(a)\n        return model(t)\n"
        ),
        # tuples of images and target dicts (tuple(zip(*batch))): not moved with .to
        (
            "import torch, torchvision\nfrom torch.utils.data import DataLoader\n"
            "def collate(batch):\n    return tuple(zip(*batch))\n"
            "def train(ds, device):\n    model = torchvision.models.resnet18().to(device)\n"
            "    for images, targets in DataLoader(ds, collate_fn=collate):\n        out = model(images, targets)\n"
        ),
        # nothing shows the plain class's argument is a tensor
        (
            "import torch\nclass Scale:\n    def __init__(self, model):\n        self.device = next(model.parameters()).device\n"
            "    def __call__(self, v):\n        return torch.ones(3, device=self.device) * v\n"
        ),
        # an unknown iterator's batches, not shown to be tensors
        "import torch, torch.nn as nn\nfrom data import batches\nmodel = nn.Linear(4, 2).to('cuda')\nfor x in batches():\n    model(x)\n",
        # a helper the file calls with what it moved: the caller owns the move
        (
            "import torch, torch.nn as nn\ndef predict(x: torch.Tensor, device):\n    model = nn.Linear(4, 2).to(device)\n    return model(x)\n"
            "def main(device):\n    return predict(torch.ones(1, 4).to(device), device)\n"
        ),
        # torch.tensor of the caller's data: it may be on the device already
        "import torch, torch.nn as nn\ndef act(obs, device):\n    policy = nn.Linear(4, 2).to(device)\n    return policy(torch.tensor(obs))\n",
        # an object made here and moved, called: a pipeline moves its own inputs
        (
            "import numpy as np, torch\nfrom painter import Pipeline\ndef paint(device):\n"
            "    pipe = Pipeline.from_pretrained('p').to(device)\n    return pipe(image=torch.from_numpy(np.zeros(3)))\n"
        ),
    ]
    INVALID = [
        # a caller's model, moved here and called: a module
        Invalid(
            "import numpy as np, torch\ndef score(model, device):\n    model = model.to(device)\n"
            "    x = torch.from_numpy(np.ones((2, 4), np.float32))\n    return model(x)\n",
            "import numpy as np, torch\ndef score(model, device):\n    model = model.to(device)\n"
            "    x = torch.from_numpy(np.ones((2, 4), np.float32))\n    x = x.to(device)\n    return model(x)\n",
        ),
        # torch.tensor of an environment's observation
        Invalid(
            "import torch, torch.nn as nn\ndef rollout(env, device):\n    policy = nn.Linear(4, 2).to(device)\n"
            "    obs = env.reset()\n    state = torch.tensor(obs, dtype=torch.float32)\n    return policy(state)\n",
            "import torch, torch.nn as nn\ndef rollout(env, device):\n    policy = nn.Linear(4, 2).to(device)\n"
            "    obs = env.reset()\n    state = torch.tensor(obs, dtype=torch.float32)\n    state = state.to(device)\n    return policy(state)\n",
        ),
        # the file's dataset, indexed by hand
        Invalid(
            "import numpy as np, torch, torch.nn as nn\nclass Rows:\n    def __getitem__(self, i):\n"
            "        return torch.from_numpy(np.ones(4, np.float32))\n"
            "def score(device):\n    model = nn.Linear(4, 2).to(device)\n    row = Rows()[0]\n    return model(row)\n",
            "import numpy as np, torch, torch.nn as nn\nclass Rows:\n    def __getitem__(self, i):\n"
            "        return torch.from_numpy(np.ones(4, np.float32))\n"
            "def score(device):\n    model = nn.Linear(4, 2).to(device)\n    row = Rows()[0]\n    row = row.to(device)\n    return model(row)\n",
        ),
        # the sibling of a moved argument, from the same container
        Invalid(
            "def run(model, inputs, device):\n    ids = inputs['input_ids']\n    mask = inputs['attention_mask']\n"
            "    return model(input_ids=ids.to(device), attention_mask=mask)\n",
            "def run(model, inputs, device):\n    ids = inputs['input_ids']\n    mask = inputs['attention_mask']\n"
            "    return model(input_ids=ids.to(device), attention_mask=mask.to(device))\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(4, 2).to(device)\ncriterion = nn.CrossEntropyLoss()\n"
            "for images, labels in DataLoader(ds):\n    loss = criterion(model(images), labels)\n",
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(4, 2).to(device)\ncriterion = nn.CrossEntropyLoss()\n"
            "for images, labels in DataLoader(ds):\n    images, labels = images.to(device), labels.to(device)\n"
            "    loss = criterion(model(images), labels)\n",
        ),
        Invalid(
            "import numpy as np, torch, torch.nn as nn\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(4, 2).to(device)\nobs = torch.from_numpy(np.zeros((1, 4), np.float32))\nout = model(obs)\n",
            "import numpy as np, torch, torch.nn as nn\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(4, 2).to(device)\nobs = torch.from_numpy(np.zeros((1, 4), np.float32))\nobs = obs.to(device)\nout = model(obs)\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = nn.Linear(4, 2).to(device)\n"
            "for x, y in DataLoader(ds):\n    out = model(x)\n    print(x.numpy())\n",
            None,
        ),
        # the model goes to the device whatever the flag says: the CPU arm is a bug
        Invalid(
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nmodel = nn.Linear(4, 2).to(device)\n"
            "for x, y in DataLoader(ds):\n    if args.use_cuda:\n        out = model(x.to(device))\n    else:\n        out = model(x)\n",
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nmodel = nn.Linear(4, 2).to(device)\n"
            "for x, y in DataLoader(ds):\n    x = x.to(device)\n    if args.use_cuda:\n        out = model(x.to(device))\n    else:\n        out = model(x)\n",
        ),
        # moved under another test than the one whose else: this is
        Invalid(
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "model = nn.Linear(4, 2)\nif args.gpu:\n    model.cuda()\n"
            "for x, y in DataLoader(ds):\n    if use_cuda:\n        out = model(x.cuda())\n    else:\n        out = model(x)\n",
            "import torch, torch.nn as nn\nfrom torch.utils.data import DataLoader\n"
            "model = nn.Linear(4, 2)\nif args.gpu:\n    model.cuda()\n"
            "for x, y in DataLoader(ds):\n    x = x.to(next(model.parameters()).device)\n    if use_cuda:\n        out = model(x.cuda())\n    else:\n        out = model(x)\n",
        ),
        # a tokenizer's BatchEncoding moves whole
        Invalid(
            "import torch\ndef embed(model, tokenizer, device):\n    model.to(device)\n    model.eval()\n"
            "    enc = tokenizer(['a b'], return_tensors='pt')\n    return model(**enc)\n",
            "import torch\ndef embed(model, tokenizer, device):\n    model.to(device)\n    model.eval()\n"
            "    enc = tokenizer(['a b'], return_tensors='pt')\n    enc = enc.to(device)\n    return model(**enc)\n",
        ),
        # a plain function's tensor parameter, met on the model it builds on the device
        Invalid(
            "import torch, torch.nn as nn\ndef predict(x: torch.Tensor, device):\n    model = nn.Linear(4, 2).to(device)\n    return model(x)\n",
            "import torch, torch.nn as nn\ndef predict(x: torch.Tensor, device):\n    x = x.to(device)\n    model = nn.Linear(4, 2).to(device)\n    return model(x)\n",
        ),
        # a plain class's method parameter, met on the class's own device in a helper
        Invalid(
            "import torch\nclass Loss:\n    def __init__(self, model):\n        self.device = next(model.parameters()).device\n"
            "    def __call__(self, p, t):\n        return self.match(p, t)\n"
            "    def match(self, p, t):\n        return torch.cat((t.repeat(3, 1), torch.ones(3, 1, device=self.device)), 1)\n",
            "import torch\nclass Loss:\n    def __init__(self, model):\n        self.device = next(model.parameters()).device\n"
            "    def __call__(self, p, t):\n        t = t.to(self.device)\n        return self.match(p, t)\n"
            "    def match(self, p, t):\n        return torch.cat((t.repeat(3, 1), torch.ones(3, 1, device=self.device)), 1)\n",
        ),
        # an unknown iterator's tensors (x.size(0) shows it)
        Invalid(
            "import torch, torch.nn as nn\nfrom data import batches\ndef run(device):\n    model = nn.Linear(4, 2).to(device)\n"
            "    for x in batches():\n        model(x.view(x.size(0), -1))\n",
            "import torch, torch.nn as nn\nfrom data import batches\ndef run(device):\n    model = nn.Linear(4, 2).to(device)\n"
            "    for x in batches():\n        x = x.to(device)\n        model(x.view(x.size(0), -1))\n",
        ),
    ]

    def visit_Module(self, node: cst.Module) -> None:
        flow = analysis.flow_of(self)
        groups: dict[tuple, list] = {}  # (kind, statement) -> sinks moved there
        names: dict[tuple, set[str]] = {}
        for sink in flow.sinks():
            if sink.kind not in ("module-input", "operand", "unplaced"):
                continue
            site = _move_site(flow, sink)
            if site is False:
                continue  # a factory (factory-device's) or a dropped move (discarded-to's)
            key = site[:2] if site else ("report", id(sink))
            groups.setdefault(key, []).append(sink)
            names.setdefault(key, set()).update(site[2] if site else ())
        for key, sinks in groups.items():
            fix, fix_message = (), ""
            if key[0] != "report":
                made = self._fix(flow, key, names[key], sinks)
                if made is not None:
                    fix, fix_message = made
            for sink in sinks:
                origins = [flow.span(origin) for origin in sink.origins if isinstance(origin, ast.Call)]
                self.report_at(*flow.span(sink.value), _unplaced_message(flow, sink), fix=fix, fix_message=fix_message,
                               origins=origins if len(origins) == len(sink.origins) else ())
        reported = {f.start for f in self.findings}
        for met in sibling_moves(flow) if ".to(" in self.context.text else ():
            start, end = flow.span(met.arg)
            if start in reported:
                continue
            name = met.arg.id
            moved = f"{name}.to({met.device}) if {name} is not None else None" if met.maybe_none else f"{name}.to({met.device})"
            self.report_at(start, end, fix=(Edit(start, end, moved),), fix_message=f"Move `{name}` to `{met.device}`, as its sibling from `{met.container}` is")
        for met in paired_moves(flow):  # another model's tensors, where the class moves them elsewhere
            start, end = flow.span(met.arg)
            if start not in reported:
                name = met.arg.id
                self.report_at(start, end, f"`{name}` (another model's tensor) meets the class's own in place unmoved, while its other loops move them with `.to({met.device})`",
                               fix=(Edit(start, end, f"{name}.to({met.device})"),), fix_message=f"Move `{name}` with `.to({met.device})`, as the class's other loops do")
        if ENTRY_TEXT.search(self.context.text):
            entries: dict[ast.AST, list] = {}
            for met in flow.entry_moves():
                entries.setdefault(met.function, []).append(met)
            for function, met in entries.items():
                self._entries(flow, function, met)

    def _entries(self, flow, function: ast.AST, entries: list) -> None:
        """Parameters of a plain class's method that meet the class's own
        device (there or in a helper it passes them to): moved at the start."""
        args = function.args
        given = {a.arg: a for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        names = sorted({met.name for met in entries if met.name in given}, key=lambda name: (given[name].lineno, given[name].col_offset))
        fix, fix_message = (), ""
        made = self._entry_fix(flow, function, names, given, entries)
        if made is not None:
            fix, fix_message = made
        for name in names:
            self.report_at(*flow.span(given[name]), fix=fix, fix_message=fix_message)

    def _entry_fix(self, flow, function: ast.AST, names: list[str], given: dict, entries: list) -> tuple[tuple[Edit, ...], str] | None:
        devices = {met.device for met in entries}
        if not names or len(devices) != 1:
            return None
        (device,) = devices
        args = function.args
        positional = [*args.posonlyargs, *args.args]
        defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        defaults.update({a: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
        if any(isinstance(defaults.get(given[name]), ast.Constant) and defaults[given[name]].value is None for name in names):
            return None  # targets=None: None has no .to()
        for met in entries:
            origins = {given[met.name]} | ({met.origin_arg} if met.origin_arg is not None else set())
            for scope in {function, met.origin}:
                if _read_on_host_later(flow, scope, "entry", [], origins):
                    return None
        body = function.body
        first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str) else body[0]
        facts = analysis.of(self)
        anchor = facts.statement_at(flow.span(first)[0])
        block = facts.parent(anchor) if anchor is not None else None
        if not isinstance(block, cst.IndentedBlock):
            return None  # def f(self, x): return ...
        line = f"{', '.join(names)} = {', '.join(f'{name}.to({device})' for name in names)}"
        edit = placement.lines_before(self, block, facts.index_in(block.body, anchor), [line])
        return (edit,), f"Move {', '.join(f'`{n}`' for n in names)} to `{device}`"

    def _fix(self, flow, site: tuple, names: set[str], sinks: list) -> tuple[tuple[Edit, ...], str] | None:
        kind, statement = site
        devices = {sink.device for sink in sinks}
        if len(devices) != 1 or None in devices:
            return None
        (device,) = devices
        if any(_named_by_one_path(flow, sink, device) for sink in sinks):
            # what it meets stays on the host on some path, and the device named is
            # where it goes on another ("cuda"): only a name that follows it will do
            followed = {flow.following_device(statement, sink.other) for sink in sinks}
            if len(followed) != 1 or None in followed:
                return None
            (device,) = followed
        names = sorted(names, key=lambda name: min(_positions(statement, name)))  # as the target reads
        if _read_on_host_later(flow, statement, kind, names, {o for sink in sinks for o in sink.origins}):
            return None
        facts = analysis.of(self)
        bound = facts.statement_at(flow.span(statement)[0])  # the loop or the assignment line
        if bound is None:
            return None
        if kind == "loop":
            if not isinstance(bound.body, cst.IndentedBlock):
                return None  # for x in loader: f(x)
            block, index, anchor = bound.body, 0, bound.body.body[0]
        else:
            block = facts.parent(bound)
            if not isinstance(block, (cst.Module, cst.IndentedBlock)):
                return None
            block, index, anchor = block, block.body.index(bound) + 1, bound
        if not placement.expression_bound_at(facts, device, anchor):
            return None
        moves = [self._move(flow, facts, statement, kind, name, device, sinks) for name in names]
        if None in moves:
            return None
        line = f"{', '.join(names)} = {', '.join(moves)}"
        edit = placement.lines_before(self, block, index, [line])
        return (edit,), f"Move {', '.join(f'`{n}`' for n in names)} to `{device}`"


    def _move(self, flow, facts, statement: ast.stmt, kind: str, name: str, device: str, sinks: list) -> str | None:
        """How ``name`` moves, as what it holds moves: a tensor or a
        tokenizer's ``BatchEncoding`` with ``.to``; a dict given as
        ``**batch`` key by key, only its tensors; a list built here element
        by element; a loader's batch the code does not show is one tensor
        (or a dict, or a list): None (reported without a fix)."""
        if not name.isidentifier():
            return f"{name}.to({device})"  # batch["image"]: a tensor the code reads by key
        value = _bound_value(flow, statement, name)
        if value.what is What.UNKNOWN and value.parts is None:
            # what the code reads it as later (a device error's message may say: a tensor on the CPU)
            scope = statement if kind == "loop" else _scope_of(analysis.ast_parents(flow), statement) or flow.tree
            read = {flow.value(n).what for n in ast_walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)}
            if What.TENSOR in read and read <= {What.TENSOR, What.UNKNOWN}:
                return f"{name}.to({device})"
        if value.what is What.TENSOR or (value.what is What.BATCH and value.ref == ENCODING):
            return f"{name}.to({device})"
        if value.what is What.UNKNOWN and any(sink.kind == "unplaced" and sink.origins[0].id == name for sink in sinks):
            return f"{name}.to({device})"  # shown to be a tensor (evidence.unplaced_binding)
        if value.what is not What.BATCH and not (value.what is What.UNKNOWN and value.parts is not None):
            return None  # a dict of tensors and names has parts, and is no batch of tensors only
        parents = analysis.ast_parents(flow)
        mine = [sink for sink in sinks if isinstance(sink.value, ast.Name) and sink.value.id == name]
        if mine and all(isinstance(parents.get(sink.value), ast.keyword) and parents[sink.value].arg is None for sink in mine):
            torch = placement.unconditional_torch(facts)
            if torch is None or {"k", "v"} & _names_in(device) or _read_as_attribute(flow, statement, kind, name):
                return None
            return f"{{k: v.to({device}) if {torch.alias}.is_tensor(v) else v for k, v in {name}.items()}}"
        if value.what is not What.BATCH:
            return None
        if kind == "after" and isinstance(statement, ast.Assign) and isinstance(statement.value, (ast.List, ast.ListComp)):
            return f"[t.to({device}) for t in {name}]" if "t" not in _names_in(device) else None
        roots = statement.body if kind == "loop" else [statement]
        if kind == "loop" and flow.shows_tensor(roots, name):
            return f"{name}.to({device})"
        return None


def _named_by_one_path(flow, sink, device: str) -> bool:
    """The device side may stay on the host, and ``device`` is the text of a
    device it is moved to on some path (not ``next(model.parameters()).device``,
    which follows it)."""
    if sink.other is None:
        return False
    placements = flow.value(sink.other).placements
    return HOST in placements and any(getattr(p, "text", None) == device for p in placements)


def _bound_value(flow, statement: ast.stmt, name: str):
    """What ``name`` holds where ``statement`` binds it (joined over the
    bindings inside ``statement`` when it is the branches that bind it)."""
    if isinstance(statement, ast.For):
        targets = [statement.target]
    elif isinstance(statement, ast.Assign):
        targets = statement.targets
    else:
        targets = [t for sub in ast_walk(statement) if isinstance(sub, ast.Assign) for t in sub.targets]
    values = [flow.value(n) for target in targets for n in ast_walk(target) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    whats = {v.what for v in values}
    refs = {v.ref for v in values}
    if len(whats) != 1:
        return flow.value(ast.Name(id="", ctx=ast.Load()))  # unknown
    return values[0] if len(refs) == 1 else values[0].but(ref=None)


def _names_in(expression: str) -> set[str]:
    try:
        return {n.id for n in ast_walk(ast.parse(expression, mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return {"k", "v", "t"}


def _read_as_attribute(flow, statement: ast.stmt, kind: str, name: str) -> bool:
    """``batch.input_ids`` after the binding: a dict rebuilt from the batch would lose it."""
    parents = analysis.ast_parents(flow)
    roots = statement.body if kind == "loop" else [_scope_of(parents, statement) or flow.tree]
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name for root in roots for n in ast_walk(root))


def _scope_of(parents: dict, node: ast.AST):
    scope = parents.get(node)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        scope = parents.get(scope)
    return scope


def _positions(statement: ast.stmt, name: str) -> list[tuple]:
    if not isinstance(statement, (ast.For, ast.Assign)):
        return [(0, 0, name)]  # moved after the branches that bind it
    target = statement.target if isinstance(statement, ast.For) else statement.targets[0]
    return [(n.lineno, n.col_offset, "") for n in ast_walk(target) if isinstance(n, ast.Name) and n.id == name] or [(0, 0, name)]


def _move_site(flow, sink) -> tuple | None | bool:
    """Where the value of ``sink`` can be moved: ``("loop", for_statement,
    names)`` (first line of the loop), ``("after", assign_statement, names)``;
    None when nowhere sure (report without a fix); False for a factory,
    which ``factory-device`` fixes where it is made, or a value a dropped
    ``x.to(device)`` meant to move, which ``discarded-to`` fixes."""
    sites = set()
    for origin in sink.origins:
        site = _origin_site(flow, sink, origin)
        if site is False:
            return False
        if site is None:
            return None
        sites.add(site)
    if len(sites) != 1:
        return _after_branches(flow, sink, sites)
    ((kind, statement, name),) = sites
    return kind, statement, frozenset({name})


def _after_branches(flow, sink, sites: set) -> tuple | None:
    """One name bound on the host in several branches (``if ...: enc =
    tokenizer(a)`` / ``else: enc = tokenizer(b)``): moved once, right after
    the smallest statement that holds every binding, when the meeting comes
    later in the block that statement stands in."""
    if any(kind != "after" for kind, _, _ in sites) or len({name for _, _, name in sites}) != 1:
        return None
    parents = analysis.ast_parents(flow)
    chains = []
    for _, statement, _ in sites:
        chain, current = [], statement
        while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module, ast.ClassDef)):
            if isinstance(current, ast.stmt):
                chain.append(current)
            current = parents.get(current)
        chains.append((chain, current))
    if len({id(scope) for _, scope in chains}) != 1:
        return None
    common = next((s for s in chains[0][0] if all(s in chain for chain, _ in chains[1:])), None)
    if common is None or isinstance(common, (ast.For, ast.AsyncFor, ast.While)):
        return None  # a loop's body may run no time, or again after the meeting
    block = next((getattr(parents.get(common), f) for f in ("body", "orelse", "finalbody") if common in (getattr(parents.get(common), f, None) or ())), None)
    if block is None:
        return None
    met = parents.get(sink.node)
    while met is not None and met not in block:
        met = parents.get(met)
    if met is None or block.index(met) <= block.index(common):
        return None
    ((_, _, name),) = {(None, None, name) for _, _, name in sites}
    return "after", common, frozenset({name})


def _origin_site(flow, sink, origin) -> tuple | None | bool:
    if isinstance(origin, ast.Call):
        qualified = flow.qualified_name(origin.func) or ""
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] not in ("from_numpy", "as_tensor", "tensor", "Tensor", "FloatTensor", "LongTensor"):
            return False
    name, statement = _bound_name(flow, sink, origin)
    if name is None:
        return None
    if analysis.fixed_by_a_bare_move(flow, name, origin):
        return False  # x.to(device) as a statement: discarded-to's
    return ("loop" if isinstance(statement, ast.For) else "after"), statement, name


def _bound_name(flow, sink, origin) -> tuple[str | None, ast.stmt | None]:
    """The name the host value was bound to, and the statement binding it:
    a loop target or an assignment target (``x, y = next(iter(loader))``,
    ``obs = torch.from_numpy(a).float()``)."""
    if isinstance(origin, ast.Name) and isinstance(origin.ctx, ast.Store):
        statement = _parent_statement(flow, origin)
        if isinstance(statement, ast.For) and _in_target(statement.target, origin):
            return origin.id, statement
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and _in_target(statement.targets[0], origin):
            return origin.id, statement
        return None, None
    value = sink.value
    if origin is value and isinstance(value, ast.Name):  # model(**batch): the loop's batch, spread into its parts
        statement = _parent_statement(flow, value)
        while statement is not None and not (isinstance(statement, ast.For) and _in_target(statement.target, value, by_name=True)):
            statement = _parent_statement(flow, statement)
        return (value.id, statement) if statement is not None else (None, None)
    if origin is value:  # a part of a loader batch read in place: batch["image"].float()
        part = _batch_part(value)
        statement = _parent_statement(flow, part.value) if part is not None else None
        while statement is not None and not (isinstance(statement, ast.For) and _in_target(statement.target, part.value, by_name=True)):
            statement = _parent_statement(flow, statement)
        if statement is not None:
            return flow.text[slice(*flow.span(part))], statement
        return None, None
    # a call: the value must be read through the one name its statement binds
    statement = _parent_statement(flow, origin)
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        target = statement.targets[0]
        if isinstance(value, ast.Name) and value.id == target.id:
            return value.id, statement
        # or made from what that name holds (labels = enc["input_ids"]): the
        # name, a tensor or a BatchEncoding, moves right after it is bound
        bound = flow.value(target)
        movable = bound.what is What.TENSOR or (bound.what is What.BATCH and bound.ref == ENCODING)
        if movable and any(o is origin for _, o in bound.places) and not _inside(flow, sink.node, statement) and not isinstance(statement.value, (ast.IfExp, ast.BoolOp)):
            return target.id, statement
    return None, None


def _inside(flow, node: ast.AST, statement: ast.stmt) -> bool:
    parents = analysis.ast_parents(flow)
    while node is not None and node is not statement:
        node = parents.get(node)
    return node is statement


def _in_target(target: ast.AST, name: ast.Name, by_name: bool = False) -> bool:
    if target is name or (by_name and isinstance(target, ast.Name) and target.id == name.id):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_in_target(element, name, by_name) for element in target.elts)
    return False


def _batch_part(value: ast.AST) -> ast.Subscript | None:
    """``batch["image"]`` in ``batch["image"]`` or ``batch["image"].float()``."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and not value.args:
        value = value.func.value
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, str):
        return value
    return None


def _parent_statement(flow, node: ast.AST) -> ast.stmt | None:
    """The innermost statement holding ``node``."""
    parents = analysis.ast_parents(flow)
    current = parents.get(node)
    while current is not None and not isinstance(current, ast.stmt):
        current = parents.get(current)
    return current


def _read_on_host_later(flow, statement: ast.stmt, kind: str, names: list[str], origins: set) -> bool:
    """``x.numpy()`` or ``np.f(x)`` for a moved ``x`` (a name or
    ``batch["key"]``), or for a value made from what moves (``labels =
    enc["input_ids"]``, the same origins), in the code that runs after the
    move: the loop's body, or what follows the assignment in its function (or
    module)."""
    moved = {ast.dump(ast.parse(name, mode="eval").body) for name in names}

    def is_moved(node: ast.AST) -> bool:
        return ast.dump(node) in moved or any(o in origins for _, o in flow.where(node))

    if kind == "loop":
        roots, after = statement.body, (0, 0)
    elif kind == "entry":
        roots, after = [statement], (0, 0)  # the whole method
    else:
        parents = analysis.ast_parents(flow)
        scope = parents.get(statement)
        while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            scope = parents.get(scope)
        roots, after = [scope if scope is not None else flow.tree], (statement.end_lineno, statement.end_col_offset)
    for root in roots:
        for sub in ast_walk(root):
            if not isinstance(sub, ast.Call) or (sub.lineno, sub.col_offset) < after:
                continue
            func = sub.func
            if isinstance(func, ast.Attribute) and func.attr in HOST_READS and is_moved(func.value):
                return True
            root_name = func
            while isinstance(root_name, ast.Attribute):
                root_name = root_name.value
            if isinstance(root_name, ast.Name) and root_name.id in NUMPY_MODULES and any(is_moved(a) for a in sub.args):
                return True
    return False


def _unplaced_message(flow, sink) -> str | None:
    """For a tensor bound from a call the analysis does not see into (an
    ``"unplaced"`` sink) nothing shows it is on the CPU: say what is shown.
    ``torch.tensor(obs)`` without ``device=`` makes it on the default device
    (the CPU unless set otherwise), or where ``obs`` is if that is a tensor.
    None: the rule's message (the value is shown on the host)."""
    if sink.kind != "unplaced":
        return None
    for target in sink.origins:
        statement = analysis.ast_parents(flow).get(target)
        value = statement.value if type(statement) is ast.Assign and statement.targets == [target] else None
        while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in analysis.TENSOR_METHODS:
            value = value.func.value
        if type(value) is ast.Call and flow.index.static_name(value.func, flow.index.scope_at((value.lineno, value.col_offset))) in DATA_CONSTRUCTORS:
            made = ast.unparse(value.func)
            return (f"Tensor made by `{made}(...)` without `device=` (on the default device, the CPU unless set otherwise, or where its data is"
                    " if that is a tensor) reaches a model or tensor on a device; move it there")
    return "Tensor that nothing here moves (from a call or iterator not followed) reaches a model or tensor on a device; move it there"
