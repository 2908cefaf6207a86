"""FDV112 optimizer-before-move: optimizer state loaded before the model moves."""

from __future__ import annotations

import ast
import builtins
import re

from fixdev.engine.rule import Edit, Invalid, Rule
from fixdev.engine.source import line_start

from fixdev.analysis import file_analysis as analysis, placement
from fixdev.analysis.flow import MODULE_SELF_METHODS, OPTIMIZER, Device, What, ast_walk
from fixdev.analysis.flow.vocabulary import MODULE_WRAPPERS
from fixdev.analysis.project import LOADS_PREFIX, loaded_parameters

PARAMETER_CALLS = frozenset({"parameters", "named_parameters"})
# Module methods that may run between the optimizer and the model's move when
# the move goes first: they read or write the weights wherever they live.
UNCHANGED_BY_THE_MOVE = frozenset({"load_state_dict", "requires_grad_", "zero_grad"}) | (MODULE_SELF_METHODS & {"train", "eval"})
# Builtins that only gather parameters (``filter(lambda p: p.requires_grad, ...)``).
GATHERING = frozenset({"filter", "list", "tuple", "iter"})
_BUILTINS = frozenset(dir(builtins))
FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class OptimizerBeforeMove(Rule):
    """
    ## What it does
    Finds `optimizer.load_state_dict(...)` on a `torch.optim` optimizer built
    from a model's parameters, where the model is moved to a device
    (`model.to(device)`, `model.cuda()`) only after the state was loaded, and
    moves the model's move up to just before the optimizer is built; where
    there is no one such place (an optimizer made in several branches, the
    model run or copied between), up to just before the statement of the
    move's block that holds the load (`if args.resume: ...`), past a wrapper
    of the model (`model = nn.DataParallel(model)`: the wrapped module is
    the one moved). The finding is at the move when the fix moves it, and
    at the load when it is reported without a fix. Also reported (without
    a fix): a call of a function, of this file or another of the run, that
    loads state dicts into the model and an optimizer it is given
    (`load_epoch(path, model, optimizer)` calling `optimizer.load_state_dict`
    and `model.load_state_dict`), with the model moved only after the call;
    the optimizer is one made by `torch.optim` or given to a
    `torch.optim.lr_scheduler` class.

    ## Why is this bad?
    `Optimizer.load_state_dict` puts the loaded state (momentum buffers, Adam's
    running averages) on the device the parameters are on at that moment: the
    CPU. `model.to(device)` then moves the parameters in place, but not the
    optimizer's state, and the first `optimizer.step()` fails with `Expected
    all tensors to be on the same device` (on older PyTorch, `Expected object of
    type torch.FloatTensor but found type torch.cuda.FloatTensor`).

    ## Example
    ```python
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    optimizer.load_state_dict(checkpoint["optimizer"])
    model.to(device)
    ```

    ## Use instead
    ```python
    model = Net()
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    optimizer.load_state_dict(checkpoint["optimizer"])
    ```

    ## Fix safety
    The model is on the device earlier: when the optimizer is built and while
    the code between runs. The fix is made only when that code uses the model
    in ways the move does not change (gathering its parameters for an
    optimizer, counting them, `load_state_dict`, `train()`/`eval()`,
    `print(model)`), does not rebind it or anything the move reads, and calls
    none of the file's own functions; the move statement (with its comments,
    or its `if args.cuda:` guard) is moved whole. Moved to just before the
    load instead, the model is on the device when the state is loaded and
    through the code between (the same checks), and is moved before its
    wrapper is built rather than after: the same module ends up on the
    device. An optimizer made before an in-place move steps the moved
    parameters (`Module.to` keeps the `Parameter` objects), so a move after
    the optimizer is built and before the load is right.

    ## When it stays silent
    When the model is moved before the state is loaded, when the move is not
    known to be to a device (`model.to(dtype)`, `model.to(x)` with `x` unknown),
    for schedulers and other objects with a `load_state_dict`, and for
    optimizers whose parameters come from something other than
    `model.parameters()` (or parameter groups gathered from it before the
    optimizer is made: `params += [{"params": [v]}]` in a loop over
    `model.named_parameters()`). Reported without a fix: the move in another
    function than the load, or after a branch that also builds the model
    (`if package: model = load(package); ...; optimizer.load_state_dict(...)`
    then `if args.cuda: model.cuda()` below it), a move of the model under
    another name (`model_without_ddp = model`), a wrapper built by a call
    (`nn.DataParallel(model, device_ids=pick())`), and code between that
    uses the model otherwise (runs it, copies it, passes it to a function)
    on both paths up. Silent for a loading function that moves anything
    itself (`model.to(device)` before the load, the optimizer's state after
    it), and where the argument is not shown to be an optimizer.
    """

    code = "FDV112"
    name = "optimizer-before-move"
    group = "state"
    message = "Optimizer state loaded before the model moves stays on the old device; move the model first"
    trigger = (r"\.(?:to|cuda)\s*\(", r"optim")

    @classmethod
    def screen(cls, screening) -> bool:
        """An optimizer's ``load_state_dict``, or a call of a function that
        loads state dicts into its parameters (``visit_Module`` looks at no
        other call)."""
        flow = analysis.flow_for(screening)
        if any(flow.value(call.func.value).ref == OPTIMIZER for call in analysis.calls_named(screening, "load_state_dict") if type(call.func) is ast.Attribute):
            return True
        return "load" in screening.text and any(_loaded_by_helper(flow, call) for call in ast_walk(flow.tree) if type(call) is ast.Call and len(call.args) > 1)

    VALID = [
        # moved first: the state is loaded onto the device
        (
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\nmodel.to('cuda')\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\noptimizer.load_state_dict(state)\n"
        ),
        # a scheduler's state is not the parameters'
        (
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2).to('cuda')\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)\nscheduler.load_state_dict(state)\nmodel.to('cuda')\n"
        ),
        # no state loaded: an optimizer made before an in-place move steps the moved parameters
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel.cuda()\n",
        # .to(dtype) does not move
        (
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "optimizer.load_state_dict(state)\nmodel.to(torch.float64)\n"
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(4, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
            "optimizer.load_state_dict(state)\nmodel.to(device)\n",
            "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(4, 2)\nmodel.to(device)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
            "optimizer.load_state_dict(state)\n",
        ),
        Invalid(
            "import torch\nimport torch.nn as nn\n\n\ndef resume(model, checkpoint, use_cuda):\n"
            "    optimizer = torch.optim.Adam(model.parameters())\n    if checkpoint:\n"
            "        optimizer.load_state_dict(checkpoint['optimizer'])\n    if use_cuda:\n        model.cuda()\n    return optimizer\n",
            "import torch\nimport torch.nn as nn\n\n\ndef resume(model, checkpoint, use_cuda):\n    if use_cuda:\n        model.cuda()\n"
            "    optimizer = torch.optim.Adam(model.parameters())\n    if checkpoint:\n"
            "        optimizer.load_state_dict(checkpoint['optimizer'])\n    return optimizer\n",
        ),
        # parameter groups gathered in a loop over the model's parameters
        Invalid(
            "import torch\ndef resume(model, state, device):\n    groups = []\n    for name, p in model.named_parameters():\n"
            "        groups.append({'params': [p]})\n    optimizer = torch.optim.SGD(groups, lr=0.1)\n"
            "    optimizer.load_state_dict(state)\n    model.to(device)\n    return optimizer\n",
            "import torch\ndef resume(model, state, device):\n    groups = []\n    for name, p in model.named_parameters():\n"
            "        groups.append({'params': [p]})\n    model.to(device)\n    optimizer = torch.optim.SGD(groups, lr=0.1)\n"
            "    optimizer.load_state_dict(state)\n    return optimizer\n",
        ),
        # made in two branches: the move goes up to just before the branch holding the load
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\nif resume:\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    optimizer.load_state_dict(state)\n"
            "else:\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel.cuda()\n",
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\nmodel.cuda()\nif resume:\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    optimizer.load_state_dict(state)\n"
            "else:\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        ),
        # the model runs in between: moving it first would change that
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Linear(4, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\noptimizer.load_state_dict(state)\n"
            "print(model(torch.zeros(1, 4)))\nmodel.cuda()\n",
            None,
        ),
    ]

    def visit_Module(self, node) -> None:
        flow = analysis.flow_of(self)
        parents = analysis.ast_parents(flow)
        for load in ast_walk(flow.tree):
            if type(load) is ast.Call and type(load.func) is ast.Attribute and load.func.attr == "load_state_dict":
                self._check(flow, parents, load)
            elif type(load) is ast.Call and len(load.args) > 1:
                self._check_helper(flow, parents, load)

    def _check_helper(self, flow, parents: dict, call: ast.Call) -> None:
        """``load_checkpoint(path, model, optimizer)``, a function (of this
        file or another of the run) that loads state dicts into the model and
        an optimizer it is given, with the model moved only after the call:
        reported (what else the function does with the model is not shown)."""
        loaded = _loaded_by_helper(flow, call)
        scope = _scope_of(parents, call)
        given = [call.args[i] for i in loaded if i < len(call.args) and type(call.args[i]) is not ast.Starred]
        optimizers = [a for a in given if _is_optimizer(flow, parents, scope, a)]
        models = {chain_of(a) for a in given if a not in optimizers and chain_of(a) is not None}
        if not optimizers or not models or not isinstance(scope, (*FUNCTION_DEFS, ast.Module)):
            return
        for model in (a for a in given if chain_of(a) in models):
            before = {placement for placement, _ in flow.where(model)}
            if before and all(isinstance(placement, Device) for placement in before):
                return  # on a device when its state (and the optimizer's) is loaded
        moves = [m for m in _moves(flow, scope, models, frozenset(), any_receiver=True) if position_of(m) > position_of(call) and _runs_after(parents, call, m)]
        if moves:
            name = chain_of(call.func) or "the call"
            self.report_at(*flow.span(call), f"`{name}` loads the optimizer's state before `{chain_of(moves[0].func.value)}` moves to its device, so the state stays on the old device; move the model first")

    def _check(self, flow, parents: dict, load: ast.Call) -> None:
        optimizer = flow.value(load.func.value)
        if optimizer.ref != OPTIMIZER or not isinstance(optimizer.parts, frozenset):
            return
        scope = _scope_of(parents, load)
        if not isinstance(scope, (*FUNCTION_DEFS, ast.Module)):
            return
        makers = sorted(optimizer.parts, key=position_of)
        models: set[str] = set()
        identity: frozenset = frozenset()  # the nodes that made those models, as the flow knows them
        for maker in makers:
            owners = _model_owners(parents, maker)
            chains = {chain_of(owner) for owner in owners}
            if _scope_of(parents, maker) is not scope:
                # made in another method: only `self.model` names the same model here
                chains = {chain for chain in chains if _same_self(parents, maker, scope, chain)}
            else:
                identity |= _identity(flow, owners)
            models |= chains
        if not models:
            return
        moves = [move for move in _moves(flow, scope, models, identity) if position_of(move) > position_of(load)]
        move = next((m for m in moves if _runs_after(parents, load, m)), None)
        if move is None:
            return
        receiver = move.func.value
        before = {placement for placement, _ in flow.where(receiver)}
        if before and all(isinstance(placement, Device) for placement in before):
            return  # already on a device when the state was loaded
        moved_chain = chain_of(receiver)
        fix, fix_message, made = (), "", None
        if all(_covers(moved_chain, chain) for chain in models):
            if len(makers) == 1:
                made = self._fix(flow, parents, makers[0], load, move, moved_chain)
            if made is None:  # made in several places, or used between: up to just before the load
                made = self._fix_before_load(flow, parents, load, move, moved_chain)
            if made is not None:
                fix, fix_message = made
        if fix:  # the move is what the fix puts elsewhere: the finding is there, naming the load
            message = f"`{moved_chain}` moves to its device after its optimizer's state was loaded (line {load.lineno}), which stays on the old device; move it first"
            self.report_at(*flow.span(move), message, fix=fix, fix_message=fix_message)
        else:
            self.report_at(*flow.span(load), fix=fix, fix_message=fix_message)

    # -- the fix: the move statement goes just before the optimizer's construction ----

    def _fix(self, flow, parents: dict, maker: ast.Call, load: ast.Call, move: ast.Call, chain: str) -> tuple[tuple[Edit, ...], str] | None:
        made = _statement_of(parents, maker)
        if not (isinstance(made, (ast.Assign, ast.AnnAssign)) and made.value is maker):
            return None
        statement = _move_statement(parents, move, chain)
        if statement is None:
            return None
        block = _block_of(parents, made)
        if block is None or not any(s is statement for s in block):
            return None
        first = next(i for i, s in enumerate(block) if s is made)
        last = next(i for i, s in enumerate(block) if s is statement)
        between = block[first:last]
        if first >= last or not any(_contains(s, load) for s in between):
            return None
        if not self._between_is_unchanged(flow, parents, between, statement, move, chain):
            return None
        return self._edits(flow, block, first, last, statement, chain)

    def _fix_before_load(self, flow, parents: dict, load: ast.Call, move: ast.Call, chain: str) -> tuple[tuple[Edit, ...], str] | None:
        """The move goes up to just before the statement of its own block
        that holds the load (``if args.resume: ...``), past the code between
        that leaves it unchanged and past a wrapper of the model
        (``model = nn.DataParallel(model)``: moving the model then wrapping it
        puts the same module on the device)."""
        statement = _move_statement(parents, move, chain)
        block = _block_of(parents, statement) if statement is not None else None
        holder = _statement_of(parents, load)
        while holder is not None and not (block is not None and any(s is holder for s in block)):
            holder = parents.get(holder)
        if holder is None:
            return None
        first = next(i for i, s in enumerate(block) if s is holder)
        last = next(i for i, s in enumerate(block) if s is statement)
        between = [s for s in block[first:last] if not _wraps(flow, s, chain)]
        if first >= last or not self._between_is_unchanged(flow, parents, between, statement, move, chain):
            return None
        made = self._edits(flow, block, first, last, statement, chain)
        return None if made is None else (made[0], f"Move `{chain}` to its device before the optimizer's state is loaded")

    def _between_is_unchanged(self, flow, parents: dict, between: list, statement: ast.stmt, move: ast.Call, chain: str) -> bool:
        """Nothing between the optimizer and the move uses the model in a way
        the move changes, rebinds what the move reads, or calls the file's own
        code (which may reach the model through a global or ``self``)."""
        root = chain.split(".")[0]
        identity = flow.value(move.func.value).parts
        identity = identity if isinstance(identity, frozenset) else frozenset()
        reads = _reads(statement) - {root}
        read_chains = {c for c in (chain_of(n) for n in ast_walk(statement) if isinstance(n, ast.Attribute)) if c}
        own = _own_definitions(flow)
        for node in (n for s in between for n in ast_walk(s)):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                stored = chain_of(node)
                # `args.resume = ...` leaves the `args.cuda` the move reads alone
                rebinds = stored in reads if "." not in (stored or ".") else any(_covers(stored, c) or _covers(c, stored) for c in read_chains)
                if stored is not None and (rebinds or _covers(stored, chain) or _covers(chain, stored)):
                    return False
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in own:
                    return False
                callee = flow.value(func)
                if callee.what is What.MODULE or (isinstance(func, ast.Name) and callee.ref is None and func.id not in _BUILTINS):
                    return False  # runs a module, or a callable the code does not show: the model by another name?
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == root and "." in chain and chain_of(func) != chain:
                    if not _covers(chain, chain_of(func)):
                        return False  # self.helper(): may use self.model
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if not self._use_is_unchanged(flow, parents, node, chain, identity):
                    return False
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and identity:
                value = flow.value(node)
                if value.what is What.MODULE and isinstance(value.parts, frozenset) and value.parts & identity:
                    if not _allowed_use(flow, parents, node):  # an alias of the model
                        return False
        return True

    def _use_is_unchanged(self, flow, parents: dict, name: ast.Name, chain: str, identity: frozenset) -> bool:
        top = name
        while isinstance(parents.get(top), ast.Attribute) and parents[top].value is top:
            top = parents[top]
        used = chain_of(top) or name.id
        value = flow.value(name)
        alias = identity and value.what is What.MODULE and isinstance(value.parts, frozenset) and value.parts & identity
        if name.id != chain.split(".")[0] and not alias:
            return True
        if "." in chain and not alias and not (_covers(chain, used) or _covers(used, chain)):
            if used == name.id:
                return False  # `self` itself passed on: it reaches the model
            return True  # self.lr, self.device: another attribute
        return _allowed_use(flow, parents, top)

    def _edits(self, flow, block: list, first: int, last: int, statement: ast.stmt, chain: str) -> tuple[tuple[Edit, ...], str] | None:
        text = self.context.text
        made_start = flow.span(block[first])[0]
        move_start, move_end = flow.span(statement)
        insert_at = line_start(text, made_start)
        cut_start = line_start(text, move_start)
        indent = text[insert_at:made_start]
        if indent.strip() or text[cut_start:move_start] != indent:
            return None  # not alone on their lines, or indented differently
        after = _LINE_BREAK.search(text, move_end)
        if after is None:
            return None  # the move ends the file without a line break
        rest = text[move_end : after.start()].strip()
        if rest and not rest.startswith("#"):
            return None  # `model.cuda(); other()`
        cut_end = after.end()
        # comment lines right above a statement belong to it
        cut_start = _comments_above(text, cut_start, flow.span(block[last - 1])[1], indent)
        # above the first statement of a block is its header, never a comment line
        insert_at = _comments_above(text, insert_at, flow.span(block[first - 1])[1] if first > 0 else 0, indent)
        moved = text[cut_start:cut_end]
        # a paragraph of its own (blank lines on both sides) stays one where it goes
        blank_after = _LINE_BREAK.search(text, cut_end)
        if blank_after is not None and not text[cut_end : blank_after.start()].strip() and _blank_line_above(text, cut_start) and _blank_line_above(text, insert_at):
            moved, cut_end = moved + text[cut_end : blank_after.end()], blank_after.end()
        edits = (Edit(insert_at, insert_at, moved), Edit(cut_start, cut_end, ""))
        facts = analysis.of(self)
        anchor = facts.statement_at(made_start)
        if anchor is None:
            return None
        # the model itself is bound there: the optimizer gets its parameters
        for name in sorted(_reads(statement) - _BUILTINS - {chain.split(".")[0]}):
            if not placement.name_bound_at(facts, name, anchor):
                return None
        return edits, f"Move `{chain}` to its device before the optimizer is made"


# -- what the optimizer holds ---------------------------------------------------------


def _model_owners(parents: dict, maker: ast.Call) -> list[ast.expr]:
    """The ``X`` (a name or attribute chain) of the ``X.parameters()`` the
    optimizer gets: in its arguments, or through a name bound to them just
    before (``params = model.parameters()``)."""
    owners: list[ast.expr] = []
    arguments = [*maker.args, *(k.value for k in maker.keywords if k.arg in ("params", None))][:1] or []
    for argument in arguments:
        for node in ast_walk(argument):
            owners += _parameter_owner(node)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                bound = _sole_binding(parents, maker, node.id)
                if bound is not None:
                    for sub in ast_walk(bound):
                        owners += _parameter_owner(sub)
                owners += _gathered_owners(parents, maker, node.id)
    return owners  # modules: the moves found for them are checked to be


def _gathered_owners(parents: dict, maker: ast.Call, name: str) -> list[ast.expr]:
    """Parameter groups gathered into ``name`` before the optimizer is made
    (``params += [{"params": [value]}]`` or ``params.append(...)`` in a loop
    over ``dict(model.named_parameters()).items()``): the ``X`` of the
    ``X.parameters()`` those statements or their loops read."""
    scope = _scope_of(parents, maker)
    statement = _statement_of(parents, maker)
    if scope is None or statement is None:
        return []
    owners: list[ast.expr] = []
    for node in _own_nodes(scope):
        if not isinstance(node, (ast.AugAssign, ast.Call)) or position_of(node) >= position_of(statement):
            continue
        grows = (isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == name
        )
        if not grows:
            continue
        for sub in ast_walk(node):
            owners += _parameter_owner(sub)
        holder = parents.get(node)
        while holder is not None and holder is not scope:
            if isinstance(holder, (ast.For, ast.AsyncFor)):
                for sub in ast_walk(holder.iter):
                    owners += _parameter_owner(sub)
            holder = parents.get(holder)
    return owners


def _parameter_owner(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PARAMETER_CALLS:
        if chain_of(node.func.value) is not None:
            return [node.func.value]
    return []


def _identity(flow, owners: list[ast.expr]) -> frozenset:
    """What made the modules ``owners`` name (the flow's ``parts`` of a
    module): a move of an alias (``model_without_ddp = model``) shares it."""
    found: frozenset = frozenset()
    for owner in owners:
        value = flow.value(owner)
        if value.what is What.MODULE and isinstance(value.parts, frozenset):
            found |= value.parts
    return found


def _sole_binding(parents: dict, maker: ast.Call, name: str) -> ast.AST | None:
    """The value ``name`` has where the optimizer is made: the nearest
    statement before it, in its block, that binds ``name``, when that is a
    plain ``name = value``."""
    statement = _statement_of(parents, maker)
    block = _block_of(parents, statement) if statement is not None else None
    if block is None:
        return None
    index = next(i for i, s in enumerate(block) if s is statement)
    for earlier in reversed(block[:index]):
        stores = [n for n in ast_walk(earlier) if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)]
        if not stores:
            continue
        if isinstance(earlier, ast.Assign) and len(earlier.targets) == 1 and earlier.targets[0] is stores[0] and len(stores) == 1:
            return earlier.value
        return None
    return None


def _same_self(parents: dict, maker: ast.Call, scope: ast.AST, chain: str) -> bool:
    """``self.model`` in two methods of one class names the same model."""
    other = _scope_of(parents, maker)
    if not (isinstance(other, FUNCTION_DEFS) and isinstance(scope, FUNCTION_DEFS)):
        return False
    if parents.get(other) is not parents.get(scope) or not isinstance(parents.get(scope), ast.ClassDef):
        return False
    first = [f.args.args[0].arg if f.args.args else None for f in (other, scope)]
    return first[0] is not None and first[0] == first[1] and chain.startswith(first[0] + ".")


# -- the model's moves ------------------------------------------------------------------


def _moves(flow, scope: ast.AST, models: set[str], identity: frozenset, any_receiver: bool = False) -> list[ast.Call]:
    """``X.to(device)`` / ``X.cuda()`` in ``scope`` (not in nested functions)
    that move one of ``models`` (or a module holding it, or the same module
    under another name) onto a device; ``any_receiver``: also where the flow
    does not know ``X`` for a module (a state dict was loaded into it), as a
    statement of its own."""
    found = []
    for node in _own_nodes(scope):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("to", "cuda")):
            continue
        chain = chain_of(node.func.value)
        receiver = flow.value(node.func.value)
        unknown = any_receiver and receiver.what is What.UNKNOWN and chain in models and bool(node.args) is (node.func.attr == "to")
        if chain is None or (receiver.what is not What.MODULE and not unknown):
            continue
        alias = isinstance(receiver.parts, frozenset) and receiver.parts & identity
        if not alias and not any(_covers(chain, model) for model in models):
            continue
        after = {placement for placement, _ in flow.where(node)}
        if after and all(isinstance(placement, Device) for placement in after):
            found.append(node)
    return sorted(found, key=position_of)


def _move_statement(parents: dict, move: ast.Call, chain: str) -> ast.stmt | None:
    """The statement that is the move and nothing else: ``model.to(d)``,
    ``model = model.to(d)``, or an ``if`` holding only that (``if args.cuda:``)."""
    statement = parents.get(move)
    plain = (isinstance(statement, ast.Expr) and statement.value is move) or (
        isinstance(statement, ast.Assign)
        and statement.value is move
        and len(statement.targets) == 1
        and chain_of(statement.targets[0]) == chain
    )
    if not plain or move.func.attr not in ("to", "cuda") or any(isinstance(n, ast.Call) for a in (*move.args, *(k.value for k in move.keywords)) for n in ast_walk(a) if not _device_call(n)):
        return None
    guard = parents.get(statement)
    if isinstance(guard, ast.If) and guard.body == [statement] and not guard.orelse and not any(isinstance(n, ast.Call) and not _device_call(n) for n in ast_walk(guard.test)):
        return guard
    return statement


def _loaded_by_helper(flow, call: ast.Call) -> tuple:
    """The positions of ``call``'s arguments its callee loads a state dict
    into: a module-level function of this file, or (through the run's other
    files, ``project.loaded_parameters``) of another."""
    func = call.func
    if type(func) is ast.Name:
        found = flow.index.module.defs.get(func.id)
        if type(found) in FUNCTION_DEFS and flow.index.module.counts.get(func.id) == 1:
            return loaded_parameters(found)
    ask = getattr(flow.project, "fact", None)
    name = flow.qualified_name(func) if ask is not None and type(func) in (ast.Name, ast.Attribute) else None
    if name is None or name.startswith(("torch.", "numpy.")):
        return ()
    answer = ask(LOADS_PREFIX + name)
    return answer if isinstance(answer, tuple) and all(type(i) is int for i in answer) else ()


def _is_optimizer(flow, parents: dict, scope: ast.AST, argument: ast.expr) -> bool:
    """``argument`` is an optimizer: made by ``torch.optim``, or given first to
    a ``torch.optim.lr_scheduler`` class in the same scope."""
    if flow.value(argument).ref == OPTIMIZER:
        return True
    chain = chain_of(argument)
    for node in _own_nodes(scope) if chain is not None else ():
        if isinstance(node, ast.Call) and node.args and chain_of(node.args[0]) == chain:
            name = flow.qualified_name(node.func) or ""
            if name.startswith("torch.optim.lr_scheduler."):
                return True
    return False


def _wraps(flow, statement: ast.stmt, chain: str) -> bool:
    """``model = nn.DataParallel(model)`` (or DDP), alone or under an ``if``
    holding only it."""
    if isinstance(statement, ast.If) and len(statement.body) == 1 and not statement.orelse:
        if any(isinstance(n, ast.Call) for n in ast_walk(statement.test)):
            return False
        statement = statement.body[0]
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and chain_of(statement.targets[0]) == chain):
        return False
    wrapper = flow.value(statement.value)
    call = statement.value
    return (
        isinstance(call, ast.Call) and type(wrapper.ref) is tuple and wrapper.ref[1] in MODULE_WRAPPERS
        and bool(call.args) and chain_of(call.args[0]) == chain
        and not any(isinstance(n, ast.Call) for a in (*call.args, *(k.value for k in call.keywords)) for n in ast_walk(a))
    )


def _device_call(node: ast.AST) -> bool:
    """Calls a move may keep reading after it moves up: they have no effects."""
    if not isinstance(node, ast.Call):
        return True
    chain = chain_of(node.func) or ""
    return chain in ("torch.device", "torch.cuda.is_available", "torch.cuda.current_device") or chain.endswith(".is_available")


# -- uses of the model between the optimizer and the move ------------------------------


def _allowed_use(flow, parents: dict, node: ast.expr) -> bool:
    """``node`` (the model, or a chain through it) is used in a way that
    reads the same whether the model is on the CPU or a device."""
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        node, parent = parent, parents.get(parent)  # model.fc.parameters: climb to the method
    if isinstance(node, ast.Attribute) and isinstance(parent, ast.Call) and parent.func is node:
        method = node.attr
        if method in PARAMETER_CALLS:
            return _parameters_kept(flow, parents, parent)
        if method in UNCHANGED_BY_THE_MOVE:
            return isinstance(parents.get(parent), (ast.Expr, ast.Assign))
        return False
    # print(model)
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "print" and isinstance(parents.get(parent), ast.Expr)


def _parameters_kept(flow, parents: dict, call: ast.Call) -> bool:
    """``model.parameters()`` given to an optimizer, bound to a name, gathered
    (``filter``, comprehensions, parameter groups) into one of those, or
    counted (``sum(p.numel() for p in ...)``): the same objects after an
    in-place move."""
    node = call
    while True:
        parent = parents.get(node)
        if isinstance(parent, ast.Call) and node is not parent.func:
            if flow.value(parent).ref == OPTIMIZER:
                return True
            if not (isinstance(parent.func, ast.Name) and parent.func.id in GATHERING | {"sum"}):
                return False
            if parent.func.id == "sum":
                return _counts(node)  # a number, the same on any device
        elif isinstance(parent, ast.comprehension) and parent.iter is node:
            parent = parents.get(parent)
            if not isinstance(parent, (ast.ListComp, ast.GeneratorExp)) or not _plain_element(parent):
                return False
        elif isinstance(parent, (ast.List, ast.Tuple, ast.Dict, ast.BinOp, ast.keyword, ast.Lambda)):
            pass
        elif isinstance(parent, ast.Assign):
            return all(isinstance(target, ast.Name) for target in parent.targets)
        else:
            return False
        node = parent


def _counts(node: ast.AST) -> bool:
    """``sum(p.numel() for p in ...)``."""
    return isinstance(node, ast.GeneratorExp) and isinstance(node.elt, ast.Call) and isinstance(node.elt.func, ast.Attribute) and node.elt.func.attr == "numel"


def _plain_element(comprehension: ast.AST) -> bool:
    """``[p for p in ...]``, filtered by ``if p.requires_grad``, or counting."""
    return _counts(comprehension) or isinstance(comprehension.elt, ast.Name) and all(
        isinstance(n, (ast.Name, ast.Attribute, ast.Load, ast.UnaryOp, ast.Not, ast.BoolOp, ast.And, ast.Or, ast.comprehension, ast.Compare, ast.Constant))
        for generator in comprehension.generators
        for condition in generator.ifs
        for n in ast_walk(condition)
    )


# -- small helpers over the ast ---------------------------------------------------------


def chain_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = chain_of(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _covers(outer: str | None, inner: str | None) -> bool:
    """Moving ``outer`` moves ``inner``: the same chain, or a submodule of it."""
    return outer is not None and inner is not None and (inner == outer or inner.startswith(outer + "."))


def position_of(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _scope_of(parents: dict, node: ast.AST) -> ast.AST | None:
    node = parents.get(node)
    while node is not None and not isinstance(node, (*_SCOPES, ast.Module)):
        node = parents.get(node)
    return node


def _statement_of(parents: dict, node: ast.AST) -> ast.stmt | None:
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(node)
    return node


def _own_nodes(scope: ast.AST):
    """The nodes of ``scope``'s body, not those of functions, classes or
    lambdas inside it."""
    stack = list(reversed(scope.body)) if hasattr(scope, "body") and isinstance(scope.body, list) else []
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _block_of(parents: dict, statement: ast.stmt) -> list | None:
    """The statement list ``statement`` is in."""
    owner = parents.get(statement)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(owner, field, None)
        if isinstance(block, list) and any(s is statement for s in block):
            return block
    return None


def _contains(root: ast.AST, node: ast.AST) -> bool:
    return any(sub is node for sub in ast_walk(root))


def _runs_after(parents: dict, first: ast.AST, second: ast.AST) -> bool:
    """``second`` runs after ``first`` when both run: they sit in one list of
    statements (perhaps nested inside its entries), ``first``'s entry before
    ``second``'s; not in two branches of one ``if`` or ``try``."""
    ancestors = []
    node = _statement_of(parents, first)
    while node is not None:
        ancestors.append(node)
        node = parents.get(node)
    node = _statement_of(parents, second)
    while node is not None:
        block = _block_of(parents, node) if isinstance(node, ast.stmt) else None
        if block is not None:
            earlier = next((s for s in block if any(s is a for a in ancestors)), None)
            if earlier is not None:
                return earlier is not node and position_of(earlier) < position_of(node)
        node = parents.get(node)
    return False


def _reads(statement: ast.stmt) -> set[str]:
    return {n.id for n in ast_walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _own_definitions(flow) -> set[str]:
    """Names of the file's functions and classes."""
    return {n.name for n in ast_walk(flow.tree) if isinstance(n, (*FUNCTION_DEFS, ast.ClassDef))}


def _blank_line_above(text: str, start: int) -> bool:
    """The line before the one starting at ``start`` holds only blanks."""
    if start == 0:
        return False
    above = line_start(text, start - 1 - (start > 1 and text[start - 2 : start] == "\r\n"))
    return not text[above:start].strip()


def _comments_above(text: str, start: int, floor: int, indent: str) -> int:
    """``start`` moved up over the comment lines, indented alike, right above
    it (and below ``floor``, the end of the statement before)."""
    while start > floor:
        line_end = start - 1
        if text[line_end] == "\n" and line_end > 0 and text[line_end - 1] == "\r":
            line_end -= 1
        line_begin = line_start(text, line_end)
        if line_begin < floor:
            break
        line = text[line_begin:line_end]
        if not (line.startswith(indent) and line[len(indent) :].startswith("#")):
            break
        start = line_begin
    return start
