"""FDV105 load-map-location: ``torch.load(f)`` → ``torch.load(f, map_location=...)``."""

from __future__ import annotations

import libcst as cst

from fixdev.rule import Invalid, Rule

from . import analysis

# loader → index of map_location among its positional parameters
LOADERS = {"torch.load": 1, "torch.jit.load": 1, "torch.hub.load_state_dict_from_url": 2}


class LoadMapLocation(Rule):
    """
    ## What it does
    Adds `map_location=` to `torch.load`, `torch.jit.load` and
    `torch.hub.load_state_dict_from_url` calls that have none: the device in
    scope (a `device`/`dev` parameter, a name bound to `torch.device(...)` or
    a `"cuda"`/`"cpu"` string, `self.device`), else `"cpu"`.

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
    from. `load_state_dict` copies them into the model wherever it lives, so
    state dicts behave as before; a whole pickled model or a tensor loaded with
    `"cpu"` now starts on the CPU and must be moved. Other arguments
    (`weights_only=`, …) are untouched.

    ## When it stays silent
    When `map_location` is given (as a keyword or positionally), or the call
    passes `*args`/`**kwargs` that may carry it.
    """

    code = "FDV105"
    name = "load-map-location"
    message = "Loading without `map_location` fails on a machine without the GPU the file was saved from"
    trigger = r"\bload(?:_state_dict_from_url)?\s*\("

    VALID = [
        "import torch\nstate = torch.load('m.pth', map_location='cpu')\n",
        "import torch\nstate = torch.load('m.pth', 'cpu')\n",
        "import torch\nstate = torch.load(path, **options)\n",
        "import json\nstate = json.load(f)\n",
        "import torch\nm = torch.hub.load_state_dict_from_url(url, None, 'cpu')\n",
    ]
    INVALID = [
        Invalid("import torch\nstate = torch.load('m.pth')\n", "import torch\nstate = torch.load('m.pth', map_location=\"cpu\")\n"),
        Invalid(
            "import torch\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True))\n",
            "import torch\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True, map_location=device))\n",
        ),
        Invalid(
            "from torch import load\ndevice = 'cuda'\nstate = load(\n    'm.pth',\n)\n",
            "from torch import load\ndevice = 'cuda'\nstate = load(\n    'm.pth', map_location=device,\n)\n",
        ),
        Invalid("import torch\nnet = torch.jit.load('net.pt')\n", "import torch\nnet = torch.jit.load('net.pt', map_location=\"cpu\")\n"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if analysis.last_name(node.func) not in ("load", "load_state_dict_from_url"):
            return
        position = next((LOADERS[q] for q in self.qualified_names(node.func) if q in LOADERS), None)
        if position is None:
            return
        if any(a.star for a in node.args) or any(a.keyword and a.keyword.value == "map_location" for a in node.args):
            return
        if sum(a.keyword is None for a in node.args) > position:
            return
        device = analysis.of(self).device_at(node) or '"cpu"'
        args = list(node.args)
        new_arg = cst.Arg(value=cst.parse_expression(device), keyword=cst.Name("map_location"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        if args:
            last = args[-1]
            if isinstance(last.comma, cst.Comma):  # a trailing comma stays trailing
                new_arg = new_arg.with_changes(comma=last.comma)
                args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            else:
                args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        self.report(node, fix=[self.replace(node, node.with_changes(args=[*args, new_arg]))], fix_message=f"Add `map_location={device}`")
