"""Where a value lives: the device-flow analysis the rules share.

An abstract interpretation of each function of a file over CPython's ``ast``
(about 7x cheaper to build than libcst's tree). For every expression it
evaluates it keeps *what* the value is (``What``) and *where* it may live: a
small set of ``(placement, origin)`` pairs, where the placement is ``HOST``,
``Device(text)``, ``SameAs(text)`` or ``UNKNOWN`` and the origin is the ast node
that produced the value (a factory call, a loader loop's target, a parameter).
Branches join, loops iterate to a fixpoint, reassignment kills; facts flow
between the methods of a class, into functions through their call sites in the
file, and out of them through per-function summaries. ``UNKNOWN`` is the answer
whenever the code does not show otherwise, and unknown never fixes.

The query API, all on ``FileFlow(text_or_tree)``:

- ``what(node) -> What``: what an expression evaluated to.
- ``where(node) -> frozenset[(placement, origin)]``: where it may live; empty for
  values that live nowhere (numbers, strings, modules of code).
- ``value(node) -> Value``: both, with parts and flags.
- ``sinks() -> list[Sink]``: where a host value meets a device (or a device
  tensor reaches ``.numpy()``, or indexes a host tensor), each naming the value,
  its origins and the device to move it to.
- ``entry_moves() -> list[Entry]``: parameters of a plain class's methods met
  on the class's own device (``self.device``), to move first in the method.
- ``device_at(node, moving=False) -> str | None``: the device a fix at ``node``
  should use (issue 11 item 5's order); ``moving``: ``node`` is the value
  being moved, so neither what it is made from nor a tensor that may sit on
  the CPU names the device (``sources``; issue 25).
- ``node_at(start, end)`` / ``span(node)``: between ast nodes and character
  offsets of the text (ast columns count UTF-8 bytes).
- ``qualified_name(node)``: ``torch.zeros`` for ``t.zeros`` after ``import torch as t``.

What it knows (everything else is UNKNOWN):

- Sources: factories without ``device=`` (``torch.zeros``, ``torch.tensor(list)``,
  ``torch.from_numpy``, ``torch.as_tensor(array)``, legacy ``torch.FloatTensor``)
  make host tensors, unless ``torch.set_default_device`` appears in the file or
  a ``with torch.device(...)`` block is open; ``device=d`` (also inside
  ``**kwargs`` dicts it can see) puts them on ``d``. A DataLoader's batches are
  host tensors (unpacking gives host tensors; ``for``, ``next(iter(...))``,
  ``enumerate``, ``zip``, ``tqdm``), unless its dataset or ``collate_fn`` is seen
  to move tensors, is a ``TensorDataset`` of device tensors, or the
  ``collate_fn`` is not in the file; a batch has the shape the file's dataset
  (``__getitem__``, through the default collate) or ``collate_fn`` gives it. A
  tokenizer's ``return_tensors="pt"`` result is a host ``BatchEncoding`` (ref
  ``ENCODING``), read by key or attribute, moved whole by ``.to``. ``Net()`` of an nn.Module class (torch.nn
  layers, classes of the file, torchvision/timm/transformers builders) is on
  the host until moved, unless given modules it keeps.
- Moves: ``.to(d)``, ``.cuda()``, ``.cpu()``, ``.type_as(v)``, ``.type(v.type())``;
  ``.to(dtype)`` keeps. Modules move in place (with their aliases and tracked
  submodules); a module passed to a call the analysis does not follow may come
  back moved (unknown).
- Propagation: tensor methods, arithmetic, comparisons and ``torch.*``
  operations keep the device (a mix takes the device side); a parameter-free
  layer passes its input's device through; a module's output is where the
  module is; containers keep their parts; class attributes set in ``__init__``
  (and helpers it calls) are known in other methods, submodules, parameters and
  buffers living where the module lives; devices: ``x.device``, ``torch.device``,
  device strings, ``cuda if available else cpu``, names that say ``device``.
- Optimizers: what ``torch.optim.SGD(...)`` and its kin make has ref
  ``OPTIMIZER`` and the calls that made it as ``parts``; where its state lives
  is not tracked.
- Functions of the file: a summary (parameters -> result, parameters that meet
  a device, modules they move), and their call sites' arguments as context when
  every use of the function's name is a call a run has seen.
- Other files' functions: what they return whatever they are given, when a
  project is passed (``FileFlow(text, project=...)``, see ``codemods.project``).
- Other files' classes: whether one is an nn.Module (through bases, when a
  project is passed); nothing else of them.
- Deliberately unknown: other files' classes' attributes, whether other files' functions
  move what they are given, attributes assigned outside
  ``__init__``, a tensor's number of dimensions (only ``torch.tensor(3.0)``,
  full reductions and ``t[i]`` may be 0-dim, which is never a finding), aliasing
  of tensors, ``setattr``/``getattr`` with computed names, lambdas, class bodies.

Functions are interpreted lazily, when something inside them is asked about,
and at most a few times per file: once with symbolic parameters (its summary),
once with its call sites' arguments when those say more. A file Python cannot
parse has no facts.

The modules, one idea each: ``lattice`` (what a value is and where it may
live, and join), ``vocabulary`` (what torch's names mean), ``syntax`` (cheap
ast walks), ``index`` (one pass over a file's statements: scopes, classes,
bindings), ``interpreter`` (one run over a scope's body) with its families
``statements``, ``expressions`` and ``calls``, ``sinks`` (where a value meets
a device it does not live on), ``evidence`` (what shows a value is a tensor
where nothing shows where it lives: a ``"relative"`` sink's device is that
tensor's own), ``entries`` (a plain class's method parameters met on the
class's own device: ``entry_moves()``), ``mentions`` (names in a file's text) and
``facts`` (``FileFlow``: lazy runs, summaries, class facts and the query API
below), ``arms`` (the CPU arm of ``if use_cuda:``, where values only its CUDA
arm moves are on the CPU: ``sinks()`` leaves such meetings out), ``carry``
(the language server's: a function's summary, prepass and tensor evidence
kept for the next version of the file when nothing they read changed). The names here are that API; the rules import from this package only.
"""

from fixdev.analysis.flow.classes import OwnMoves, own_moves
from fixdev.analysis.flow.facts import FileFlow
from fixdev.analysis.flow.told import Evidence
from fixdev.analysis.flow.lattice import (
    ARRAY_VALUE,
    FOLLOWS_MODULE,
    HOST,
    MOVES_INPUTS,
    NOTHING,
    PARAM_FREE,
    PENDING,
    UNKNOWN,
    UNKNOWN_VALUE,
    ZERO_DIM,
    Device,
    Parts,
    SameAs,
    Value,
    What,
    container_value,
    host_loader,
)
from fixdev.analysis.flow.sinks import Sink
from fixdev.analysis.flow.syntax import AST_LEAVES, ast_children, ast_statements, ast_walk
from fixdev.analysis.flow.vocabulary import CONFIG_NAMES, DEVICE_OBJECT, ENCODING, LIGHTNING_MODULES, MODULE_SELF_METHODS, NOT_MODULES, OPTIMIZER

__all__ = [
    "ARRAY_VALUE", "AST_LEAVES", "CONFIG_NAMES", "DEVICE_OBJECT", "ENCODING", "FOLLOWS_MODULE", "HOST", "LIGHTNING_MODULES", "MODULE_SELF_METHODS",
    "MOVES_INPUTS", "NOTHING", "NOT_MODULES", "OPTIMIZER", "PARAM_FREE", "PENDING", "UNKNOWN", "UNKNOWN_VALUE", "ZERO_DIM",
    "Device", "Evidence", "FileFlow", "OwnMoves", "Parts", "SameAs", "Sink", "Value", "What",
    "ast_children", "ast_statements", "ast_walk", "container_value", "host_loader", "own_moves",
]
