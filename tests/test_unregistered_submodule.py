"""FDV113 unregistered-submodule: the torch facts its lists stand for, and the
shapes its own examples leave out (what keeps a fix back, what keeps it silent)."""

from __future__ import annotations

import pytest

from fixdev.codemods.unregistered_submodule import OWN_NOTHING, MODULE_DICT_ATTRIBUTES, STATEFUL_LAYERS, UnregisteredSubmodule
from fixdev.engine.core import Engine

torch = pytest.importorskip("torch")
nn = torch.nn


def test_reserved_keys_cover_what_module_and_parameter_dicts_refuse():
    # a key spelled like one of their attributes raises "attribute ... already exists"
    public = {n for cls in (nn.ModuleDict, nn.ParameterDict) for n in dir(cls()) if not n.startswith("_")}
    assert public <= MODULE_DICT_ATTRIBUTES, sorted(public - MODULE_DICT_ATTRIBUTES)
    with pytest.raises(KeyError):
        nn.ModuleDict({"keys": nn.Linear(1, 1)})


def test_stateful_layers_are_torch_layers_and_the_rest_own_nothing():
    assert all(isinstance(getattr(nn, name), type) and issubclass(getattr(nn, name), nn.Module) for name in STATEFUL_LAYERS)
    arguments = {"Unflatten": (1, (2, 2))}
    for name in OWN_NOTHING:
        layer = getattr(nn, name)(*arguments.get(name, ()))
        assert not list(layer.parameters()) and not list(layer.buffers()), name


def test_module_list_and_dict_support_the_uses_the_rule_calls_reads():
    # reads the rule lets through: index, iterate, len, unpack, `in`; dict: items/keys/values/[k]
    layers = nn.ModuleList([nn.Linear(1, 1), nn.Linear(1, 1)])
    first, second = layers
    assert layers[0] is first and len(layers) == 2 and second in layers and list(reversed(layers))[0] is second
    heads = nn.ModuleDict({"a": nn.Linear(1, 1)})
    assert "a" in heads and list(heads.keys()) == ["a"] and heads["a"] is next(iter(heads.values()))
    # and the ones that make it report without a fix
    assert not hasattr(heads, "get") and not hasattr(layers, "index")


def _findings(code: str):
    return Engine([UnregisteredSubmodule], unsafe_fixes=True).lint(code)


HEAD = "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
FORWARD = "    def forward(self, x):\n        for layer in self.layers:\n            x = layer(x)\n        return x\n"


@pytest.mark.parametrize(
    "body",
    [
        # registered one by one: nothing stays behind
        "        self.layers = [nn.Linear(4, 4) for _ in range(n)]\n        for i, layer in enumerate(self.layers):\n"
        "            self.add_module(f'layer{i}', layer)\n",
        # each layer also set with setattr
        "        self.layers = []\n        for i in range(n):\n            layer = nn.Linear(4, 4)\n"
        "            setattr(self, f'fc{i}', layer)\n            self.layers.append(layer)\n",
        # set twice: which value holds is not the rule's to say
        "        self.layers = [nn.Linear(4, 4)]\n        if n > 1:\n            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])\n",
        # set before super().__init__(): a ModuleList there raises
        "        pass\n    def setup(self):\n        self.layers = [nn.Linear(4, 4)]\n",
        # a name the analysis cannot trace to a torch.nn layer
        "        self.layers = [make_layer(4) for _ in range(n)]\n",
    ],
)
def test_silent(body):
    assert _findings(HEAD + body + FORWARD) == []


@pytest.mark.parametrize(
    "body, extra, reason",
    [
        ("        self.layers = [nn.Linear(4, 4) for _ in range(n)]\n        self.first = self.layers[0]\n", "", "registered as an attribute too"),
        ("        self.layers = [nn.Linear(4, 4) for _ in range(n)]\n        init_weights(self.layers)\n", "", "passed to a function"),
        ("        self.layers = [nn.Linear(4, 4) for _ in range(n)]\n", "from torch.distributed.fsdp import fully_shard\n", "wrapper"),
        ("        self.layers = [nn.Linear(4, 4) for _ in range(n)]\n", "llm = AutoModel.from_pretrained('x', device_map='auto')\n", "wrapper"),
        # an attribute aliases the list: never fixed (here the alias even keeps it silent)
        ("        self.ema_layers = [nn.Linear(4, 4)]\n        self.layers = self.ema_layers\n", "", None),
    ],
)
def test_reported_without_a_fix(body, extra, reason):
    findings = _findings(HEAD + body + FORWARD + extra)
    if reason is None:
        assert all(f.fix is None for f in findings)
        return
    assert findings and all(f.fix is None for f in findings)
    assert any(reason in f.message for f in findings), [f.message for f in findings]


def test_fix_spells_the_container_through_the_files_imports():
    code = "from torch import nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
        "        self.heads = dict(cls=nn.Linear(4, 2), box=nn.Linear(4, 4))\n" \
        "    def forward(self, x):\n        return [h(x) for h in self.heads.values()]\n"
    fixed = Engine([UnregisteredSubmodule], unsafe_fixes=True).fix(code).text
    assert "self.heads = nn.ModuleDict(dict(cls=nn.Linear(4, 2), box=nn.Linear(4, 4)))" in fixed
    # without --unsafe-fixes nothing is applied
    assert Engine([UnregisteredSubmodule]).fix(code).text == code


def test_fixed_module_moves_its_layers():
    code = HEAD + "        self.layers = [nn.Linear(4, 4) for _ in range(n)]\n" + FORWARD
    for source, registered in ((code, False), (Engine([UnregisteredSubmodule], unsafe_fixes=True).fix(code).text, True)):
        namespace: dict = {}
        exec(compile(source, "<fdv113>", "exec"), namespace)
        model = namespace["M"](2).to(torch.float64)  # .to() reaches only what is registered
        assert all(layer.weight.dtype == (torch.float64 if registered else torch.float32) for layer in model.layers)
        assert len(list(model.parameters())) == (4 if registered else 0)


def test_a_weighted_loss_is_called_a_loss_not_a_model():
    # the weight comes from the caller: where it lives is not shown, so the
    # message says only that the loss holds it as a buffer
    from tests.conftest import FIXTURES

    code = (FIXTURES / "unregistered-submodule" / "loss_weight_from_the_caller.before.py").read_text()
    messages = [f.message for f in _findings(code)]
    assert messages and all(m.startswith("Loss `criterion` holds its weight as a buffer") for m in messages), messages
    assert not any("Model" in m or "on the host" in m for m in messages)


def _screened(code: str) -> bool:
    import ast

    from fixdev.engine.rule import Screening

    return UnregisteredSubmodule.screen(Screening(code, ast.parse(code)))


_HEAD = "import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"


@pytest.mark.parametrize(
    "body, passes",
    [
        # a layer list that forward reads: the libcst visit must look
        ("        self.layers = [nn.Linear(d, d) for _ in range(2)]\n    def forward(self, x):\n        return self.layers[0](x)\n", True),
        # the file's own class, found by its name
        ("        self.blocks = [Block(), Block()]\n    def forward(self, x):\n        return self.blocks[0](x)\nclass Block(nn.Module):\n    pass\n", True),
        # elements made by builtins (dict, int): no import names them, nothing can be a layer
        ("        self.info = [dict(c=d, r=2)]\n        self.size = (int(d), int(d))\n    def forward(self, x):\n        return x, self.info, self.size\n", False),
        # a layer list no other method reads: never reported
        ("        self.layers = [nn.Linear(d, d) for _ in range(2)]\n    def forward(self, x):\n        return x\n", False),
        # one element the rule cannot take for a construction: no holder
        ("        self.pair = [nn.Linear(d, d), d]\n    def forward(self, x):\n        return self.pair[0](x)\n", False),
    ],
)
def test_the_screen_passes_only_containers_the_visit_may_report(body, passes):
    code = _HEAD + body
    assert _screened(code) is passes
    if not passes:  # (and the visit agrees: nothing to report)
        assert not [f for f in Engine([UnregisteredSubmodule]).lint(code, triggers=False) if f.code == "FDV113"]
