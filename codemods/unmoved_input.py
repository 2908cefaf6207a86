"""FDV107 unmoved-input: a host batch fed to a model on a device gets moved."""

from __future__ import annotations

import ast

import libcst as cst

from fixdev.engine.rule import Edit, Invalid, Rule

from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.flow import ast_walk

# Calls that read a tensor's data on the host: a value used this way after
# the move would now fail, so such values are reported, not moved.
HOST_READS = frozenset({"numpy"})
NUMPY_MODULES = ("np", "numpy")


class UnmovedInput(Rule):
    """
    ## What it does
    Finds tensors that live on the CPU (a `DataLoader` batch, a
    `torch.from_numpy` result, the parts of `next(iter(loader))`) and reach a
    model or a tensor that lives on a device, and moves them where they are
    made: the first line of the loop over the loader becomes
    `images, labels = images.to(device), labels.to(device)`; after an
    assignment, `obs = obs.to(device)`. Only the values that reach the device
    are moved (labels only when they meet the model's output, in the loss),
    to the device the model or tensor they meet was moved to.

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
    Only the device of the moved tensors changes. A tensor moved to the GPU
    can no longer be read with `.numpy()`: values that are also read that way
    are reported, not moved.

    ## When it stays silent
    When the model and the data move together under the same condition
    (`if args.cuda:`), when where either lives is not known (a function's
    parameter, a dataset that moves its own tensors, `torch.set_default_device`),
    and for factories such as `torch.zeros(n)` (see `factory-device`).
    Silent in the CPU arm of a CUDA test (the `else:` of `if use_cuda:`, the
    body of `if not args.cuda:`) when what is on the device got there only in
    that same test's CUDA arm (`if use_cuda: model.cuda()`): on every run
    both sides are then on the CPU. A model moved whatever the flag says is
    still a finding there.
    Reported without a fix: a value made elsewhere (a parameter, a call
    result), a one-line loop body, a device that is not bound where the move
    would go, and values also read with `.numpy()` or NumPy.
    """

    code = "FDV107"
    name = "unmoved-input"
    group = "mismatch"
    message = "Tensor on the CPU reaches a model or tensor on a device; move it there"
    trigger = r"\.(?:to|cuda)\s*\("

    @classmethod
    def screen(cls, screening) -> bool:
        return analysis.has_sink(screening, "module-input", "operand")

    VALID = [
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\nfor x, y in loader:\n    out = model(x)\n",
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
    ]
    INVALID = [
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
    ]

    def visit_Module(self, node: cst.Module) -> None:
        flow = analysis.flow_of(self)
        groups: dict[tuple, list] = {}  # (kind, statement) -> sinks moved there
        names: dict[tuple, set[str]] = {}
        for sink in flow.sinks():
            if sink.kind not in ("module-input", "operand"):
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
                self.report_at(*flow.span(sink.value), fix=fix, fix_message=fix_message, origins=origins if len(origins) == len(sink.origins) else ())

    def _fix(self, flow, site: tuple, names: set[str], sinks: list) -> tuple[tuple[Edit, ...], str] | None:
        kind, statement = site
        devices = {sink.device for sink in sinks}
        if len(devices) != 1 or None in devices:
            return None
        (device,) = devices
        names = sorted(names, key=lambda name: min(_positions(statement, name)))  # as the target reads
        if _read_on_host_later(flow, statement, kind, names):
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
        line = f"{', '.join(names)} = {', '.join(f'{name}.to({device})' for name in names)}"
        edit = placement.lines_before(self, block, index, [line])
        return (edit,), f"Move {', '.join(f'`{n}`' for n in names)} to `{device}`"


def _positions(statement: ast.stmt, name: str) -> list[tuple]:
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
        return None
    ((kind, statement, name),) = sites
    return kind, statement, frozenset({name})


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
        if isinstance(value, ast.Name) and value.id == statement.targets[0].id:
            return value.id, statement
    return None, None


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


def _read_on_host_later(flow, statement: ast.stmt, kind: str, names: list[str]) -> bool:
    """``x.numpy()`` or ``np.f(x)`` for a moved ``x`` (a name or
    ``batch["key"]``) in the code that runs after the move: the loop's body,
    or what follows the assignment in its function (or module)."""
    moved = {ast.dump(ast.parse(name, mode="eval").body) for name in names}
    if kind == "loop":
        roots, after = statement.body, (0, 0)
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
            if isinstance(func, ast.Attribute) and func.attr in HOST_READS and ast.dump(func.value) in moved:
                return True
            root_name = func
            while isinstance(root_name, ast.Attribute):
                root_name = root_name.value
            if isinstance(root_name, ast.Name) and root_name.id in NUMPY_MODULES and any(ast.dump(a) in moved for a in sub.args):
                return True
    return False
