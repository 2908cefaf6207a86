"""Which decorators say a function or class runs only with CUDA
(fixdev/analysis/cuda_only.py): a test skipped without a GPU."""

from __future__ import annotations

import pytest

from fixdev.codemods.cuda_call import CudaCall
from fixdev.engine.core import Engine


def _inside(decorators: str, in_class: bool = False) -> bool:
    """FDV104 stays silent on ``x.cuda()`` under these decorators."""
    if in_class:
        code = f"import torch\n{decorators}class T:\n    def test(self):\n        x = torch.ones(2)\n        y = x.cuda()\n"
    else:
        code = f"import torch\n{decorators}def test():\n    x = torch.ones(2)\n    y = x.cuda()\n"
    return Engine([CudaCall], unsafe_fixes=True).lint(code) == []


@pytest.mark.parametrize(
    "decorators",
    [
        "@skip_if_no_gpu\n",
        "@requires_cuda\n",
        "@helpers.requires_gpu()\n",
        "@onlyCUDA\n",
        "@skipIfNoCuda\n",
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\n",
        "@unittest.skipIf(not TEST_CUDA, 'x')\n",
        "@unittest.skipUnless(torch.cuda.is_available(), 'x')\n",
        "@other\n@skip_unless_gpu\n",
    ],
)
def test_cuda_only(decorators):
    assert _inside(decorators)
    assert _inside(decorators, in_class=True)


@pytest.mark.parametrize(
    "decorators",
    [
        "",
        "@skip_if_cuda\n",
        "@use_gpu\n",
        "@pytest.mark.skipif(torch.cuda.is_available(), reason='x')\n",
        "@unittest.skipUnless(sys.platform == 'linux', 'x')\n",
        "@pytest.mark.skipif(sys.platform == 'win32', reason='x')\n",
        "@cpu_only\n",
    ],
)
def test_not_cuda_only(decorators):
    assert not _inside(decorators)
