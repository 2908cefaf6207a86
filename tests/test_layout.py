"""The package's layout keeps its promises: no import cycles between modules
(module-level, function-local and ``TYPE_CHECKING`` imports all count), no
module taking another's private names, no module past the size a reader can
hold, and fingerprints that see every file of every subpackage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 1000


def _modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (the rules as
    ``fixdev.codemods``, where the wheel installs them)."""
    found = {}
    for base, package in ((ROOT / "fixdev", "fixdev"), (ROOT / "codemods", "fixdev.codemods")):
        for path in sorted(base.rglob("*.py")):
            parts = [package, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(module imported, name taken from it or None, line) for every import
    statement anywhere in the module, resolved to the package's modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                if f"{module}.{alias.name}" in MODULES:
                    found.append((f"{module}.{alias.name}", None, node.lineno))
                else:
                    found.append((module, alias.name, node.lineno))
    return [(module, taken, line) for module, taken, line in found if module in MODULES]


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _parents(name: str) -> list[str]:
    """Importing ``a.b.c`` runs ``a`` and ``a.b`` first: their ``__init__``s count as imported too."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def test_the_walk_sees_the_layout():
    # The walk itself can fail: it must find the packages and their imports.
    assert {"fixdev.engine.rule", "fixdev.analysis.flow", "fixdev.codemods.cuda_call", "fixdev.interfaces.cli"} <= MODULES.keys()
    assert any(m == "fixdev.engine.rule" and taken == "Rule" for m, taken, _ in GRAPH["fixdev.codemods.cuda_call"])


def test_no_import_cycles():
    edges = {name: sorted({m for m, _, _ in imports if m != name}) for name, imports in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in edges.get(node, []):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_module_takes_another_modules_private_names():
    taken = [
        f"{name} line {line}: {module}.{private}"
        for name, imports in GRAPH.items()
        for module, private, line in imports
        if private and private.startswith("_") and not private.startswith("__") and module != name
    ]
    assert not taken, "private names imported from another module:\n" + "\n".join(taken)


def test_no_module_over_the_size_a_reader_can_hold():
    # The generated rule table is data, not code to read.
    large = {
        name: lines
        for name, path in MODULES.items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES and name != "fixdev.engine.rule_table"
    }
    assert not large, f"modules over {MAX_LINES} lines: {large}"


def test_codemods_holds_rules_and_nothing_else():
    from fixdev.engine.registry import all_rules

    rule_modules = {rule.__module__ for rule in all_rules()}
    others = {name for name in MODULES if name.startswith("fixdev.codemods.")} - rule_modules
    assert not others, f"modules in codemods/ that define no rule: {sorted(others)}"


def test_every_package_says_what_it_owns():
    undocumented = [
        name for name, path in MODULES.items() if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not undocumented, undocumented


@pytest.mark.parametrize("fingerprint", ["rules", "code"])
def test_an_edit_in_a_subpackage_changes_the_fingerprints(fingerprint, monkeypatch, tmp_path):
    """Both fingerprints read every ``*.py`` below the packages: an edit in
    ``fixdev/analysis/flow/`` (the rule table's and the result cache's
    inputs) must change them, or stale rule tables and cached results would
    be served."""
    from fixdev.engine import registry
    from fixdev.files import cache

    def value() -> str:
        cache.code_fingerprint.cache_clear()
        return registry.rules_fingerprint() if fingerprint == "rules" else cache.code_fingerprint()

    before = value()
    target = next((ROOT / "fixdev" / "analysis" / "flow").glob("*.py"))
    original = target.read_bytes()
    real_read = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = real_read(path)
        return data + b"\n# an edit\n" if path.resolve() == target.resolve() else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    after = value()
    monkeypatch.undo()
    cache.code_fingerprint.cache_clear()
    assert target.read_bytes() == original
    assert before != after
