"""How much memory a file's analysis may take, predicted from CPython's tree before libcst parses it (``check``; ``TooLargeError``).

libcst's tree, its metadata and the rules' analyses take memory in proportion
to the nodes of CPython's ``ast`` of the same text (``count_nodes``), which
the engine has already built for the screens. Measured with this code
(``python benchmarks/bigfile.py --calibrate FILE ...`` measures it again):
the peak memory of one ``fixdev --check`` or ``--apply`` process, less the
50 MB a two-line file takes, is 4.1-5.5 KB a node on ordinary code (DomainBed's
``algorithms.py``, timm's ``train.py``, torch's ``distributed_test.py`` and
``_decomp/decompositions.py``: 6,000 to 39,000 nodes; a generated file of
5,000 ``.cuda()`` lines, 40,000 nodes) and up to 7.7 KB on torch's
data-heavy files (``common_methods_invocations.py``: 112,000 nodes, 877 MB;
``sparse/_triton_ops_meta.py``: 97,000 nodes, 768 MB). At 8 KB a node, a
budget of 1 GB holds 125,000 nodes: every file of torch's own package and of
the real code the benchmarks read, and not a generated file of 45,000
``.cuda()`` lines (360,000 nodes, whose libcst parse alone took 1.25 GB). A
file over the limit is refused before libcst parses it, with one error line,
rather than risk the machine's memory. No finding is reported for it: a
finding, its span and its fix are made by its rule's libcst visitor, and
what CPython's tree tells (the screens) is only whether a rule may report.

``FIXDEV_MAX_NODES`` sets another limit: it exists for the tests, which
refuse a small file without building a large one.
"""

from __future__ import annotations

import ast
import os
from typing import Callable

from fixdev.engine.source import TooLargeError

MEMORY_BUDGET = 1_000_000_000  # bytes, for one file's process at its peak
BYTES_PER_NODE = 8_000  # above the most measured (7.7 KB), for the files not measured
MAX_NODES = MEMORY_BUDGET // BYTES_PER_NODE


def node_limit() -> int:
    """The most ast nodes a file may have to be fixed."""
    value = os.environ.get("FIXDEV_MAX_NODES")
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            pass  # not a number: the default, as for an unset variable
    return MAX_NODES


def count_nodes(tree: ast.AST) -> int:
    """The nodes of ``tree``, the load/store markers (``ctx``: shared objects,
    no memory of their own) aside."""
    count = 0
    stack = [tree]
    fields_of: dict[type, tuple[str, ...]] = {}
    node_type = ast.AST
    while stack:
        node = stack.pop()
        count += 1
        kind = type(node)
        if kind is ast.Name or kind is ast.Constant:
            continue  # no child node: nearly half of a tree
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f != "ctx")
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                stack.extend(item for item in value if isinstance(item, node_type))
            elif isinstance(value, node_type):
                stack.append(value)
    return count


def check(tree: ast.AST, text: str, count: Callable[[ast.AST], int] = count_nodes) -> None:
    """Raise ``TooLargeError`` when ``tree`` (of ``text``) has more nodes than
    the limit; ``count`` is ``count_nodes`` or one giving the same numbers."""
    limit = node_limit()
    # A node takes a character of its own, but for a unary operator and its
    # operator node (two on ``-``) and a few wrappers over another node
    # (``Expr``, ``arguments``): a text of c characters has at most 2c + 2
    # nodes, so most files need no count.
    if 2 * len(text) + 2 <= limit:
        return
    nodes = count(tree)
    if nodes > limit:
        raise TooLargeError(f"too large to fix ({nodes:,} nodes; the limit is {limit:,})")
