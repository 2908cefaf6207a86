"""Facts that cross files: what one file's functions return, used where
another file of the same run calls them (fixdev.analysis.project), through
the command line, the worker pool and the result cache."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = """\
import numpy as np
import torch


def load_batch():
    return torch.from_numpy(np.zeros((2, 4), dtype=np.float32))
"""

TRAIN = """\
import torch
import torch.nn as nn

from data import load_batch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
x = load_batch()
out = model(x)
print(model(load_batch()))
"""

TRAIN_FIXED = TRAIN.replace("x = load_batch()\n", "x = load_batch()\nx = x.to(device)\n")

# Files enough for the worker pool to start (fixdev.files.parallel.MIN_FILES_FOR_POOL).
FILLER = "import torch\n\n\ndef helper_{n}(x):\n    return x + 1\n"


def project(root: Path, files: dict[str, str], filler: int = 0) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for n in range(filler):
        (root / f"helper_{n}.py").write_text(FILLER.format(n=n))
    return root


def concise(result) -> list[str]:
    assert "Traceback" not in result.stderr.decode(), result.stderr.decode()
    return [line for line in result.stdout.decode().splitlines() if ": FDV" in line]


@pytest.mark.parametrize("jobs", [["--jobs", "1"], []], ids=["one-worker", "default-workers"])
def test_host_tensor_returned_by_another_file_is_moved_where_it_is_bound(tmp_path, fixdev, jobs):
    project(tmp_path, {"data.py": DATA, "train.py": TRAIN}, filler=8)
    check = fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", *jobs, ".", cwd=tmp_path)
    assert concise(check) == [
        "train.py:9:13: FDV107 [*] Tensor on the CPU reaches a model or tensor on a device; move it there",
        # read straight from the call: nothing in this file to move, so no fix
        "train.py:10:13: FDV107 Tensor on the CPU reaches a model or tensor on a device; move it there",
    ]
    assert check.returncode == 1
    applied = fixdev("--apply", "--no-cache", "--select", "FDV107", *jobs, ".", cwd=tmp_path)
    assert (tmp_path / "train.py").read_text() == TRAIN_FIXED
    assert (tmp_path / "data.py").read_text() == DATA
    assert "1 remaining" in applied.stderr.decode()
    again = fixdev("--diff", "--no-cache", "--select", "FDV107", *jobs, ".", cwd=tmp_path)
    assert again.stdout == b"", "a second run changes nothing"


def test_a_file_checked_alone_knows_nothing_of_the_others(tmp_path, fixdev):
    project(tmp_path, {"data.py": DATA, "train.py": TRAIN})
    alone = fixdev("--check", "--no-cache", "--select", "FDV107", "train.py", cwd=tmp_path)
    assert concise(alone) == [] and alone.returncode == 0
    stdin = fixdev("--check", "--output-format", "concise", "--select", "FDV107", "--stdin-filename", "train.py", "-", cwd=tmp_path, stdin=TRAIN.encode())
    assert concise(stdin) == [] and stdin.returncode == 0
    named = fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", "train.py", "data.py", cwd=tmp_path)
    assert len(concise(named)) == 2, "files named on the command line are one run"


def test_cached_result_follows_the_other_files_function(tmp_path, fixdev):
    work = project(tmp_path / "work", {"data.py": DATA, "train.py": TRAIN, "other.py": "import torch\nx = torch.zeros(3)\n"})
    cache = tmp_path / "cache"

    def run() -> list[str]:
        found = fixdev("--check", "--output-format", "concise", "--select", "FDV107", ".", cwd=work, env={"FIXDEV_CACHE_DIR": str(cache)})
        return concise(found)

    def entries() -> dict[str, tuple]:
        return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in cache.glob("*/*")}

    first = run()
    assert len(first) == 2
    stored = entries()
    assert run() == first and entries() == stored, "served from the cache, the other file's facts too"
    (work / "data.py").write_text(DATA.replace("dtype=np.float32))", "dtype=np.float32)).to('cuda')"))
    assert run() == [], "the batch now lives on the device: nothing to move"
    now = entries()
    rewritten = {name for name in stored if now[name] != stored[name]}
    assert len(rewritten) == 1, "train.py's result alone is made again (data.py's new text has new entries)"
    (work / "data.py").write_text(DATA)
    assert run() == first
    (work / "data.py").write_text(DATA.replace("def load_batch", "def load_other"))
    assert run() == [], "no such function: unknown"


def test_names_two_files_could_provide_stay_unknown(tmp_path, fixdev):
    # `data` is app/data.py for a script run from app/, and data.py for one run from the root
    project(tmp_path, {"data.py": DATA, "app/data.py": DATA, "app/train.py": TRAIN})
    assert concise(fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", ".", cwd=tmp_path)) == []
    # the same script beside its one `data` module
    assert len(concise(fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", "app", cwd=tmp_path))) == 2


def test_a_package_module_does_not_import_its_siblings_by_bare_name(tmp_path, fixdev):
    # inside a package, `from data import ...` is a top-level `data` (absolute import), not pkg/data.py
    project(tmp_path, {"pkg/__init__.py": "", "pkg/data.py": DATA, "pkg/train.py": TRAIN})
    assert concise(fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", ".", cwd=tmp_path)) == []
    (tmp_path / "pkg/__init__.py").unlink()  # a folder of scripts: the sibling is meant
    assert len(concise(fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", ".", cwd=tmp_path))) == 2


@pytest.mark.parametrize(
    "rebinding",
    [
        "load_batch = staticmethod(load_batch)\n",
        "try:\n    from fast_data import load_batch\nexcept ImportError:\n    pass\n",
        "def load_batch():\n    return torch.zeros(2, 4).cuda()\n",
    ],
    ids=["wrapped", "maybe-another-import", "redefined"],
)
def test_an_imported_name_the_file_rebinds_stays_unknown(tmp_path, fixdev, rebinding):
    train = TRAIN.replace("from data import load_batch\n", "from data import load_batch\n" + rebinding)
    project(tmp_path, {"data.py": DATA, "train.py": train})
    assert concise(fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", ".", cwd=tmp_path)) == []


LOADING = """\
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def load_pair():
    a = np.zeros((2, 4), dtype=np.float32)
    return torch.from_numpy(a), torch.from_numpy(a)


def identity(x):
    return x


def moved(x, device):
    return x.to(device)


def get_loader(batch_size):
    return DataLoader(TensorDataset(torch.zeros(8, 4), torch.zeros(8)), batch_size=batch_size)


def wrap_loader(dataset):
    return DataLoader(dataset, batch_size=2)


class Maker:
    @staticmethod
    def make():
        return torch.zeros(2, 4)

    def made(self):
        return torch.zeros(2, 4)
"""

PACKAGE_TRAIN = """\
import torch
import torch.nn as nn

from . import loading
from .loading import Maker, identity, moved, wrap_loader
from pkg import load_pair

device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
x, y = load_pair()
out = model(x)
print(model(identity(torch.zeros(2, 4))), model(moved(torch.zeros(2, 4), "cpu")))
for xb, yb in loading.get_loader(2):
    model(xb)
for xb, yb in wrap_loader(something):
    model(xb)
m = Maker.make()
model(m)
model(Maker().made())
"""


def test_package_imports_reexports_and_what_stays_unknown(tmp_path, fixdev):
    project(tmp_path, {"pkg/__init__.py": "from .loading import load_pair\n", "pkg/loading.py": LOADING, "pkg/train.py": PACKAGE_TRAIN})
    found = concise(fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV107", ".", cwd=tmp_path))
    # the re-exported pair, the loader's batch, the static method's tensor; not the
    # parameter passed through, the tensor moved to a parameter's device, the
    # loader over a dataset the caller gives, an instance method's result
    assert [line.split(": FDV")[0] for line in found] == ["pkg/train.py:11:13", "pkg/train.py:14:11", "pkg/train.py:18:7"]
    fixdev("--apply", "--no-cache", "--select", "FDV107", ".", cwd=tmp_path)
    fixed = (tmp_path / "pkg/train.py").read_text()
    assert "x, y = load_pair()\nx = x.to(device)\n" in fixed
    assert "for xb, yb in loading.get_loader(2):\n    xb = xb.to(device)\n" in fixed
    assert "m = Maker.make()\nm = m.to(device)\n" in fixed


LOADERS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def get_loaders(batch_size):
    train = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    test = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    return DataLoader(train, batch_size=batch_size, shuffle=True), DataLoader(test, batch_size=batch_size)
"""

MAIN = """\
import torch
import torch.nn as nn
import torch.nn.functional as F

from loaders import get_loaders

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).to(device)
train_loader, test_loader = get_loaders(8)
for images, labels in train_loader:
    loss = F.cross_entropy(model(images), labels)
"""


def test_loaders_another_file_returns_yield_host_batches(tmp_path, fixdev):
    project(tmp_path, {"loaders.py": LOADERS, "main.py": MAIN})
    fixdev("--apply", "--no-cache", "--select", "FDV107", ".", cwd=tmp_path)
    assert (tmp_path / "main.py").read_text() == MAIN.replace(
        "for images, labels in train_loader:\n", "for images, labels in train_loader:\n    images, labels = images.to(device), labels.to(device)\n"
    )


# A library module with a report that has no fix: a load with no device to load onto.
PLOTS = """\
import torch


def precision(path):
    data = torch.load(path)
    x = torch.zeros(3).cuda()
    return data["precision"]
"""
MAIN = """\
import torch

from model import Net

net = Net().cuda()
"""
REPORT = "plots.py:5:12: FDV105 Loading without `map_location` fails on a machine without the saving GPU; no device in scope to load onto"


def test_reports_without_a_fix_in_a_module_nothing_imports_runs_or_names_are_dropped(tmp_path, fixdev):
    # issue 25: detr's util/plot_utils.py, imported by nothing of the repository
    files = {"plots.py": PLOTS, "main.py": MAIN, "model.py": "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n"}
    project(tmp_path, files)
    run = lambda *paths: concise(fixdev("--check", "--output-format", "concise", "--select", "FDV105", *paths, cwd=tmp_path))
    assert run("--no-cache", ".") == []
    # checked alone, nothing says who imports it
    assert run("--no-cache", "plots.py") == [REPORT]
    # a file of the folder the run leaves out may import it
    assert run("--no-cache", "plots.py", "main.py") == [REPORT]
    # named in a script or configuration
    (tmp_path / "plot.sh").write_text("python -c 'import plots'\n")
    assert run("--no-cache", ".") == [REPORT]
    (tmp_path / "plot.sh").unlink()
    # run as a script
    (tmp_path / "plots.py").write_text(PLOTS + '\n\nif __name__ == "__main__":\n    precision("p.pth")\n')
    assert run("--no-cache", ".") == [REPORT]
    (tmp_path / "plots.py").write_text(PLOTS)
    # a folder none of whose modules the run imports (examples, modules for users): unsure
    project(tmp_path / "examples", {"plots.py": PLOTS, "other.py": "import torch\n"})
    assert run("--no-cache", ".") == ["examples/" + REPORT]
    for name in ("plots.py", "other.py"):
        (tmp_path / "examples" / name).unlink()
    # with the cache: importing it from another file brings the report back
    assert run(".") == []
    (tmp_path / "main.py").write_text(MAIN + "from plots import precision\n")
    assert run(".") == [REPORT]


OPS = """\
import torch


def normalize(x):
    scale = torch.ones(x.shape[-1]).cuda()
    return x / scale


if __name__ == "__main__":
    print(normalize(torch.zeros(2).cuda()))
"""

HELPERS = """\
import torch


def make_mask(n):
    return torch.ones(n).cuda()


def encoder(width, device="cuda"):
    return torch.nn.Linear(width, width).to(device)
"""

SCRIPT = """\
import torch

from helpers import make_mask
from pkg.ops import normalize

model = torch.nn.Linear(4, 4).cuda()
print(normalize(model(torch.randn(2, 4).cuda())) * make_mask(4))
"""


def test_no_cuda_query_is_added_where_a_module_is_imported(tmp_path, fixdev, monkeypatch):
    # Importing a library must not ask torch.cuda.is_available(): unless
    # PYTORCH_NVML_BASED_CUDA_CHECK=1, that "poisons fork" (issue 25). A
    # package module and a module another file imports get the device inside
    # the function (or the __main__ block); only the script, which nothing
    # imports, gets a module-level definition.
    import importlib
    import sys

    import torch

    files = {"pkg/__init__.py": "", "pkg/ops.py": OPS, "helpers.py": HELPERS, "train.py": SCRIPT}
    project(tmp_path, files)
    fixdev("--apply", "--no-cache", "--select", "FDV104,FDV109", ".", cwd=tmp_path)
    fixed = {name: (tmp_path / name).read_text() for name in files}
    definition = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
    assert f"\n{definition}\n" in fixed["train.py"]
    for name in ("pkg/ops.py", "helpers.py"):
        assert fixed[name] != files[name], f"{name} is fixed"
        module_level = [line for line in fixed[name].splitlines() if "is_available" in line and not line.startswith(" ")]
        assert module_level == [], f"{name} queries CUDA at import: {module_level}"
    assert f"    {definition}\n    print(normalize(" in fixed["pkg/ops.py"], "the __main__ block defines its own"
    # (named torch_device: `device` is a parameter of the file's encoder)
    assert f"def make_mask(n):\n    torch_{definition}\n    return torch.ones(n, device=torch_device)" in fixed["helpers.py"]
    assert 'device="cuda"' in fixed["helpers.py"], "a default evaluated at import is reported, not given a fallback"
    # Importing the fixed library modules asks nothing of CUDA; calling them runs on the CPU.
    def no_query():
        raise AssertionError("CUDA queried at import")

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", no_query)
    for name in ("helpers", "pkg.ops", "pkg"):
        sys.modules.pop(name, None)
    helpers = importlib.import_module("helpers")
    ops = importlib.import_module("pkg.ops")
    monkeypatch.undo()
    assert helpers.make_mask(3).device.type == "cpu"
    assert ops.normalize(torch.ones(2, 3)).device.type == "cpu"
    for name in ("helpers", "pkg.ops", "pkg"):
        sys.modules.pop(name, None)


# A helper file that runs statements (a script's shape) and names no device:
# its tensor parameter meets a factory. Device-relative fixes are made in files
# that meet devices; a file other files import is a library, whose callers
# choose devices; alone, it is a script that runs on the CPU only.
PRINTING_HELPERS = """\
import torch


def add_bias(x):
    return x + torch.zeros(x.size(-1))


print("helpers loaded")
"""
HELPERS_USER = "from helpers import add_bias\n"


def test_a_file_others_import_meets_devices_through_them(tmp_path, fixdev):
    work = project(tmp_path / "work", {"helpers.py": PRINTING_HELPERS, "user.py": HELPERS_USER})
    cache = tmp_path / "cache"

    def run(*paths: str) -> list[str]:
        found = fixdev("--check", "--output-format", "concise", "--select", "FDV102", *paths, cwd=work, env={"FIXDEV_CACHE_DIR": str(cache)})
        return concise(found)

    assert [line.split(": ")[0] for line in run(".")] == ["helpers.py:5:16"]
    assert run("helpers.py") == [], "alone, a script that runs on the CPU only"
    (work / "user.py").write_text("import torch\n")
    assert run(".") == [], "nobody imports it now: the cached result is made again"


# A module class through a base another file of the run defines, two files away.
BASE = "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n"
MIDDLE = "from pkg.base import Base\n\n\nclass Middle(Base):\n    pass\n"
NET = """\
import torch
from .mid import Middle


class Net(Middle):
    def forward(self, x):
        steps = torch.arange(x.shape[1])
        return x + steps
"""


def test_a_module_class_through_bases_in_other_files(tmp_path, fixdev):
    work = project(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": BASE, "pkg/mid.py": MIDDLE, "pkg/net.py": NET})
    found = fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV102", ".", cwd=work)
    assert [line.split(": ")[0] for line in concise(found)] == ["pkg/net.py:7:17"]
    alone = fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV102", "pkg/net.py", cwd=work)
    assert concise(alone) == [], "alone, Middle is a class nothing is known of"
    (work / "pkg" / "base.py").write_text(BASE.replace("nn.Module", "object"))
    again = fixdev("--check", "--no-cache", "--output-format", "concise", "--select", "FDV102", ".", cwd=work)
    assert concise(again) == [], "no module at the root of the bases"


@pytest.mark.parametrize("word", ["loader", "a", "x1", "é", "foo-bar", "-x", "x.", ""])
@pytest.mark.parametrize("text", ["", "loader", "data_loader", "loader2", "a loader.", "loaderloader loader", "foo-bar", "x-x.", "é-é", "(a)", "xé a_a"])
def test_the_dead_module_test_finds_a_whole_word_as_the_pattern_does(word, text):
    # _never_runs scans every file of the run for a module's name: the fast
    # scan must agree with `\bword\b` wherever the word occurs, whole or not
    import re

    from fixdev.analysis.project import _word_finder

    assert bool(_word_finder(word)(text)) == bool(re.search(rf"\b{re.escape(word)}\b", text))


# A folder of modules, one of them imported (so the folder's use is shown):
# which of the others nothing imports, runs or names.
DEAD_TREE = {
    "tools/used.py": "def f():\n    return 1\n",
    "tools/dead.py": "def g():\n    return 2\n",
    "tools/in_docs.py": "def h():\n    return 3\n",
    "tools/in_code.py": "def k():\n    return 4\n",
    "tools/self_named.py": "# self_named: a helper\ndef s():\n    return 5\n",
    "tools/with-dash.py": "def w():\n    return 6\n",
    "main.py": "from tools.used import f\nCHOICES = ['in_code']\nf()\n",
    "README.md": "Run `python tools/in_docs.py`.\n",
}


def test_a_module_is_dead_only_where_nothing_names_it(tmp_path):
    from fixdev.analysis.project import Project

    work = project(tmp_path, DEAD_TREE)
    files = sorted(work.rglob("*.py"))
    facts = Project(files)
    dead = {path.relative_to(work).as_posix() for path in files if facts.for_file(path).never_runs()}
    assert dead == {"tools/dead.py", "tools/self_named.py", "tools/with-dash.py"}
    # a .py file the run leaves out may import any of them: none is sure to be dead
    kept = [path for path in files if path.name != "in_code.py"]
    assert not any(Project(kept).for_file(path).never_runs() for path in kept)
    # a document that names the module with a dash (not a run of word characters)
    (work / "NOTES.txt").write_text("see with-dash\n")
    again = Project(files)
    assert not again.for_file(work / "tools" / "with-dash.py").never_runs()
    assert again.for_file(work / "tools" / "dead.py").never_runs()


def test_tree_facts_are_kept_under_what_the_disk_says_of_the_files(tmp_path, monkeypatch):
    # A warm run's dead-module and imported-file answers come from the cache
    # while no file of the tree changed, and are made again once one does:
    # a run file edited, a document added, a .py file the run leaves out.
    from fixdev.analysis import project as module

    monkeypatch.setenv("FIXDEV_CACHE_DIR", str(tmp_path / "cache"))
    work = project(tmp_path / "work", DEAD_TREE)
    files = sorted(work.rglob("*.py"))

    def answers() -> tuple:
        facts = module.Project(files, use_cache=True)
        return (
            {path.relative_to(work).as_posix() for path in files if facts.for_file(path).never_runs()},
            {path.relative_to(work).as_posix() for path in files if facts.for_file(path).imported()},
        )

    first = answers()
    assert first == ({"tools/dead.py", "tools/self_named.py", "tools/with-dash.py"}, {"tools/used.py"})
    with monkeypatch.context() as reading:
        for name in ("_find_imported",):
            reading.setattr(module.Project, name, lambda self: pytest.fail("read the tree again"))
        for name in ("_imported_word_set", "_maybe_dead", "_named_nowhere"):
            reading.setattr(module, name, lambda *args: pytest.fail("read the tree again"))
        assert answers() == first, "nothing changed: served from the cache"
    (work / "NOTES.txt").write_text("see with-dash\n")  # a document naming a module
    assert answers()[0] == {"tools/dead.py", "tools/self_named.py"}
    (work / "main.py").write_text(DEAD_TREE["main.py"] + "import tools.dead\n")  # a run file edited
    assert answers() == ({"tools/self_named.py"}, {"tools/used.py", "tools/dead.py"})
    (work / "main.py").write_text(DEAD_TREE["main.py"])
    assert answers()[0] == {"tools/dead.py", "tools/self_named.py"}
    (work / "tools" / "left_out.py").write_text("import dead\n")  # not one of the run's files
    assert answers()[0] == set(), "a .py file the run leaves out may import any of them"


def test_workers_asking_one_file_for_different_names_keep_each_others_answers(tmp_path, monkeypatch):
    # Two workers of a cold run each read a helper file's cached summary (none
    # yet), then ask it for different names; a warm run asks both. Each store
    # must keep the other's answers, or the warm run computes the file's flow again.
    from fixdev.analysis.project import _Summary

    monkeypatch.setenv("FIXDEV_CACHE_DIR", str(tmp_path / "cache"))
    work = project(tmp_path / "work", {"helpers.py": "import torch\n\n\ndef ones(n):\n    return torch.ones(n)\n\n\ndef zeros(n):\n    return torch.zeros(n)\n"})
    path = str(work / "helpers.py")
    first, second = _Summary(path, use_cache=True), _Summary(path, use_cache=True)
    assert first.binding("ones", {})[1] is not None and second.binding("zeros", {})[1] is not None
    warm = _Summary(path, use_cache=True)
    assert set(warm.answers) == {"ones", "zeros"}, "the warm run finds both answers in the cache"


def test_the_flows_a_process_keeps_are_the_last_asked(tmp_path):
    """A file many others import (a package's shared layers) keeps its parsed
    flow while others come and go: the least recently asked are let go."""
    from fixdev.analysis.project import _Summary

    paths = []
    for i in range(_Summary.KEEP_FLOWS + 4):
        path = tmp_path / f"m{i}.py"
        path.write_text(f"import torch\n\n\ndef make{i}(n):\n    return torch.zeros(n)\n")
        paths.append(str(path))
    summaries = {path: _Summary(path, use_cache=False) for path in paths}
    shared = summaries[paths[0]]
    for i, path in enumerate(paths[1:], 1):
        shared.binding(f"name{i}", summaries)  # asked again and again, between the others
        summaries[path].binding(f"make{i}", summaries)
    held = [path for path, summary in summaries.items() if summary.flow]
    assert paths[0] in held
    assert len(held) <= _Summary.KEEP_FLOWS
