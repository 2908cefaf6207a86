"""A class's attribute evidence is the same whether its methods' parameter
evidence was read first (and its walk kept) or not."""

from __future__ import annotations

import ast
import textwrap

from fixdev.analysis.flow import FileFlow

CODE = textwrap.dedent(
    """
    import torch

    class Buffer:
        def __init__(self, size):
            self.store = torch.zeros(size)
            self.arr = None

        def add(self, x):
            self.store = torch.cat([self.store, x])
            return x.size(0)

        def dump(self):
            return self.arr.numpy(), self.table.dim()
    """
)


def _attributes(read_parameters_first: bool):
    flow = FileFlow(CODE)
    cls = next(node for node in ast.walk(flow.tree) if type(node) is ast.ClassDef)
    if read_parameters_first:
        for node in ast.walk(cls):
            if type(node) is ast.FunctionDef:
                flow.evidenced_tensors(flow.index.scopes[node])
        assert sum(1 for key in flow.cache if key[0] == "tensor uses") == 3  # the walks kept, which the attributes read
    return flow.evidenced_attributes(cls), flow.evidenced_attributes(cls, reads=False)


def test_attribute_evidence_does_not_depend_on_what_was_read_before():
    fresh = _attributes(False)
    assert fresh == (frozenset({"store", "arr", "table"}), frozenset({"store", "table"}))
    assert _attributes(True) == fresh
