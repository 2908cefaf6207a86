"""FDV105 load-map-location: ``torch.load(f)`` → ``torch.load(f, map_location=...)``."""

from __future__ import annotations

import ast

import libcst as cst

from fixdev.engine.rule import Invalid, Rule, child_nodes

from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.saved_files import saved_files

# loader → index of map_location among its positional parameters
LOADERS = {"torch.load": 1, "torch.jit.load": 1, "torch.hub.load_state_dict_from_url": 2, "torch.utils.model_zoo.load_url": 2}
# These return state dicts: any device is right for load_state_dict.
# (torch.utils.model_zoo.load_url is torch.hub.load_state_dict_from_url.)
STATE_DICT_LOADERS = {"torch.hub.load_state_dict_from_url", "torch.utils.model_zoo.load_url"}
SHORT_NAMES = {name.rsplit(".", 1)[-1] for name in LOADERS}


def _feeds_load_state_dict(facts: "analysis.FileAnalysis", call: cst.Call) -> bool:
    """The loaded object goes straight into ``X.load_state_dict(...)``: as its
    argument, or through a name used only that way."""
    parent = facts.parent(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        name = parent.targets[0].target.value
        scope = facts.enclosing(call, cst.FunctionDef) or facts.module
        uses = [n for n in _names(facts, scope).get(name, ()) if n is not parent.targets[0].target]
        if uses and all(_is_load_state_dict_argument(facts, use) for use in uses):
            return True
        # a checkpoint dict read by key, its weights going into load_state_dict:
        # `ckpt = torch.load(p); net.load_state_dict(ckpt["net"]); epoch = ckpt["epoch"]`
        entries = [facts.parent(use) for use in uses]
        return (
            bool(entries)
            and all(isinstance(entry, cst.Subscript) and entry.value is use for entry, use in zip(entries, uses))
            and any(_is_load_state_dict_argument(facts, entry) for entry in entries)
        )
    return _is_load_state_dict_argument(facts, call)


def _names(facts: "analysis.FileAnalysis", node: cst.CSTNode) -> dict[str, list[cst.Name]]:
    """Every ``Name`` node under ``node``, by spelling: walked once per scope
    (walked once per load, a file of n loads cost n²)."""
    memo = facts.shared.setdefault("load-map-location names", {})
    entry = memo.get(id(node))
    if entry is None:
        found: dict[str, list[cst.Name]] = {}
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, cst.Name):
                found.setdefault(current.value, []).append(current)
                continue
            stack.extend(child_nodes(current))
        entry = memo[id(node)] = (node, found)  # the node kept, so its id is not reused
    return entry[1]


def _is_load_state_dict_argument(facts: "analysis.FileAnalysis", value: cst.BaseExpression) -> bool:
    arg = facts.parent(value)
    outer = facts.parent(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(outer, cst.Call) and analysis.last_name(outer.func) == "load_state_dict" and outer.args[0] is arg


def _runs_on_the_cpu(text: str) -> bool:
    """Nothing in the file names CUDA or a GPU, or moves anything with ``.to(``."""
    lowered = text.lower()
    return "cuda" not in lowered and "gpu" not in lowered and ".to(" not in text


class LoadMapLocation(Rule):
    """
    ## What it does
    Adds `map_location=` to `torch.load`, `torch.jit.load`,
    `torch.hub.load_state_dict_from_url` and `torch.utils.model_zoo.load_url`
    calls that have none. When what is
    loaded is a state dict on its way into `load_state_dict` (passed straight to
    it, through a name used only there, or from `load_state_dict_from_url` /
    `model_zoo.load_url`),
    the device in scope (a `device`/`dev` parameter, a name bound to
    `torch.device(...)` or a `"cuda"`/`"cpu"` string in the function or the
    module, `self.device`; never in a `@classmethod` or `@staticmethod`,
    where `self` is unbound), else `"cpu"`. For anything else (a whole model, a
    scripted module, a tensor) only a device the enclosing function itself
    works with (a `device`/`dev` parameter, a local device, `self.device`);
    without one the call is reported, not fixed.

    ## Why is this bad?
    A checkpoint remembers the device each tensor was saved from. Loading a
    checkpoint saved on a GPU, on a machine without one, raises `Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is
    False`; on a machine with several GPUs it lands on the GPU it came from.

    ## Example
    ```python
    state = torch.load("model.pth")
    model.load_state_dict(state)
    ```

    ## Use instead
    ```python
    state = torch.load("model.pth", map_location="cpu")
    model.load_state_dict(state)
    ```

    ## Fix safety
    Tensors load on the chosen device instead of the device they were saved
    from. With the device in scope that is where the code wants them; with
    `"cpu"`, `load_state_dict` copies them into the model wherever it lives, so
    the model ends up as before. Other arguments (`weights_only=`, …) are
    untouched.

    ## When it stays silent
    When `map_location` is given (as a keyword or positionally), or the call
    passes `*args`/`**kwargs` that may carry it. Reported without a fix: a
    load whose result is not a state dict headed for `load_state_dict` (a whole
    model, a scripted module, a tensor) outside a function with a device of its
    own: `map_location` moves even CPU-saved tensors, so a module-level
    `device` is not enough evidence of where they belong. (A checkpoint dict
    read by key, with its weights going into `load_state_dict`, counts as a
    state dict; a script that never names CUDA or a GPU and never calls
    `.to(` runs on the CPU, so what it loads at module level goes there.)

    Silent, fixed or not, when the file is one the same code writes and so
    cannot hold tensors of a GPU the run lacks: every `torch.save` of the same
    path (the same expression, also through `with open(path, "wb") as f`; a
    path naming a function's locals only in that function, `self` only in
    that class) writes values the device flow shows on the host (`x.cpu()`,
    `torch.tensor(...)` data, tuples and dicts of them, a torchvision
    dataset's or torchtext's data), or the same run saved it before the load
    (earlier in the same scope, not in another arm of an `if`/`try`), on a
    device it has. A path that comes from elsewhere (a parameter, a flag the
    file never saves to) is judged as before. Not reported (for want of a
    device to fix with) under a CUDA check (`if torch.cuda.is_available():`,
    `if args.cuda:`): the GPU is there when the line runs.
    """

    code = "FDV105"
    name = "load-map-location"
    group = "cuda-only"
    message = "Loading without `map_location` fails on a machine without the GPU the file was saved from"
    # `\b` after the word, as a look-behind: a pattern that starts with `\b`
    # is tried at every position of the text, twenty times slower.
    trigger = r"load(?<=\bload)(?:_state_dict_from_url|_url)?\s*\("

    @classmethod
    def screen(cls, screening) -> bool:
        """A call of a loader (rooted at a name an import binds, as the flow
        resolves it; a name it cannot resolve counts) without ``map_location``, ``*`` or ``**`` arguments, and
        no more positional ones than the loader's place for ``map_location``,
        that does not read a file the code writes (``_reads_what_it_wrote``)."""
        flow = analysis.flow_for(screening)
        imported = analysis.imported_names(screening)
        for call in analysis.calls_named(screening, *SHORT_NAMES):
            if any(type(arg) is ast.Starred for arg in call.args) or any(k.arg in (None, "map_location") for k in call.keywords):
                continue
            root = analysis.chain_root(call.func)
            name = flow.qualified_name(call.func)
            if (root is None or root.id not in imported) and name not in LOADERS:
                # `self.load(...)`, `Checkpointer(m).load(...)`: the rule names
                # no loader there (`load` after `from torch import *` it does)
                continue
            if name is not None and name not in LOADERS:
                continue  # json.load, np.load
            if len(call.args) <= LOADERS.get(name, max(LOADERS.values())) and not _reads_what_it_wrote(screening.shared, flow, call):
                return True
        return False

    VALID = [
        "import torch\nstate = torch.load('m.pth', map_location='cpu')\n",
        "import torch\nstate = torch.load('m.pth', 'cpu')\n",
        "import torch\nstate = torch.load(path, **options)\n",
        "import json\nstate = json.load(f)\n",
        "import torch\nm = torch.hub.load_state_dict_from_url(url, None, 'cpu')\n",
        # a dataset's download() writes the file from host tensors: torch.tensor
        # data and a torchvision dataset's labels (issue 25)
        (
            "import os\nimport torch\nfrom torchvision import datasets\n\n"
            "class Digits(torch.utils.data.Dataset):\n"
            "    def __init__(self, root, download=False):\n"
            "        self.root = root\n"
            "        if download:\n"
            "            self.download()\n"
            "        self.images, self.labels = torch.load(\n"
            "            os.path.join(self.root, 'processed', 'train.pt'))\n\n"
            "    def download(self):\n"
            "        images = torch.ByteTensor(read_images(self.root))\n"
            "        labels = datasets.MNIST(root=self.root, download=True).targets\n"
            "        with open(os.path.join(self.root, \"processed\", \"train.pt\"), 'wb') as f:\n"
            "            torch.save((images, labels), f)\n"
        ),
        # only runs where CUDA is available: no machine without a GPU reads it here
        (
            "import torch\ndef restore(path):\n    if torch.cuda.is_available():\n"
            "        net = torch.load(path, weights_only=False)\n    else:\n"
            "        net = torch.load(path, map_location='cpu', weights_only=False)\n    return net\n"
        ),
        # a cache of torchtext vectors the same script writes
        (
            "import os\nimport torch\nfrom torchtext.legacy import data\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "text = data.Field(lower=True)\n"
            "if os.path.isfile(args.vector_cache):\n"
            "    text.vocab.vectors = torch.load(args.vector_cache)\n"
            "else:\n"
            "    text.vocab.load_vectors('glove.6B.100d')\n"
            "    torch.save(text.vocab.vectors, args.vector_cache)\n"
        ),
        # features copied to the host before they are saved
        (
            "import torch\n"
            "def extract(model, loader):\n"
            "    feats = torch.cat([model(x.cuda()) for x, _ in loader])\n"
            "    torch.save(feats.cpu(), 'feats.pt')\n"
            "def evaluate():\n"
            "    feats = torch.load('feats.pt')\n"
            "    return feats.mean()\n"
        ),
        # the same run saved it a few lines above, on a device it has
        (
            "import torch\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = Net().to(device)\n"
            "for epoch in range(args.epochs):\n"
            "    train(model)\n"
            "    with open(args.save, 'wb') as f:\n"
            "        torch.save(model, f)\n"
            "with open(args.save, 'rb') as f:\n"
            "    model = torch.load(f, weights_only=False)\n"
        ),
    ]
    INVALID = [
        # torch re-exported by a module of the project
        Invalid("from common import torch\nstate = torch.load('model.pt')\n", "from common import torch\nstate = torch.load('model.pt', map_location=\"cpu\")\n"),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.device = torch.device('cuda')\n    @classmethod\n    def restored(cls, path):\n        net = cls()\n"
            "        net.load_state_dict(torch.load(path))\n        return net\n",
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.device = torch.device('cuda')\n    @classmethod\n    def restored(cls, path):\n        net = cls()\n"
            "        net.load_state_dict(torch.load(path, map_location=\"cpu\"))\n        return net\n",
        ),
        Invalid("import torch\nmodel.load_state_dict(torch.load('m.pth'))\n", "import torch\nmodel.load_state_dict(torch.load('m.pth', map_location=\"cpu\"))\n"),
        Invalid("import torch\nstate = torch.load('m.pth')\nmodel.load_state_dict(state)\n", "import torch\nstate = torch.load('m.pth', map_location=\"cpu\")\nmodel.load_state_dict(state)\n"),
        Invalid("import torch\nembedding = torch.load('emb.pt')\nembedding = embedding.cuda()\n", None),
        Invalid("import torch\nembedding = torch.load('emb.pt')\n", "import torch\nembedding = torch.load('emb.pt', map_location=\"cpu\")\n"),
        Invalid(
            "import torch\ndevice = 'cuda'\nckpt = torch.load(path)\nnet.load_state_dict(ckpt['net'])\nepoch = ckpt['epoch']\n",
            "import torch\ndevice = 'cuda'\nckpt = torch.load(path, map_location=device)\nnet.load_state_dict(ckpt['net'])\nepoch = ckpt['epoch']\n",
        ),
        Invalid(
            "import torch\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True))\n",
            "import torch\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True, map_location=device))\n",
        ),
        Invalid(
            "from torch import load\ndevice = 'cuda'\nstate = load(\n    'm.pth',\n)\nmodel.load_state_dict(state)\n",
            "from torch import load\ndevice = 'cuda'\nstate = load(\n    'm.pth',\n    map_location=device,\n)\nmodel.load_state_dict(state)\n",
        ),
        Invalid("import torch\nnet = torch.jit.load('net.pt')\nnet.to(device)\n", None),
        Invalid("import torch\ndevice = torch.device('cuda')\ndef get(path):\n    return torch.load(path, weights_only=False)\n", None),
        Invalid("import torch\nsd = torch.hub.load_state_dict_from_url(url)\n", "import torch\nsd = torch.hub.load_state_dict_from_url(url, map_location=\"cpu\")\n"),
        # `args.gpu is None` is the arm without a chosen GPU: no CUDA check
        Invalid(
            "import torch\ndef resume(args):\n    if args.gpu is None:\n        ckpt = torch.load(args.resume, weights_only=False)\n"
            "    else:\n        ckpt = torch.load(args.resume, map_location=f'cuda:{args.gpu}', weights_only=False)\n    return ckpt\n",
            None,
        ),
        # the program writes the file, but from a model on the GPU
        Invalid("import torch\ndef train(model):\n    model.cuda()\n    torch.save(model, 'net.pt')\ndef serve():\n    return torch.load('net.pt', weights_only=False)\n", None),
        # written in the other arm: this run did not save what it loads
        Invalid(
            "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\nmodel = Net().to(device)\n"
            "if args.resume:\n    model = torch.load(args.ckpt, weights_only=False)\nelse:\n    train(model)\n    torch.save(model, args.ckpt)\n",
            None,
        ),
        # `path` in one function is not `path` in another
        Invalid("import torch\ndef save(t, path):\n    torch.save(t.cpu(), path)\ndef load(path):\n    return torch.load(path)\nx = x.cuda()\n", None),
        Invalid(
            "import torch.utils.model_zoo as model_zoo\nnet.load_state_dict(model_zoo.load_url(urls['r18']))\n",
            "import torch.utils.model_zoo as model_zoo\nnet.load_state_dict(model_zoo.load_url(urls['r18'], map_location=\"cpu\"))\n",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if analysis.last_name(node.func) not in SHORT_NAMES:
            return
        position = next((LOADERS[q] for q in self.qualified_names(node.func) if q in LOADERS), None)
        if position is None:
            return
        if any(a.star for a in node.args) or any(a.keyword and a.keyword.value == "map_location" for a in node.args):
            return
        if sum(a.keyword is None for a in node.args) > position:
            return
        if self._reads_what_it_wrote(node):
            return
        facts = analysis.of(self)
        if self.qualified_names(node.func) & STATE_DICT_LOADERS or _feeds_load_state_dict(facts, node):
            # load_state_dict copies into the model wherever it lives: any
            # device is right, the one in scope saves a copy
            device = placement.existing_device(facts, node) or '"cpu"'
        else:
            # A whole pickled model, a scripted module or a tensor lands where
            # map_location says, even one saved from the CPU: only a device the
            # function itself works with says where that should be.
            device = placement.existing_device(facts, node, module_level=False)
            if device is None and facts.enclosing(node, cst.FunctionDef) is None and _runs_on_the_cpu(self.context.text):
                # a script that never names a GPU nor moves anything runs on
                # the CPU, whatever device the file was saved from
                device = '"cpu"'
            if device is None:
                if analysis.cuda_guarded(facts, node):
                    return  # under `if torch.cuda.is_available():` the GPU is there
                self.report(node, "Loading without `map_location` fails on a machine without the saving GPU; no device in scope to load onto")
                return
        new_call = analysis.with_keyword_argument(node, "map_location", device)
        self.report(node, fix=[self.replace(node, new_call)], fix_message=f"Add `map_location={device}`")

    def _reads_what_it_wrote(self, node: cst.Call) -> bool:
        """The file is one this code writes from host values, or one the same
        run saved before this load (``saved_files``): it cannot fail."""
        flow = analysis.flow_of(self)
        call = flow.node_at(*self.span(node))
        return type(call) is ast.Call and _reads_what_it_wrote(self.context.shared, flow, call)


def _reads_what_it_wrote(shared: dict, flow, call: ast.Call) -> bool:
    """``LoadMapLocation._reads_what_it_wrote`` on CPython's tree (the screen's too)."""
    path = call.args[0] if call.args and type(call.args[0]) is not ast.Starred else next((k.value for k in call.keywords if k.arg == "f"), None)
    return path is not None and saved_files(shared, flow).written_here(call, path)
