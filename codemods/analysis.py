"""What the rules need to know about a file beyond the syntax, computed once per
file and shared by every rule: which classes are ``nn.Module``s, what a name
holds (a module, a tensor and where it lives, a device), and which device is at
hand at a point.

Everything here is deliberately conservative: ``UNKNOWN`` is the answer
whenever the code does not show otherwise, and rules treat it as "do not fix".
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Iterable

import libcst as cst
import libcst.matchers as m

from fixdev.rule import CharSpanProvider, Edit, dotted

from . import placement
from .flow import FLAG_NAMES, LIGHTNING_MODULES

if TYPE_CHECKING:
    from fixdev.rule import Rule, RuleContext

    from .flow import FileFlow


class Kind(enum.Enum):
    UNKNOWN = "unknown"
    MODULE = "module"  # an nn.Module instance
    DEVICE_TENSOR = "device tensor"  # lives where the model / inputs live
    HOST_TENSOR = "host tensor"  # made by a factory without device=: on the CPU
    TENSOR = "tensor"  # a tensor, device not known
    NUMPY = "numpy array"
    DEVICE = "device"
    LOADER = "data loader"

    @property
    def is_tensor(self) -> bool:
        return self in (Kind.DEVICE_TENSOR, Kind.HOST_TENSOR, Kind.TENSOR)


# Factories: fresh tensors, on the CPU unless device= is given.
TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "zeros ones empty full rand randn randint randperm arange range linspace logspace eye "
        "tensor as_tensor scalar_tensor from_numpy empty_strided tril_indices triu_indices "
        "bartlett_window blackman_window hamming_window hann_window kaiser_window"
    ).split()
)
# For the rules' text pre-filters: a call of any factory, by its last name.
FACTORY_CALL = r"\b(?:%s)\s*\(" % "|".join(sorted({name.split(".")[-1] for name in TENSOR_FACTORIES}))
LIKE_FACTORIES = frozenset(
    f"torch.{name}_like" for name in "zeros ones empty full rand randn randint".split()
)
# torch functions that return something other than a tensor.
NON_TENSOR_TORCH = frozenset(
    f"torch.{name}"
    for name in (
        "device load save is_tensor is_floating_point is_complex numel manual_seed seed "
        "get_default_dtype set_default_dtype set_default_device no_grad enable_grad "
        "inference_mode set_grad_enabled is_grad_enabled compile jit.load jit.script jit.trace "
        "Size dtype finfo iinfo get_num_threads set_num_threads typename"
    ).split()
)
# Tensor methods whose result is a tensor on the receiver's device.
TENSOR_METHODS = frozenset(
    (
        "abs add addmm all any amax amin argmax argmin argsort bmm bool byte ceil char chunk "
        "clamp clamp_ clip clone contiguous cos cumsum detach div double exp expand expand_as "
        "fill_ flatten flip float floor gather half int log log_softmax long masked_fill "
        "masked_fill_ matmul max mean min mm mul neg norm normal_ permute pow relu repeat "
        "repeat_interleave reshape roll round rsqrt sigmoid sign sin softmax sort split sqrt "
        "square squeeze std sub sum t tanh topk transpose tril triu type_as uniform_ unbind "
        "unflatten unsqueeze var view view_as where zero_ bfloat16 numpy tolist item"
    ).split()
)
# Methods an nn.Module has too: calling them shows nothing about tensors.
MODULE_METHODS = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "type", "requires_grad_", "zero_", "share_memory_", "apply", "train", "eval"})
# Attribute reads or methods that show a value is a tensor.
TENSOR_EVIDENCE = frozenset({"shape", "device", "dtype", "size", "dim", "ndim", "numel", "grad"}) | (TENSOR_METHODS - MODULE_METHODS)
MOVES = frozenset({"to", "cuda", "cpu", "type_as"})
NON_TENSOR_METHODS = frozenset({"size", "dim", "item", "tolist", "numel", "numpy", "ndimension", "element_size"})
NOT_MODULES = frozenset({"torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.UninitializedParameter", "torch.nn.UninitializedBuffer"})
PARAMETER_TYPES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})


def of(rule: "Rule") -> "FileAnalysis":
    """The analysis of the file ``rule`` is looking at, made on first use."""
    shared = rule.context.shared
    if "analysis" not in shared:
        shared["analysis"] = FileAnalysis(rule.context)
    return shared["analysis"]


def flow_of(rule: "Rule") -> "FileFlow":
    """The device flow (``flow.FileFlow``) of the file ``rule`` is looking at,
    made on first use."""
    shared = rule.context.shared
    if "flow" not in shared:
        from .flow import FileFlow

        # calls of the run's other files' functions: codemods.project's facts, when the engine has them
        shared["flow"] = FileFlow(rule.context.text, project=rule.context.project)
    return shared["flow"]


def ast_parents(flow: "FileFlow") -> dict:
    """Every node of the flow's ``ast`` tree → its parent, made once per file."""
    parents = getattr(flow, "parents", None)
    if parents is None:
        import ast

        parents = {child: parent for parent in ast.walk(flow.tree) for child in ast.iter_child_nodes(parent)}
        flow.parents = parents
    return parents


def fixed_by_a_bare_move(flow: "FileFlow", name: str, origin) -> bool:
    """A statement ``name.to(...)`` / ``name.cuda()`` whose result is dropped
    follows ``origin`` in its function: the value was meant to move, and
    ``cuda-call`` / ``discarded-to`` make that statement assign, which is the
    whole fix (another rule moving it again would be noise)."""
    import ast

    parents = ast_parents(flow)
    scope = parents.get(origin)
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        scope = parents.get(scope)
    for statement in ast.walk(scope if scope is not None else flow.tree):
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and statement.lineno > origin.lineno:
            func = statement.value.func
            if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda") and isinstance(func.value, ast.Name) and func.value.id == name:
                return True
    return False


def last_name(node: cst.CSTNode) -> str | None:
    """``ones`` for ``torch.ones``, ``t.ones`` and ``ones``: a cheap check
    before asking for qualified names."""
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Name):
        return node.value
    return None


def is_name_chain(node: cst.CSTNode) -> bool:
    """``x``, ``self.x``, ``a.b.c``: names only, nothing evaluated but lookups."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def chain_root(node: cst.BaseExpression) -> cst.Name | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def merge(kinds: Iterable[Kind]) -> Kind:
    kinds = set(kinds)
    if len(kinds) == 1:
        return kinds.pop()
    if kinds and all(k.is_tensor for k in kinds):
        return Kind.TENSOR
    return Kind.UNKNOWN


class FileAnalysis:
    def __init__(self, context: "RuleContext") -> None:
        self.module = context.module
        self._context = context
        self._parents = context.parents()
        self._envs: dict[cst.CSTNode, dict[str, Kind]] = {}
        self._attributes: dict[cst.ClassDef, dict[str, Kind]] = {}
        self._parameters: dict[cst.ClassDef, set[str]] = {}  # filled by attributes()
        self._evidence: dict[cst.FunctionDef, set[str]] = {}
        self.module_classes = self._find_module_classes()

    # -- basic facts ---------------------------------------------------------------

    def qnames(self, node: cst.CSTNode) -> set[str]:
        return self._context.qualified_names(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def start(self, node: cst.CSTNode) -> int:
        return self._context.metadata(CharSpanProvider)[node].start

    def end(self, node: cst.CSTNode) -> int:
        span = self._context.metadata(CharSpanProvider)[node]
        return span.start + span.length

    def statement_at(self, offset: int) -> cst.CSTNode | None:
        """The block-level statement (a line or a compound statement) that
        starts at character ``offset``, for rules that find sites in ``ast``."""
        if "statements" not in self.shared:
            spans = self._context.metadata(CharSpanProvider)
            self.shared["statements"] = {
                spans[n].start: n for n in reversed(self.index_order()) if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            }
        return self.shared["statements"].get(offset)

    def call_at(self, start: int, end: int) -> cst.Call | None:
        """The call whose span is ``text[start:end]``, for rules that find
        sites in ``ast`` (whose call spans exclude enclosing parentheses)."""
        if "calls" not in self.shared:
            spans = self._context.metadata(CharSpanProvider)
            self.shared["calls"] = {(spans[n].start, spans[n].start + spans[n].length): n for n in self.index_order() if type(n) is cst.Call}
        return self.shared["calls"].get((start, end))

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        while node is not None and not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            node = self.parent(node)
        return node

    def enclosing(self, node: cst.CSTNode, kind: type) -> cst.CSTNode | None:
        node = self.parent(node)
        while node is not None and not isinstance(node, kind):
            node = self.parent(node)
        return node

    def enclosing_method(self, node: cst.CSTNode) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The module class and its method that contain ``node``, if any."""
        func = self.enclosing(node, cst.FunctionDef)
        while func is not None:
            owner = self.parent(self.parent(func))  # FunctionDef → IndentedBlock → ClassDef
            if isinstance(owner, cst.ClassDef):
                return (owner, func) if owner in self.module_classes else None
            func = self.enclosing(func, cst.FunctionDef)
        return None

    # -- which classes are modules -----------------------------------------------

    def _find_module_classes(self) -> set[cst.ClassDef]:
        classes = self._context.index().classes
        found: set[cst.ClassDef] = set()
        local_names: set[str] = set()
        changed = True
        while changed:  # a class may derive from a module class defined later in the file
            changed = False
            for cls in classes:
                if cls in found:
                    continue
                for base in cls.bases:
                    names = self.qnames(base.value) | ({dotted(base.value)} - {None})
                    if any(self._is_module_base(n) for n in names) or names & local_names:
                        found.add(cls)
                        local_names.add(cls.name.value)
                        changed = True
                        break
        return found | {cls for cls in classes if cls not in found and self._behaves_like_a_module(cls)}

    def _behaves_like_a_module(self, cls: cst.ClassDef) -> bool:
        """A class derived from a class of another file (``class Net(BaseModel)``)
        is taken for a module only when it acts as one on its own: it defines
        ``forward`` and its ``__init__`` stores a ``torch.nn`` layer on ``self``."""
        if not cls.bases or not all(self.qnames(base.value) for base in cls.bases):
            return False  # no base, or one this file defines or cannot trace to an import
        methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        if "forward" not in methods or "__init__" not in methods:
            return False
        for assign in m.findall(methods["__init__"].body, m.Assign(targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))])):
            if isinstance(assign.value, cst.Call) and any(self._is_module_base(n) for n in self.qnames(assign.value.func)):
                return True
        return False

    @staticmethod
    def _is_module_base(name: str) -> bool:
        if name in NOT_MODULES:
            return False
        if name in LIGHTNING_MODULES or name == "torch.nn.Module":
            return True
        parts = name.split(".")
        if parts[:2] != ["torch", "nn"] or not parts[-1][:1].isupper():
            return False
        return len(parts) == 3 or parts[2] == "modules"

    def is_module_class_call(self, call: cst.Call) -> bool:
        names = self.qnames(call.func)
        if any(self._is_module_base(n) for n in names):
            return True
        local = {c.name.value for c in self.module_classes}
        return isinstance(call.func, cst.Name) and call.func.value in local

    def is_lightning(self, cls: cst.ClassDef) -> bool:
        return any(self.qnames(b.value) & LIGHTNING_MODULES for b in cls.bases)

    # -- what a name holds ----------------------------------------------------------

    def kind(self, expr: cst.BaseExpression, at: cst.CSTNode | None = None) -> Kind:
        """What ``expr`` evaluates to, as far as the code shows."""
        at = at or expr
        if isinstance(expr, cst.Name):
            return self._name_kind(expr.value, at)
        if isinstance(expr, cst.Attribute):
            return self._attribute_kind(expr, at)
        if isinstance(expr, cst.Call):
            return self._call_kind(expr, at)
        if isinstance(expr, cst.BinaryOperation):
            return self._combine(self.kind(expr.left, at), self.kind(expr.right, at))
        if isinstance(expr, cst.UnaryOperation):
            kind = self.kind(expr.expression, at)
            return kind if kind.is_tensor else Kind.UNKNOWN
        if isinstance(expr, cst.Subscript):
            kind = self.kind(expr.value, at)
            return kind if kind.is_tensor else Kind.UNKNOWN
        if isinstance(expr, cst.SimpleString) and self.is_device_value(expr):
            return Kind.DEVICE
        return Kind.UNKNOWN

    @staticmethod
    def _combine(left: Kind, right: Kind) -> Kind:
        """The kind of ``left <op> right``: a tensor if either side is one (the
        other may be a number); on the device if either side is, since that is
        where the result lives once the code runs."""
        kinds = {left, right}
        if not all(k.is_tensor or k is Kind.UNKNOWN for k in kinds) or kinds == {Kind.UNKNOWN}:
            return Kind.UNKNOWN
        for kind in (Kind.DEVICE_TENSOR, Kind.TENSOR, Kind.HOST_TENSOR):
            if kind in kinds:
                return kind
        return Kind.UNKNOWN

    def _call_kind(self, call: cst.Call, at: cst.CSTNode) -> Kind:
        names = self.qnames(call.func)
        if names & TENSOR_FACTORIES:
            return Kind.HOST_TENSOR if keyword(call, "device") is None else Kind.TENSOR
        if names & LIKE_FACTORIES and call.args:
            return self.kind(call.args[0].value, at)
        if "torch.device" in names:
            return Kind.DEVICE
        if names & DATA_LOADERS:
            return Kind.LOADER
        if self.is_module_class_call(call):
            return Kind.MODULE
        if any(n.split(".")[0] in ("numpy", "np") for n in names):
            return Kind.NUMPY
        if any(n.startswith("torch.") for n in names) and not names & NON_TENSOR_TORCH:
            if any(n.startswith(("torch.cuda", "torch.distributed", "torch.utils", "torch.optim", "torch.backends")) for n in names):
                return Kind.UNKNOWN
            if any(n.startswith("torch.nn.") and not n.startswith("torch.nn.functional.") for n in names):
                return Kind.UNKNOWN
            arg_kinds = [self.kind(a.value, at) for a in call.args if a.keyword is None]
            arg_kinds += [self.kind(e.value, at) for a in call.args for e in getattr(a.value, "elements", ())]
            for kind in (Kind.DEVICE_TENSOR, Kind.HOST_TENSOR):
                if kind in arg_kinds:
                    return kind
            return Kind.TENSOR
        func = call.func
        callee = self.kind(func, at)
        if callee is Kind.MODULE:
            return Kind.DEVICE_TENSOR  # a submodule's output lives on the model's device
        if isinstance(func, cst.Attribute):
            receiver = self.kind(func.value, at)
            method = func.attr.value
            if receiver is Kind.MODULE and method in ("to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_"):
                return Kind.MODULE
            if receiver.is_tensor:
                if method in ("numpy",):
                    return Kind.NUMPY
                if method in NON_TENSOR_METHODS:
                    return Kind.UNKNOWN
                if method == "cpu":
                    return Kind.HOST_TENSOR
                if method in MOVES:
                    return self._moved_kind(call, at)
                if method in TENSOR_METHODS or method.endswith("_"):
                    return receiver
        return Kind.UNKNOWN

    def _moved_kind(self, call: cst.Call, at: cst.CSTNode) -> Kind:
        """``t.to(other.device)`` / ``t.type_as(other)`` follow ``other``."""
        for arg in call.args:
            value = arg.value
            if isinstance(value, cst.Attribute) and value.attr.value == "device":
                target = self.kind(value.value, at)
                if target.is_tensor:
                    return target
            elif self.kind(value, at) is Kind.DEVICE_TENSOR:
                return Kind.DEVICE_TENSOR
        return Kind.TENSOR

    def _attribute_kind(self, expr: cst.Attribute, at: cst.CSTNode) -> Kind:
        attr = expr.attr.value
        if attr == "device":
            return Kind.DEVICE
        owner_kind = self.kind(expr.value, at)
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            method = self.enclosing_method(at)
            if method is not None:
                return self.attributes(method[0]).get(attr, Kind.UNKNOWN)
        if owner_kind is Kind.MODULE and attr in ("weight", "bias"):
            return Kind.DEVICE_TENSOR
        if owner_kind.is_tensor and attr in ("T", "mT", "H", "real", "imag", "data"):
            return owner_kind
        return Kind.UNKNOWN

    def _name_kind(self, name: str, at: cst.CSTNode) -> Kind:
        func = at if isinstance(at, cst.FunctionDef) else self.enclosing(at, cst.FunctionDef)
        scope_owner: cst.CSTNode = func if func is not None else self.module
        env = self.environment(scope_owner)
        if name in env:
            return env[name]
        if func is not None:
            method = self.enclosing_method(at)
            if name == "self" and method is not None and method[1] is func:
                return Kind.MODULE
            if name in self.parameter_names(func):
                return self._parameter_kind(name, func)
            # a name from an enclosing scope
            outer = self.enclosing(func, cst.FunctionDef)
            return self._name_kind(name, outer) if outer is not None else self.environment(self.module).get(name, Kind.UNKNOWN)
        return Kind.UNKNOWN

    @staticmethod
    def parameter_names(func: cst.FunctionDef) -> list[str]:
        params = func.params
        return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]

    def _parameter_kind(self, name: str, func: cst.FunctionDef) -> Kind:
        if not self.parameter_is_tensor(name, func):
            return Kind.UNKNOWN
        in_module = self.enclosing_method(func.body) is not None
        return Kind.DEVICE_TENSOR if in_module else Kind.TENSOR

    def parameter_is_tensor(self, name: str, func: cst.FunctionDef) -> bool:
        """A parameter counts as a tensor only on evidence: a ``Tensor``
        annotation, or use as a tensor (``.shape``, ``.device``, a tensor
        method, passed to a submodule) in the function body."""
        params = func.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == name and param.annotation is not None:
                ann = param.annotation.annotation
                if "torch.Tensor" in self.qnames(ann) or dotted(ann) in ("Tensor", "torch.Tensor"):
                    return True
        if func not in self._evidence:
            self._evidence[func] = self._collect_evidence(func)
        return name in self._evidence[func]

    def _collect_evidence(self, func: cst.FunctionDef) -> set[str]:
        used: set[str] = set()
        for attribute in m.findall(func.body, m.Attribute(value=m.Name())):
            if attribute.attr.value in TENSOR_EVIDENCE:
                used.add(attribute.value.value)
        for call in m.findall(func.body, m.Call(func=m.Attribute(value=m.Name("self")))):
            if call.args and isinstance(call.args[0].value, cst.Name):
                if self.attributes_of_method(func).get(call.func.attr.value) is Kind.MODULE:
                    used.add(call.args[0].value.value)
        return used

    def attributes_of_method(self, func: cst.FunctionDef) -> dict[str, Kind]:
        method = self.enclosing_method(func.body)
        return self.attributes(method[0]) if method else {}

    def first_tensor_parameter(self, func: cst.FunctionDef) -> str | None:
        for name in self.parameter_names(func):
            if name not in ("self", "cls") and self.parameter_is_tensor(name, func):
                return name
        return None

    def environment(self, owner: cst.CSTNode) -> dict[str, Kind]:
        """Name → kind for the names assigned in one function (or the module),
        merged over every assignment: a name bound to two kinds is UNKNOWN."""
        if owner not in self._envs:
            self._build_environment(owner)
        return self._envs[owner]

    def _build_environment(self, owner: cst.CSTNode) -> None:
        # Statements are read in order and the environment is visible while it
        # is built, so ``y = x * 2`` sees what ``x = torch.ones(3)`` bound.
        env: dict[str, Kind] = {}
        self._envs[owner] = env
        seen: dict[str, list[Kind]] = {}
        body = owner.body if isinstance(owner, cst.FunctionDef) else owner

        def bind(target: cst.BaseExpression, kind: Kind) -> None:
            if isinstance(target, cst.Name):
                seen.setdefault(target.value, []).append(kind)
                env[target.value] = merge(seen[target.value])
            elif isinstance(target, (cst.Tuple, cst.List)):
                for element in target.elements:
                    bind(element.value, Kind.UNKNOWN if not kind.is_tensor else Kind.TENSOR)

        for node in placement.own_statements(body):
            if isinstance(node, cst.Assign):
                kind = self.kind(node.value, node)
                for target in node.targets:
                    bind(target.target, kind)
            elif isinstance(node, cst.AnnAssign) and node.value is not None:
                bind(node.target, self.kind(node.value, node))
            elif isinstance(node, cst.AugAssign):
                bind(node.target, Kind.UNKNOWN if not self.kind(node.target, node).is_tensor else self.kind(node.target, node))
            elif isinstance(node, cst.For):
                iterable = self.kind(node.iter, node)
                if iterable is Kind.LOADER:
                    bind(node.target, Kind.HOST_TENSOR)
                elif iterable.is_tensor:
                    bind(node.target, iterable)
                else:
                    bind(node.target, Kind.UNKNOWN)
            else:
                for name in placement.bound_names(node):
                    bind(cst.Name(name), Kind.UNKNOWN)
        if isinstance(owner, cst.FunctionDef):
            # a parameter that is also reassigned keeps only what both agree on
            for name in self.parameter_names(owner):
                if name in seen:
                    bind(cst.Name(name), self._parameter_kind(name, owner))

    def attributes(self, cls: cst.ClassDef) -> dict[str, Kind]:
        """``self.NAME`` → kind, from every ``self.NAME = ...`` and
        ``self.register_buffer("NAME", ...)`` in the class's methods."""
        if cls not in self._attributes:
            # built in reading order and visible while built, like environments
            known: dict[str, Kind] = {}
            self._attributes[cls] = known
            parameters = self._parameters[cls] = set()
            seen: dict[str, list[Kind]] = {}
            for assign in m.findall(cls.body, m.Assign()):
                for target in assign.targets:
                    if m.matches(target.target, m.Attribute(value=m.Name("self"))):
                        value = assign.value
                        names = self.qnames(value.func) if isinstance(value, cst.Call) else set()
                        if names & PARAMETER_TYPES:
                            parameters.add(target.target.attr.value)
                        if names & (PARAMETER_TYPES | {"torch.nn.Buffer"}):
                            kind = Kind.DEVICE_TENSOR
                        else:
                            kind = self.kind(value, assign)
                        seen.setdefault(target.target.attr.value, []).append(kind)
                        known[target.target.attr.value] = merge(seen[target.target.attr.value])
            for call in m.findall(cls.body, m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name("register_buffer") | m.Name("register_parameter")))):
                if call.args and isinstance(call.args[0].value, cst.SimpleString):
                    seen.setdefault(call.args[0].value.evaluated_value, []).append(Kind.DEVICE_TENSOR)
            known.update({name: merge(kinds) for name, kinds in seen.items()})
        return self._attributes[cls]

    def is_parameter(self, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """``self.w`` set to ``nn.Parameter(...)``, or ``<module>.weight``/``.bias``:
        assigning a plain tensor to these raises, so they are never reassigned."""
        if not isinstance(expr, cst.Attribute):
            return False
        if m.matches(expr.value, m.Name("self")):
            method = self.enclosing_method(at)
            if method is None:
                return False
            self.attributes(method[0])
            return expr.attr.value in self._parameters[method[0]]
        return expr.attr.value in ("weight", "bias") and self.kind(expr.value, at) is Kind.MODULE

    def is_numpy_value(self, expr: cst.BaseExpression, at: cst.CSTNode) -> bool:
        return self.kind(expr, at) is Kind.NUMPY

    # -- which device is at hand ----------------------------------------------------

    def is_device_value(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.SimpleString):
            value = expr.evaluated_value
            return isinstance(value, str) and value.split(":")[0] in ("cuda", "cpu", "mps", "xpu")
        if isinstance(expr, cst.IfExp):
            return self.is_device_value(expr.body) and self.is_device_value(expr.orelse)
        if isinstance(expr, cst.Call):
            return "torch.device" in self.qnames(expr.func)
        return False

    def device_at(self, node: cst.CSTNode, module_level: bool = True) -> str | None:
        """Source text of a device already bound wherever ``node`` runs (see
        ``placement.existing_device``)."""
        return placement.existing_device(self, node, module_level)

    def sets_self_device(self, cls: cst.ClassDef) -> bool:
        for assign in m.findall(cls.body, m.Assign(targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self"), attr=m.Name("device")))])):
            func = self.enclosing(assign, cst.FunctionDef)
            if func is not None and func.name.value == "__init__" and self.is_device_value(assign.value):
                return True
        return False

    # -- imports and new definitions ---------------------------------------------------

    @property
    def shared(self) -> dict:
        """Per-file memo for facts computed on demand (see ``placement``)."""
        return self._context.shared

    def index_order(self) -> list[cst.CSTNode]:
        return self._context.index().order

    def identifiers(self) -> set[str]:
        """Every name the file uses as a variable, anywhere."""
        return self._context.index().names

    def functions(self) -> list[cst.FunctionDef]:
        if "functions" not in self.shared:
            self.shared["functions"] = [n for n in self.index_order() if isinstance(n, cst.FunctionDef)]
        return self.shared["functions"]

    def torch_function(self, name: str, rule: "Rule", node: cst.Call) -> tuple[str, list[Edit]] | None:
        """How to spell ``torch.<name>`` where ``node`` (a call of a function
        imported ``from torch``) stands, with the import edits that needs: the
        module's ``import torch`` when it reaches ``node``; else the twin joins
        the ``from torch import`` that binds the called name, so it is in
        reach wherever that name is. None when neither is sure."""
        torch = placement.unconditional_torch(self)
        func = self.enclosing(node, cst.FunctionDef)
        if torch is not None and placement.bound_when_run(self, torch.statement, node) and (func is None or not placement.binds(func, torch.alias)):
            return f"{torch.alias}.{name}", []
        called = node.func.value if isinstance(node.func, cst.Name) else None
        scope = func
        while called is not None:
            for statement in placement.own_statements(scope.body if scope is not None else self.module):
                if isinstance(statement, cst.ImportFrom) and dotted(statement.module) == "torch" and not statement.relative and not isinstance(statement.names, cst.ImportStar):
                    aliases = [a for a in statement.names if isinstance(a.name, cst.Name) and a.asname is None]
                    if any(a.name.value == called for a in aliases):
                        if any(a.name.value == name for a in aliases):
                            return name, []
                        names = list(statement.names)
                        names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                        return name, [rule.replace(statement, statement.with_changes(names=[*names, cst.ImportAlias(cst.Name(name))]))]
            if scope is None:
                break
            scope = self.enclosing(scope, cst.FunctionDef)
        return None


def _tests_for_cuda(facts: "FileAnalysis", test: cst.BaseExpression) -> bool:
    """``test`` is true only where CUDA is in use: ``torch.cuda.is_available()``,
    a CUDA flag (``args.cuda``, ``use_gpu``), ``x.is_cuda``,
    ``device.type == "cuda"``, ``"cuda" in str(device)``; or an ``and`` of
    tests one of which is."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (_tests_for_cuda(facts, test.left) or _tests_for_cuda(facts, test.right))
    if isinstance(test, cst.Call):
        return "torch.cuda.is_available" in facts.qnames(test.func)
    chain = dotted(test)
    if chain is not None:
        last = chain.rsplit(".", 1)[-1]
        return last in FLAG_NAMES or last == "is_cuda"
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        sides = [test.left, target.comparator]
        says_cuda = any(isinstance(side, cst.SimpleString) and side.evaluated_value == "cuda" for side in sides)
        if isinstance(target.operator, cst.Equal):
            return says_cuda and any(isinstance(side, cst.Attribute) and side.attr.value == "type" for side in sides)
        if isinstance(target.operator, cst.In):
            return says_cuda
    return False


def cuda_guarded(facts: "FileAnalysis", node: cst.CSTNode) -> bool:
    """``node`` runs only inside the body of an ``if`` that tests for CUDA
    (see ``_tests_for_cuda``): code written for the GPU, on purpose."""
    child, block = node, facts.parent(node)
    while block is not None:
        if isinstance(block, cst.If) and child is block.body and _tests_for_cuda(facts, block.test):
            return True
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        child, block = block, facts.parent(block)
    return False


def device_expression(rule: "Rule", node: cst.CSTNode, moved: cst.BaseExpression | None = None) -> tuple[str, list[Edit]] | None:
    """The device to move things to at ``node``, and the edits that define it;
    None when no definition can be placed safely (report without a fix).

    In a module's method, the device of its first tensor parameter; else what
    the device flow names at that line (a tensor the line works with, the
    module's own device, a device variable or flag in reach; see
    ``FileFlow.device_at``), when every name it reads is bound there; else a
    device already bound wherever ``node`` runs; else a new
    ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")``
    where it is sure to run first (see ``placement.define_device``).
    ``moved`` is the value a fix moves there, when there is one.
    """
    facts = of(rule)
    method = facts.enclosing_method(node)
    if method is not None:
        tensor = facts.first_tensor_parameter(method[1])
        if tensor is not None:
            return f"{tensor}.device", []
    flow = flow_of(rule)
    # asked at the value being moved, so that value itself is not the answer
    at = flow.node_at(*rule.span(moved if moved is not None else node))
    flowed = flow.device_at(at) if at is not None else None
    statement = facts.statement_of(node)
    if flowed is not None and statement is not None and placement.expression_bound_at(facts, flowed, statement):
        return flowed, []
    existing = facts.device_at(node)
    if existing is not None:
        return existing, []
    return placement.define_device(rule, facts, node)


def with_keyword_argument(call: cst.Call, keyword: str, value: str) -> cst.Call:
    """``call`` with ``keyword=value`` added last, in the call's own layout:
    on a line of its own when the arguments stand one a line, the trailing
    comma kept where there was one, comments left on the lines they were on."""
    args = list(call.args)
    new = cst.Arg(value=cst.parse_expression(value), keyword=cst.Name(keyword), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    before_last = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else call.whitespace_before_args
    trailing_comma = isinstance(last.comma, cst.Comma)
    closing = last.comma.whitespace_after if trailing_comma else last.whitespace_after_arg  # up to ")"
    if isinstance(before_last, cst.ParenthesizedWhitespace):
        # one argument a line: the new one gets a line, indented like the last
        after_last: cst.BaseParenthesizableWhitespace = cst.ParenthesizedWhitespace(
            first_line=closing.first_line if isinstance(closing, cst.ParenthesizedWhitespace) else cst.TrailingWhitespace(),
            indent=True,
            last_line=before_last.last_line,
        )
        if isinstance(closing, cst.ParenthesizedWhitespace):
            closing = closing.with_changes(first_line=cst.TrailingWhitespace())
    else:
        after_last = cst.SimpleWhitespace(" ")
    if trailing_comma:
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=after_last))
        new = new.with_changes(comma=cst.Comma(whitespace_before=last.comma.whitespace_before, whitespace_after=closing))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=after_last), whitespace_after_arg=cst.SimpleWhitespace(""))
        new = new.with_changes(whitespace_after_arg=closing)
    return call.with_changes(args=[*args, new])


def call_text(rule: "Rule", method: str, args: list[str], kept: Iterable[cst.Arg]) -> str:
    """``method(a, b, kw=v)``: new leading arguments, then kept arguments as written."""
    module = rule.context.module
    written = [module.code_for_node(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip() for a in kept]
    return f"{method}({', '.join([*args, *written])})"
