"""FDV103 constant-buffer: ``self.c = torch.tensor(...)`` in ``__init__`` → ``register_buffer``."""

from __future__ import annotations

import ast
from typing import Iterator

import libcst as cst

from fixdev.engine.rule import Edit, Invalid, Option, Rule

from fixdev.analysis import file_analysis as analysis
from fixdev.analysis.ast_screens import has_a_base
from fixdev.analysis.file_analysis import FACTORY_NAMES, TENSOR_FACTORIES, TENSOR_METHODS
from fixdev.analysis.flow import OwnMoves, What, ast_statements, ast_walk, own_moves

# The legacy CPU constructors (`torch.Tensor(n)`, `torch.FloatTensor(data)`)
# make plain tensors as the factories do.
LEGACY_NAMES = frozenset("Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor LongTensor IntTensor ShortTensor CharTensor ByteTensor BoolTensor".split())
CONSTRUCTORS = TENSOR_FACTORIES | {f"torch.{name}" for name in LEGACY_NAMES}
CONSTRUCTOR_NAMES = FACTORY_NAMES | LEGACY_NAMES
# Values a buffer must not stand in for: they register themselves (and move).
# Statements read whole for what they combine (a compound one's body is read statement by statement).
SIMPLE_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)
NOT_PLAIN_TENSORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Buffer"})


class ConstantBuffer(Rule):
    """
    ## What it does
    In an `nn.Module`'s `__init__`, after `super().__init__()`, rewrites
    `self.NAME = <tensor>` (a torch factory, `torch.tensor(...)` or a legacy
    CPU constructor such as `torch.Tensor(n)` / `torch.FloatTensor(data)`, possibly
    followed by tensor methods such as `.view` or `.unsqueeze`) to
    `self.register_buffer("NAME", <tensor>, persistent=False)`. The same for
    such tensors set in a method `__init__` calls (`self.init_states(x)`),
    and for `self.NAME = None` when every other statement that sets NAME sets
    a tensor and `forward` reads it (a cached mask filled in `forward`): it
    becomes
    `self.register_buffer("NAME", None, persistent=False)`, and the later
    assignments fill the buffer, which then follows `.to(device)`.
    A private name (`self.__cache`, two leading underscores) is registered
    under the name Python stores it as, `_Cls__cache` (the class's name
    without its leading underscores): `register_buffer("__cache", ...)` would
    leave every `self.__cache` read raising `AttributeError`.

    A class with its own `to(self, device)` that moves tensors one by one
    (`self.a = self.a.to(device)`, all passing the method's own arguments)
    has chosen how its tensors follow it: there, a tensor the class makes and
    that `to` forgets gets the same move, after the last one
    (`self.noise = self.noise.to(device)`), reported at `to`'s moves. This
    holds for plain classes too (a rollout store, a sampler), which have no
    buffers: there the forgotten tensor must also be read, in some method,
    in one statement with a tensor `to` moves.

    ## Why is this bad?
    A tensor stored as a plain attribute is invisible to `model.to(device)` and
    `model.cuda()`: the parameters move, the constant stays on the CPU, and the
    first `forward` on the GPU raises a device mismatch. Buffers move with the
    module.

    ## Example
    ```python
    def __init__(self):
        super().__init__()
        self.scale = torch.tensor([1.0, 2.0, 3.0])
    ```

    ## Use instead
    ```python
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]), persistent=False)
    ```

    ## Fix safety
    `persistent=False` keeps every `state_dict` unchanged, so existing
    checkpoints still load with `strict=True` (set the rule option
    `persistent = true` to save the buffer in state dicts instead; old
    checkpoints then miss the key). Float buffers now follow `.half()` and
    `.double()` casts of the module, as parameters do. So the fix is unsafe
    (applied with `--unsafe-fixes`): a module cast to half precision now casts
    the constant too. The move added to a class's own `to` keeps state dicts
    as they are and passes what the other moves pass (a dtype given to
    `to` casts the tensor as it casts its siblings); it is unsafe too, and
    incomplete: code holding the old tensor no longer sees the one the class
    keeps, and a module's `.cuda()`, `.cpu()`, `.half()` and `.float()` never
    call its `to` (they go through `nn.Module._apply`), so after any of them
    the tensor, like its siblings the override moves, is still where it was
    made. Registering the tensors as buffers is the complete fix; the move
    follows the class's own choice and leaves that to its author.

    ## When it stays silent
    When `NAME` is set anywhere else in the class to anything that is not
    known to be a tensor or `None` (a buffer cannot later take a float or an
    `nn.Parameter`), or by an augmented, annotated or unpacking assignment or
    `setattr`; when the class is not known to be a module (a class derived
    from another file's class counts only when it defines `forward` and its
    `__init__` stores a `torch.nn` layer on `self`); when `NAME` is only ever
    `None`, or is a `None` placeholder that `forward` never reads (a wrapper's
    bookkeeping need not move); when the assignment comes before
    `super().__init__()` (or there is no such call); when the class is a
    `Dataset` or another non-module (it has no `register_buffer`); when the
    tensor has `requires_grad=True` (it was probably meant as a parameter).
    For a tensor the class's own `to` moves already; in a plain class, for
    one that no method reads beside a tensor `to` moves (a host-side counter
    kept there on purpose), and wherever `to` moves to a place it does not
    take from its arguments (`self.a.to(self.device)`) or has no such moves;
    a plain class without its own `to` (its callers place its tensors).
    """

    code = "FDV103"
    fix_applicability = "unsafe"  # the buffer follows .half(): see Fix safety
    name = "constant-buffer"
    group = "mismatch"
    message = "Tensor stored as a plain attribute does not follow `.to(device)`; register it as a buffer"
    trigger = ("__init__", r"self\.\w+\s*=\s*(?:None\b|[\w.]*(?:" + analysis.FACTORY_CALL + r"|\b(?:" + "|".join(sorted(LEGACY_NAMES)) + r")\s*\())")
    options = {"persistent": Option(bool, False, "Save the new buffers in state dicts (changes their keys).")}

    @classmethod
    def screen(cls, screening) -> bool:
        """A class with ``__init__`` (and a base, or its own ``to``) whose methods set ``self.NAME`` to a
        factory's tensor, or to None where another statement sets it to
        something else, not an ``nn.Parameter``, and ``forward`` reads it (``visit_ClassDef``'s candidates,
        before it asks whether the class is a module, where ``super().__init__()``
        ends, and what else sets NAME)."""
        for node in analysis.class_definitions(screening):
            methods = [s for s in node.body if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef)]
            if not any(method.name == "__init__" for method in methods):
                continue
            # a class with no base is no module: only its own `to` makes it one the visit looks at
            plain = not has_a_base(node, analysis.imported_names(screening) | {c.name for c in analysis.class_definitions(screening)})
            moves = own_moves(node) if plain else None
            if plain and moves is None:
                continue
            values: dict[str, list[ast.expr]] = {}
            for method in methods:
                # nested functions' statements too, not nested classes': their `self` is another object
                for statement in ast_statements(method.body, enter=lambda statement: type(statement) is not ast.ClassDef):
                    if type(statement) is ast.Assign and len(statement.targets) == 1 and _is_ast_self_attribute(statement.targets[0]):
                        values.setdefault(statement.targets[0].attr, []).append(statement.value)
            for name, set_to in values.items():
                if plain and (name in moves.moves or not _read_beside_a_move(node, moves, name)):
                    continue  # moved by its `to`, or kept apart from what it moves
                if any(_made_by_a_factory(value) for value in set_to):
                    return True
                if plain:
                    continue  # a plain class's None is never reported
                others = [value for value in set_to if not (type(value) is ast.Constant and value.value is None)]
                flow = analysis.flow_for(screening)
                if (
                    0 < len(others) < len(set_to)
                    and _ast_forward_reads(methods, name)
                    and not any(type(value) is ast.Call and flow.qualified_name(value.func) in NOT_PLAIN_TENSORS for value in others)
                    and all(_made_by_a_factory(value) or flow.what(value) is What.TENSOR for value in others)
                ):
                    return True
        return False

    VALID = [
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(3))\n",
        "import torch\nclass D(torch.utils.data.Dataset):\n    def __init__(self):\n        super().__init__()\n        self.x = torch.ones(3)\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        self.c = torch.ones(3)\n        super().__init__()\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3)\n    def reset(self):\n        self.c = 1.0\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3, requires_grad=True)\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = None\n    def forward(self, x):\n        self.cache = compute(x)\n        return x\n",
        "import torch, torch.nn as nn\nfrom base import Base\nclass M(Base):\n    def __init__(self):\n        super().__init__()\n        self.scale = torch.ones(3)\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, bias):\n        super().__init__()\n        if bias:\n            self.b = nn.Parameter(torch.zeros(3))\n        else:\n            self.b = None\n",
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.n = n\n        self.c = compute(n)\n",
        # the class's own `to` moves it
        "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.c = torch.ones(3)\n    def to(self, device):\n        self.c = self.c.to(device)\n        return super().to(device)\n",
        # a plain class: the counts are never read beside what `to` moves
        "import torch\nclass S:\n    def __init__(self):\n        self.v = torch.zeros(3)\n        self.n = torch.zeros(3)\n    def to(self, device):\n        self.v = self.v.to(device)\n    def counts(self):\n        return self.n.tolist()\n",
        # a plain class without its own `to`
        "import torch\nclass S:\n    def __init__(self):\n        self.v = torch.zeros(3)\n        self.n = torch.zeros(3)\n    def total(self):\n        return self.v + self.n\n",
    ]
    INVALID = [
        # the class's own `to` forgets one of its tensors
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.scale = torch.ones(n)\n        self.noise = torch.Tensor(n)\n"
            "    def to(self, device):\n        self.scale = self.scale.to(device)\n        return super().to(device)\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.scale = torch.ones(n)\n        self.noise = torch.Tensor(n)\n"
            "    def to(self, device):\n        self.scale = self.scale.to(device)\n        self.noise = self.noise.to(device)\n        return super().to(device)\n",
        ),
        Invalid(
            "import torch\nclass Store:\n    def __init__(self, n):\n        self.r = torch.zeros(n)\n        self.m = torch.ones(n)\n"
            "    def to(self, device):\n        self.r = self.r.to(device)\n    def masked(self):\n        return self.r * self.m\n",
            "import torch\nclass Store:\n    def __init__(self, n):\n        self.r = torch.zeros(n)\n        self.m = torch.ones(n)\n"
            "    def to(self, device):\n        self.r = self.r.to(device)\n        self.m = self.m.to(device)\n    def masked(self):\n        return self.r * self.m\n",
        ),
        # a private name is registered as Python mangles it
        Invalid(
            "import torch, torch.nn as nn\nclass _Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.__w = torch.ones(3)\n"
            "    def forward(self, x):\n        return x * self.__w\n",
            "import torch, torch.nn as nn\nclass _Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer(\"_Head__w\", torch.ones(3), persistent=False)\n"
            "    def forward(self, x):\n        return x * self.__w\n",
        ),
        # a legacy CPU constructor makes a plain tensor too
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.noise = torch.Tensor(n)\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.register_buffer(\"noise\", torch.Tensor(n), persistent=False)\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.mask = None\n"
            "    def forward(self, x):\n        if self.mask is None:\n            self.mask = torch.triu(torch.ones(3, 3), 1)\n        return x @ self.mask\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer(\"mask\", None, persistent=False)\n"
            "    def forward(self, x):\n        if self.mask is None:\n            self.mask = torch.triu(torch.ones(3, 3), 1)\n        return x @ self.mask\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nfrom base import BaseModel\nclass Net(BaseModel):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(3, 3)\n        self.scale = torch.ones(3)\n    def forward(self, x):\n        return self.fc(x) * self.scale\n",
            "import torch, torch.nn as nn\nfrom base import BaseModel\nclass Net(BaseModel):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(3, 3)\n        self.register_buffer(\"scale\", torch.ones(3), persistent=False)\n    def forward(self, x):\n        return self.fc(x) * self.scale\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass Cell(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.init_states(n)\n"
            "    def init_states(self, n):\n        self.h = torch.zeros(1, n)\n    def forward(self, x):\n        self.h = (x + self.h).detach()\n        return self.h\n",
            "import torch, torch.nn as nn\nclass Cell(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.init_states(n)\n"
            "    def init_states(self, n):\n        self.register_buffer(\"h\", torch.zeros(1, n), persistent=False)\n    def forward(self, x):\n        self.h = (x + self.h).detach()\n        return self.h\n",
        ),
        Invalid(
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scale = torch.tensor([1.0, 2.0])\n",
            "import torch, torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer(\"scale\", torch.tensor([1.0, 2.0]), persistent=False)\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\nclass Base(nn.Module):\n    pass\nclass M(Base):\n    def __init__(self, n):\n        super(M, self).__init__()\n        self.pos = torch.arange(n).view(1, -1).float()\n",
            "import torch\nfrom torch import nn\nclass Base(nn.Module):\n    pass\nclass M(Base):\n    def __init__(self, n):\n        super(M, self).__init__()\n        self.register_buffer(\"pos\", torch.arange(n).view(1, -1).float(), persistent=False)\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\nclass M(nn.Linear):\n    def __init__(self):\n        nn.Linear.__init__(self, 2, 2)\n        self.mask = torch.ones(2, 2)\n",
            "import torch\nimport torch.nn as nn\nclass M(nn.Linear):\n    def __init__(self):\n        nn.Linear.__init__(self, 2, 2)\n        self.register_buffer(\"mask\", torch.ones(2, 2), persistent=False)\n",
        ),
    ]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        facts = analysis.of(self)
        is_module = node in facts.module_classes
        tree_class = self._ast_class(node)
        moves = own_moves(tree_class) if tree_class is not None else None
        if not is_module and moves is None:
            return
        init = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None:
            return
        # a plain class that moves itself (its own `to`) has no super().__init__() to wait for
        super_end = self._super_init_end(init) if is_module else facts.start(init)
        if super_end is None:
            return
        assignments = _assignments(facts, node)
        in_init = {name for name, found in assignments.items() if any(facts.enclosing(a, cst.FunctionDef) is init for a in found)}
        for method in (init, *self._helpers_of_init(node, init, super_end)):
            for statement in _own_self_assignments(facts, node, method):
                if method is init and facts.start(statement) < super_end:
                    continue
                name = statement.targets[0].target.attr.value
                if method is not init and name in in_init:
                    continue  # __init__'s own assignment is the one to register
                if moves is not None and name in moves.moves:
                    continue  # the class's own `to` moves it
                if not is_module and (_is_name(statement.value, "None") or not _read_beside_a_move(tree_class, moves, name)):
                    continue
                if self._stays_a_tensor(statement, assignments.get(name, [])) and (
                    not _is_name(statement.value, "None") or _forward_reads(node, name)
                ):
                    if moves is not None:
                        self._report_missing_move(statement, name, moves)
                        continue
                    persistent = "" if self.settings["persistent"] else ", persistent=False"
                    replacement = f'self.register_buffer("{_stored_name(node.name.value, name)}", {self.code_of(statement.value)}{persistent})'
                    self.report(statement, fix=[self.replace(statement, replacement)], fix_message=f"Register `{name}` as a buffer")

    def _ast_class(self, node: cst.ClassDef) -> ast.ClassDef | None:
        """The flow's class statement for ``node``."""
        flow = analysis.flow_of(self)
        name_start = self.span(node.name)[0]
        for candidate in flow.index.classes:
            start, end = flow.span(candidate)
            if candidate.name == node.name.value and start <= name_start < end:
                return candidate
        return None

    def _report_missing_move(self, statement: cst.Assign, name: str, moves: OwnMoves) -> None:
        """``to`` moves the class's other tensors one by one and forgets this
        one: move it there too, after the last move, with the same arguments
        (a buffer would follow ``super().to(...)`` as well, but the class has
        chosen its own way, and this keeps state dicts as they are)."""
        flow = analysis.flow_of(self)
        text = self.context.text
        statements = sorted(moves.moves.values(), key=lambda s: (s.lineno, s.col_offset))
        first, last = flow.span(statements[0])[0], flow.span(statements[-1])[1]
        line_end = text.find("\n", last)
        line_end = len(text) if line_end < 0 else line_end
        rest = text[last:line_end].strip()
        line_start = text.rfind("\n", 0, flow.span(statements[-1])[0]) + 1
        indent = text[line_start : flow.span(statements[-1])[0]]
        owner = statements[-1].targets[0].value.id
        listed = ", ".join(f"`{moved}`" for moved in moves.moves)
        message = f"`{moves.method.name}()` moves {listed} but not `{name}`, a tensor this class makes: it stays where it was made"
        fix = []
        if (not rest or rest.startswith("#")) and not indent.strip():
            content = f"\n{indent}{owner}.{name} = {owner}.{name}.{moves.method.name}({moves.arguments})"
            fix = [Edit(line_end, line_end, content)]
        # Unsafe whatever the rule's default: `.cuda()`, `.cpu()`, `.half()`
        # go through `_apply`, not this `to`, so the tensor still stays behind there.
        self.report_at(
            first, last, message, fix=fix, fix_message=f"Move `{name}` in `{moves.method.name}()` too", unsafe=True, origins=[self.span(statement)],
        )

    def _stays_a_tensor(self, statement: cst.Assign, assignments: list) -> bool:
        """``self.NAME = <constant tensor or None>`` where every other statement
        that sets NAME sets it to a tensor (or None): a buffer takes those,
        and nothing else (a float, an ``nn.Parameter``) ever comes."""
        value = statement.value
        is_none = _is_name(value, "None")
        if not (is_none or self._is_constant_tensor(value)):
            return False
        others = [a for a in assignments if a is not statement]
        if any(not isinstance(a, cst.Assign) for a in others):
            return False  # augmented, annotated, unpacked or setattr: not read
        values = [a.value for a in others]
        if any(isinstance(v, cst.Call) and self.qualified_names(v.func) & NOT_PLAIN_TENSORS for v in values):
            return False  # an optional nn.Parameter: None stands for "no parameter", not a device bug
        if not all(_is_name(v, "None") or self._is_constant_tensor(v) or self._flow_says_tensor(v) for v in values):
            return False
        return not is_none or any(not _is_name(v, "None") for v in values)

    def _flow_says_tensor(self, value: cst.BaseExpression) -> bool:
        return analysis.what_of(self, value) is What.TENSOR

    def _helpers_of_init(self, cls: cst.ClassDef, init: cst.FunctionDef, super_end: int) -> list[cst.FunctionDef]:
        """Methods ``__init__`` calls as statements (``self.init_states(x)``)
        after ``super().__init__()``: what they set, ``__init__`` sets."""
        facts = analysis.of(self)
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef) and not s.decorators}
        called = []
        for statement in init.body.body:
            if not isinstance(statement, cst.SimpleStatementLine) or facts.start(statement) < super_end:
                continue
            for small in statement.body:
                call = small.value if isinstance(small, cst.Expr) else None
                if isinstance(call, cst.Call) and _is_self_attribute(call.func) and call.func.attr.value in methods:
                    called.append(methods[call.func.attr.value])
        return [method for method in called if method is not init]

    def _super_init_end(self, init: cst.FunctionDef) -> int | None:
        """End offset of ``super().__init__(...)`` (or ``Base.__init__(self, ...)``)."""
        facts = analysis.of(self)
        for call in _walk(init.body):
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "__init__"):
                continue
            owner = call.func.value
            if (isinstance(owner, cst.Call) and _is_name(owner.func, "super")) or (analysis.is_name_chain(owner) and call.args and _is_name(call.args[0].value, "self")):
                return facts.end(call)
        return None

    def _is_constant_tensor(self, value: cst.BaseExpression) -> bool:
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and not self.qualified_names(value.func) & CONSTRUCTORS:
            if value.func.attr.value not in TENSOR_METHODS or value.func.attr.value in ("numpy", "tolist", "item"):
                return False
            value = value.func.value
        if not isinstance(value, cst.Call) or not self.qualified_names(value.func) & CONSTRUCTORS:
            return False
        grad = analysis.keyword(value, "requires_grad")
        return grad is None or _is_name(grad.value, "False")


def _stored_name(cls: str, name: str) -> str:
    """The name ``self.NAME`` is stored under in a method of class ``cls``:
    Python mangles a private ``__name`` (two leading underscores, at most one
    trailing) to ``_Cls__name``, the class's name without its leading
    underscores (a class named only underscores mangles nothing)."""
    owner = cls.lstrip("_")
    if not name.startswith("__") or name.endswith("__") or not owner:
        return name
    return f"_{owner}{name}"


def _is_ast_self_attribute(node: ast.expr) -> bool:
    return type(node) is ast.Attribute and type(node.value) is ast.Name and node.value.id == "self"


def _read_beside_a_move(cls: ast.ClassDef, moves: OwnMoves, name: str) -> bool:
    """A method of a plain class reads ``self.NAME`` in one statement with an
    attribute its ``to`` moves: the two are meant to live together (one kept
    on the host on purpose is not read beside the moved ones)."""
    for method in cls.body:
        if type(method) not in (ast.FunctionDef, ast.AsyncFunctionDef) or method.name == "__init__" or method is moves.method:
            continue
        for statement in ast_statements(method.body):
            if type(statement) not in SIMPLE_STATEMENTS:
                continue
            indices = {id(n) for sub in ast_walk(statement) if type(sub) is ast.Subscript for n in ast_walk(sub.slice)}
            read = {n.attr for n in ast_walk(statement) if _is_ast_self_attribute(n) and type(n.ctx) is ast.Load and id(n) not in indices}
            if name in read and read & set(moves.moves):
                return True  # (a host index of a device tensor is fine: only reads outside an index count)
    return False


def _made_by_a_factory(value: ast.expr) -> bool:
    """``torch.arange(n).view(1, -1)``: a factory call under tensor methods
    (what ``_is_constant_tensor`` accepts, names unresolved)."""
    while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr not in CONSTRUCTOR_NAMES:
        if value.func.attr not in TENSOR_METHODS:
            return False
        value = value.func.value
    if type(value) is not ast.Call:
        return False
    func = value.func
    return (func.attr if type(func) is ast.Attribute else getattr(func, "id", None)) in CONSTRUCTOR_NAMES


def _ast_forward_reads(methods: list[ast.stmt], name: str) -> bool:
    return any(
        method.name == "forward" and any(_is_ast_self_attribute(node) and node.attr == name for node in ast_walk(method))
        for method in methods
    )


def _forward_reads(cls: cst.ClassDef, name: str) -> bool:
    """``forward`` reads ``self.NAME``: a tensor cached there for the
    computation must follow the module's device (one kept for other uses,
    such as a wrapper's bookkeeping, need not, so a None placeholder for it is
    left alone)."""
    forward = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"), None)
    return forward is not None and any(_is_self_attribute(node) and node.attr.value == name for node in _walk(forward.body))


def _is_name(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_self_attribute(node: cst.CSTNode) -> bool:
    """``self.X``."""
    return isinstance(node, cst.Attribute) and _is_name(node.value, "self")


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and everything under it, in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _setters_by_class(facts: "analysis.FileAnalysis") -> dict[cst.ClassDef, list[cst.CSTNode]]:
    """Assignments and ``setattr(...)`` calls of the file, under the class
    they are in: one pass over the file's node list instead of a matcher
    walk per class (matchers cost far more per node)."""
    if "setters_by_class" not in facts.shared:
        by_class: dict[cst.ClassDef, list[cst.CSTNode]] = {}
        for node in facts.index_order():
            kind = type(node)
            if kind in (cst.Assign, cst.AugAssign, cst.AnnAssign) or (kind is cst.Call and type(node.func) is cst.Name and node.func.value == "setattr"):
                cls = facts.enclosing(node, cst.ClassDef)
                if cls is not None:
                    by_class.setdefault(cls, []).append(node)
        facts.shared["setters_by_class"] = by_class
    return facts.shared["setters_by_class"]


def _own_self_assignments(facts: "analysis.FileAnalysis", cls: cst.ClassDef, method: cst.FunctionDef) -> list[cst.Assign]:
    """``self.NAME = value`` statements of ``method`` itself (not of functions
    nested in it), one target each."""
    return [
        node
        for node in _setters_by_class(facts).get(cls, ())
        if type(node) is cst.Assign
        and len(node.targets) == 1
        and type(node.targets[0].target) is cst.Attribute
        and type(node.targets[0].target.value) is cst.Name
        and node.targets[0].target.value.value == "self"
        and facts.enclosing(node, cst.FunctionDef) is method
    ]


def _assignments(facts: "analysis.FileAnalysis", cls: cst.ClassDef) -> dict[str, list[cst.CSTNode]]:
    """Every statement in the class that sets ``self.NAME``, per NAME: plain
    assignments, and augmented, annotated or unpacking ones and ``setattr``."""
    found: dict[str, list[cst.CSTNode]] = {}
    setters = _setters_by_class(facts).get(cls, ())
    for node in setters:
        if type(node) is cst.Call:
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        plain = isinstance(node, cst.Assign) and len(targets) == 1 and _is_self_attribute(targets[0])
        for target in targets:
            for attribute in [target] if _is_self_attribute(target) else [n for n in _walk(target) if _is_self_attribute(n)]:
                found.setdefault(attribute.attr.value, []).append(node if plain else cst.Pass())
    for call in setters:
        if type(call) is cst.Call and len(call.args) >= 2 and isinstance(call.args[1].value, cst.SimpleString):
            found.setdefault(call.args[1].value.evaluated_value, []).append(cst.Pass())  # never rewrite what setattr also sets
    return found
