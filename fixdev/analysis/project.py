"""What the other files of a run tell one file's device flow: what their
functions return (issue 11: a project function that returns
``torch.from_numpy(...)`` returns a host tensor).

``Project(paths)`` is made once per run from the run's paths, without reading
them: which file each module name an import may use means. ``pkg/mod.py`` is
``pkg.mod`` (up through folders with an ``__init__.py``, and relative to the
folder fixdev runs from); a bare ``mod`` is also a script's sibling
``mod.py``, as for a script run from its folder (``from model import Net``;
not for a module inside a package, whose absolute imports skip its folder);
``from .mod import f`` is found from the importing file. A name two files
could provide means none.

``Project.for_file(path)`` is what one file's analysis asks
(``FileFlow(text, project=...)``): for the qualified name a call uses
(``data.load_batch`` after ``from data import load_batch``), what the function
returns whatever it is given, as a small fact (``("tensor", "host", False)``),
or None: unknown, and unknown never fixes. Only facts that hold for any
arguments are kept: a function returning its parameter, or a tensor on a
device its parameter names, returns None. The other file is read, parsed
(CPython's ``ast``) and interpreted only when a call asks, once per process
(and once for all runs with the cache, which keeps a file's answers under its
bytes), without facts of other files (a function returning another file's function's
result is unknown), except that a name a package's ``__init__.py`` imports
from its modules is followed there.

Each file's view keeps what it asked and what it got (``used()``): the result
cache stores it with the file's result and serves that result only while
every answer is still the same (``agrees``), so editing another file's
function recomputes exactly the files that called it. The facts read from
all the run's files (which files others import, which are dead code) are
kept in the cache under what the disk says of those files (``Project.kept``).
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # the flow is imported only when a file must be analysed
    from fixdev.analysis.flow import Value


# Larger files are not analysed at all (fixdev.files.runner.MAX_CHARACTERS).
MAX_CHARACTERS = 2_000_000
# Names that are never a file of the run: the analysis knows them itself.
_KNOWN_ROOTS = frozenset({"torch", "numpy", "builtins", "torchvision", "timm", "transformers", "einops"})
_MAX_DEPTH = 3  # nesting of batches kept in a fact
_MAX_REEXPORTS = 3  # `from .loader import load_batch` in a package's __init__, followed this far
_IDENTIFIER = re.compile(r"[^\W\d]\w*")
_AMBIGUOUS = object()
_UNASKED = object()  # a question not asked yet (None is an answer)
# FileFacts' question for `is_library` (not a module's name: it holds a space)
LIBRARY_QUESTION = "is imported"
CLASS_PREFIX = "class "  # FileFacts' questions about a base class, and _Summary's
LOADS_PREFIX = "loads "  # FileFacts' questions about the parameters a function loads a state dict into


class Project:
    """The run's files by module name; facts about their functions, made on
    demand. ``use_cache``: keep each file's facts in the result cache (keyed
    by the file's bytes), so a later run reads them instead of parsing."""

    def __init__(self, paths: Iterable[Path], root: Path | None = None, use_cache: bool = False) -> None:
        self.files = frozenset(_normal(path) for path in paths if str(path).endswith(".py"))
        self.use_cache = use_cache
        self.root = root_text = os.path.abspath(root or Path.cwd())
        packages: dict[str, bool] = {}
        found: dict[str, set] = {}
        for path in self.files:
            for name in _module_names(path, root_text, self.files, packages):
                found.setdefault(name, set()).add(path)
        self.modules = {name: frozenset(paths) for name, paths in found.items()}
        self._packages = packages
        self._facts: dict[tuple, tuple | None] = {}
        self._summaries: dict[str, _Summary] = {}
        self._importers: frozenset | None = None
        # (module, importer's folder) -> _module_file's answer: the files of a
        # folder import the same modules, and every import of the run is
        # resolved when asked who imports a file (warm runs ask it again)
        self._module_files: dict[tuple[str, str], object] = {}

    def __getstate__(self) -> dict:
        # Workers get the index only: the facts are made (or read) again where asked.
        return {"files": self.files, "modules": self.modules, "use_cache": self.use_cache, "_packages": self._packages, "root": self.root}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._facts, self._summaries, self._importers, self._module_files = {}, {}, None, {}

    def kept(self, question: tuple, make, walked: bool = False):
        """``make()``, a fact read from all the run's files (``walked``: and
        from the other files under their folder, ``_walk_stamp``), kept in the
        result cache under what those files are on disk (``stamp``), so a
        warm run asks the disk, not the files' text. Without the cache, or
        when a file cannot be looked at, made every time."""
        stamp = self.stamp() if self.use_cache else None
        if stamp is not None and walked:
            stamp = self.walk_stamp()
        if stamp is None:
            return make()
        from fixdev.files import cache

        entry = cache.key(stamp, "tree fact", question)
        found = cache.load(entry)
        if type(found) is tuple and len(found) == 1:
            return found[0]
        value = make()
        cache.store(entry, (value,))
        return value

    def stamp(self) -> bytes | None:
        """The run's files as the disk has them (each one's size, times and
        inode), with the folder the run's module names start from and which
        folders are packages: what every fact read from all the files depends
        on. None when a file cannot be looked at. Made once per process."""
        found = self.__dict__.get("_stamp", _UNASKED)
        if found is _UNASKED:
            digest = hashlib.sha256(repr((self.root, sorted(self._packages.items()))).encode())
            found = _stat_into(digest, sorted(self.files))
            self._stamp = found
        return found

    def walk_stamp(self) -> bytes | None:
        """``stamp``, and the files under the run's common folder that
        ``_never_runs`` looks at besides the run's own: every ``.py`` file
        the run left out, every configuration, script or document (with
        its size and times). Made once per process."""
        found = self.__dict__.get("_walk_stamp", _UNASKED)
        if found is _UNASKED:
            found = self._walk_stamp = None
            stamp = self.stamp()
            if stamp is not None:
                others = [other for other in self.tree_files() if other not in self.files and (other.endswith(".py") or _NAMING_FILES.search(other))]
                found = self._walk_stamp = _stat_into(hashlib.sha256(stamp), others)
        return found

    def tree_files(self) -> list[str]:
        """Every file under the run's common folder (``_walk``), listed once
        per process: the walk stamp and each file's dead-module check read
        the same listing."""
        found = self.__dict__.get("_tree_files")
        if found is None:
            found = self._tree_files = _walk(os.path.commonpath(list(self.files)))
        return found

    def for_file(self, path: Path) -> "FileFacts":
        return FileFacts(self, _normal(path))

    def is_library(self, path: str) -> bool:
        """Whether ``path`` is a module others import (``imported``: one of a
        package, or one another file of the run imports by a name that means
        it). Device-relative fixes count such a file as meeting devices."""
        return self.imported(path)

    def is_module_class(self, name: str, importer: str, depth: int = 0) -> bool:
        """Whether the class ``name`` (as ``importer`` imports it) is a file of
        the run's ``nn.Module`` class: it derives from one there, or (through
        bases that file imports in turn, this far) from one in another file."""
        level = len(name) - len(name.lstrip("."))
        parts = name[level:].split(".")
        if not all(parts) or (not level and parts[0] in _KNOWN_ROOTS) or depth > _MAX_REEXPORTS:
            return False
        for cut in range(len(parts) - 1, -1 if level else 0, -1):
            path = self._module_file("." * level + ".".join(parts[:cut]), importer)
            if path is _AMBIGUOUS:
                return False
            if path is not None:
                return len(parts) - cut == 1 and self._module_class(path, parts[cut], depth)
        return False

    def _module_class(self, path: str, name: str, depth: int) -> bool:
        key = ("class", path, name)
        if key not in self._facts:
            self._facts[key] = None  # a cycle of bases answers no
            summary = self._summaries.get(path)
            if summary is None:
                summary = self._summaries[path] = _Summary(path, self.use_cache)
            kind, bases = summary.binding(CLASS_PREFIX + name, self._summaries)
            found = kind == "module" or (kind == "bases" and any(self.is_module_class(base, path, depth + 1) for base in bases))
            self._facts[key] = (found,)
        return self._facts[key] == (True,)

    # -- answers ---------------------------------------------------------------------

    def answer(self, name: str, importer: str, depth: int = 0, prefix: str = "") -> tuple | None:
        """The fact about what the function ``name`` (as ``importer`` imports
        it) returns; None when unknown. ``prefix``: another question about the
        function (``LOADS_PREFIX``: the parameters it loads a state dict into)."""
        level = len(name) - len(name.lstrip("."))
        parts = name[level:].split(".")
        if not all(parts) or (not level and parts[0] in _KNOWN_ROOTS):
            return None
        # the longest prefix that is a module of the run: pkg.mod.f, then pkg with mod.f
        for cut in range(len(parts) - 1, -1 if level else 0, -1):
            module = "." * level + ".".join(parts[:cut])
            path = self._module_file(module, importer)
            if path is _AMBIGUOUS:
                return None
            if path is not None:
                attribute = parts[cut:]
                return self._fact(path, ".".join(attribute), depth, prefix) if len(attribute) <= 2 else None
        return None

    def _module_file(self, module: str, importer: str):
        """The run's file ``module`` means for ``importer``: a path, None (not
        a file of the run) or ``_AMBIGUOUS`` (two files could be meant).
        It depends on the importer's folder only."""
        key = (module, os.path.dirname(importer))
        found = self._module_files.get(key, _UNASKED)
        if found is _UNASKED:
            found = self._module_files[key] = self._module_file_in(module, key[1])
        return found

    def _module_file_in(self, module: str, base: str):
        level = len(module) - len(module.lstrip("."))
        dotted = module[level:]
        if level:
            for _ in range(level - 1):
                base = os.path.dirname(base)
            candidates = self._at(base, dotted)
        else:
            candidates = set(self.modules.get(dotted, ()))
            if not self._in_package(base):  # a script's folder comes first on sys.path; a package module's does not
                candidates |= self._at(base, dotted)
        if len(candidates) > 1:
            return _AMBIGUOUS
        return next(iter(candidates)) if candidates else None

    def imported(self, path: str) -> bool:
        """Whether ``path`` is a module others import: it sits in a package
        (a folder with an ``__init__.py``), or another file of the run imports
        it by a name that means it. Its fixes must not run code at import
        (issue 25: a module-level CUDA query "poisons fork")."""
        if self._in_package(os.path.dirname(path)):
            return True
        if self._importers is None:
            self._importers = self.kept(("importers",), self._find_imported)
        return path in self._importers

    def _find_imported(self) -> frozenset:
        found = set()
        for importer in self.files:
            try:
                with open(importer, encoding="utf-8", errors="replace") as handle:
                    text = handle.read(MAX_CHARACTERS)
            except OSError:
                continue
            for match in _IMPORT_LINE.finditer(text):
                source, names, plain = match.groups()
                modules = [source] + [source.rstrip(".") + "." + n if source.strip(".") else source + n for n in re.split(r"[\s,]+", names) if n] if source is not None else []
                modules += [m.split()[0] for m in plain.split(",") if m.strip()] if plain is not None else []
                for module in modules:
                    for cut in range(module.count(".") + 1):  # `import a.b` imports a too
                        prefix = module.rsplit(".", cut)[0] if cut else module
                        if not prefix.strip("."):
                            continue
                        target = self._module_file(prefix, importer)
                        if isinstance(target, str) and target != importer:
                            found.add(target)
        return frozenset(found)

    def _in_package(self, folder: str) -> bool:
        return _is_package(folder, self.files, self._packages)

    def _at(self, base: str, dotted: str) -> set:
        where = os.path.join(base, *dotted.split(".")) if dotted else base
        return {path for path in (where + ".py", os.path.join(where, "__init__.py")) if path in self.files and (dotted or path.endswith("__init__.py"))}

    def _fact(self, path: str, name: str, depth: int, prefix: str = "") -> tuple | None:
        key = (path, prefix + name)
        if key in self._facts:
            return self._facts[key]
        self._facts[key] = None  # an import cycle between re-exports answers unknown
        summary = self._summaries.get(path)
        if summary is None:
            summary = self._summaries[path] = _Summary(path, self.use_cache)
        kind, said = summary.binding(prefix + name, self._summaries)
        fact = said if kind == "fact" else None
        if kind == "via" and depth < _MAX_REEXPORTS:  # re-exported: `from .loader import load_batch`
            fact = self.answer(said, path, depth + 1, prefix)
        self._facts[key] = fact
        return fact


# Counts the questions asked of any file's flow: a summary's ``used`` is when its was last.
_ASKED = itertools.count(1)


class _Summary:
    """What one file says about its module-level names, name by name:
    ``("fact", fact)`` for a function, ``("via", qualified name)`` for a name
    it imports, ``("fact", None)`` otherwise. Read from the cache entry of the
    file's bytes when there is one; else its flow is made and asked."""

    KEEP_FLOWS = 8  # parsed files kept at once per process: memory stays small on big trees

    def __init__(self, path: str, use_cache: bool) -> None:
        self.path = path
        self.flow = None
        self.used = 0
        self.entry: str | None = None
        self.answers: dict[str, tuple] = {}
        try:
            self.data: bytes | None = Path(path).read_bytes()
        except OSError:
            self.data = None
        if self.data is not None and use_cache:
            from fixdev.files import cache

            self.entry = cache.key(self.data, "project-summary")
            stored = cache.load(self.entry)
            if isinstance(stored, dict):
                self.answers = stored

    def binding(self, name: str, others: dict) -> tuple:
        if name not in self.answers:
            self.answers[name] = self._compute(name, others)
            if self.entry is not None:
                from fixdev.files import cache

                # Workers of one run each ask a file's summary for their own
                # names: each store keeps the others' answers too, or the last
                # one written loses them and a warm run computes them again.
                stored = cache.load(self.entry)
                if isinstance(stored, dict):
                    self.answers = {**stored, **self.answers}
                cache.store(self.entry, self.answers)
        return self.answers[name]

    def _compute(self, name: str, others: dict) -> tuple:
        flow = self._flow(others)
        if name.startswith(CLASS_PREFIX):
            return _class_binding(flow, name[len(CLASS_PREFIX) :]) if flow is not None else ("none", ())
        loads = name.startswith(LOADS_PREFIX)
        bound = flow.module_binding(name[len(LOADS_PREFIX) :] if loads else name) if flow is not None else None
        if type(bound) is str:
            return ("via", bound)
        if bound is None:
            return ("fact", None)
        if loads:
            return ("fact", loaded_parameters(bound) or None)
        returned = flow.returned(bound)
        fact = _fact_of(returned, _parameters(bound), 0) if returned is not None else None
        if fact is not None and _made_from_parameters(bound, fact):
            fact = None
        return ("fact", fact)

    def _flow(self, others: dict):
        self.used = next(_ASKED)
        if self.flow is None:
            self.flow = False
            text = ""
            if self.data is not None:
                from fixdev.engine.source import Source, SourceError

                try:
                    text = Source.decode(self.data).text
                except SourceError:
                    pass
            # without torch a file makes no tensor, module or device; it may still re-export one
            if ("torch" in text or "import" in text) and len(text) <= MAX_CHARACTERS:
                from fixdev.analysis.flow import FileFlow

                try:
                    flow = FileFlow(text)
                except RecursionError:
                    flow = None
                if flow is not None and flow.parsed:
                    self.flow = flow
            # the least recently asked go: a file many others import
            # (a models package's shared layers) stays, not made again and again
            holding = sorted((summary for summary in others.values() if summary.flow and summary is not self), key=lambda summary: summary.used)
            for summary in holding[: max(0, len(holding) - self.KEEP_FLOWS + 1)]:
                summary.flow = None  # made again if asked again
        return self.flow or None


# -- dead modules ---------------------------------------------------------------------

NEVER_RUNS = "<never runs>"  # FileFacts' question: is this file dead code?
# Files a tool runs or imports by their name alone.
_ALWAYS_RUN = re.compile(r"(?:__init__|__main__|conftest|setup|manage)\.py$|(?:^|[\\/])test_[^\\/]*\.py$|_test\.py$")
# Where a configuration, a script or the docs may name a module to run.
_NAMING_FILES = re.compile(r"\.(?:toml|cfg|ini|ya?ml|json|sh|bash|md|rst|txt|ipynb)$|(?:^|[\\/])(?:Makefile|Dockerfile|Procfile)$")
_MAX_NAMING_BYTES = 1_000_000


def _never_runs(project: "Project", path: str) -> bool:
    """``path`` is dead code for this run: the run holds every ``.py`` file
    under its folder (so it can tell who imports what), no other file of the
    run and no configuration, script or document there names the module, it
    has no ``if __name__ == "__main__"`` block and runs nothing at its top
    level (no call outside its functions and classes), and it is not a file
    tools run by name (``__init__``, ``conftest``, ``test_*``, ``setup``).
    Only in a folder some of whose other modules the run imports: where no
    sibling is imported either (a folder of examples, modules for users to
    import), nothing shows how its modules are used. When unsure, False."""
    if _ALWAYS_RUN.search(path) or len(project.files) < 2:
        return False
    return project.kept(("maybe dead", path), lambda: _maybe_dead(project, path)) and project.kept(("named nowhere", path), lambda: _named_nowhere(project, path), walked=True)


def _maybe_dead(project: "Project", path: str) -> bool:
    """``_never_runs``' look at the run's files: ``path`` runs nothing at its
    top level and a sibling module of its folder is imported."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            continue
        if type(node) is ast.Call or (type(node) is ast.Name and node.id == "__name__"):
            return False  # a script: it runs when run, whoever imports it
        stack.extend(ast.iter_child_nodes(node))
    folder = os.path.dirname(path)
    siblings = {os.path.basename(f)[:-3] for f in project.files if os.path.dirname(f) == folder and f != path} - {"__init__"}
    return bool(siblings & _imported_words(project))  # else nothing shows how this folder's modules are used: unsure


def _named_nowhere(project: "Project", path: str) -> bool:
    """``_never_runs``' walk: no other file under the run's folder names
    ``path``'s module, and every ``.py`` file there is one of the run's."""
    word = _word_finder(os.path.basename(path)[:-3])
    for other in project.tree_files():
        if other == path:
            continue
        if other.endswith(".py"):
            if other not in project.files:
                return False  # a file the run left out may import it
        elif not _NAMING_FILES.search(other):
            continue
        try:
            if os.path.getsize(other) > _MAX_NAMING_BYTES:
                continue
            text = Path(other).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        if word(text):
            return False
    return True


def _walk(root: str) -> list[str]:
    """Every file under ``root`` as ``_named_nowhere`` reads them (hidden folders and ``__pycache__`` left out)."""
    found = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d != "__pycache__"]
        found += (os.path.join(folder, name) for name in names)
    return sorted(found)


def _stat_into(digest, paths: list[str]) -> bytes | None:
    """``digest`` updated with each path's size, modification and change
    times and inode (an edit, or a file written beside and renamed over it,
    changes one); None when one cannot be looked at."""
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            return None
        digest.update(f"{path}\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ctime_ns}\0{status.st_ino}\n".encode("utf-8", "surrogatepass"))
    return digest.digest()


_WORD_CHARACTER = re.compile(r"\w")


def _word_finder(word: str):
    """A test of whether a text holds ``word`` whole (``\\bword\\b``). For a
    word of word characters only, the text is scanned for the word itself
    (many times faster than the pattern, which is tried at every character)
    and each place it occurs is looked at on both sides."""
    if not word or not _WORD_CHARACTER.fullmatch(word[0]) or not _WORD_CHARACTER.fullmatch(word[-1]):
        return re.compile(rf"\b{re.escape(word)}\b").search
    size = len(word)
    joined = _WORD_CHARACTER.match

    def holds(text: str) -> bool:
        at = text.find(word)
        while at >= 0:
            if (at == 0 or not joined(text, at - 1)) and not joined(text, at + size):
                return True
            at = text.find(word, at + 1)
        return False

    return holds




def _imported_words(project: "Project") -> frozenset:
    """Every module or name the run's files import, word by word (made once
    per process)."""
    found = getattr(project, "_imported", None)
    if found is None:
        found = project._imported = project.kept(("imported words",), lambda: _imported_word_set(project))
    return found


def _imported_word_set(project: "Project") -> frozenset:
    words = set()
    for path in project.files:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for match in _IMPORT_LINE.finditer(text):
            words.update(_IDENTIFIER.findall(" ".join(group or "" for group in match.groups())))
    return frozenset(words)


# The question "is this file imported?" among a file's answers (not a dotted name).
IMPORTED = "<imported>"
# `import a.b, c as d` / `from a.b import c` / `from . import c`, as written (a cheap scan, not a parse).
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([\w, \t]+)|import[ \t]+([\w., \t]+))", re.M)


def _class_binding(flow, name: str) -> tuple:
    """What a file says of its module-level class ``name``: ``("module", ())``
    for an ``nn.Module`` class, ``("bases", names)`` with the qualified names of
    the bases it imports (its own classes' too) for another class or for a
    name it imports, ``("none", ())`` otherwise."""
    module = flow.index.module
    if module.counts.get(name) != 1:
        return ("none", ())
    if name in module.imports:
        return ("bases", (module.imports[name],))
    cls = module.defs.get(name)
    info = flow.index.classes.get(cls) if type(cls) is ast.ClassDef else None
    if info is None:
        return ("none", ())
    if info.is_module:
        return ("module", ())
    bases, todo, seen = [], [info], set()
    while todo:
        current = todo.pop()
        bases += current.bases
        for local in current.local_bases:
            if local not in seen and local in flow.index.classes:
                seen.add(local)
                todo.append(flow.index.classes[local])
    return ("bases", tuple(dict.fromkeys(bases)))


class FileFacts:
    """One file's questions to the project, and the answers it got."""

    def __init__(self, project: Project, path: str) -> None:
        self.project = project
        self.path = path
        self._asked: dict[str, tuple | None] = {}

    def fact(self, name: str) -> tuple | None:
        if name not in self._asked:
            try:
                if name == NEVER_RUNS:
                    self._asked[name] = ("dead",) if _never_runs(self.project, self.path) else None
                elif name == IMPORTED:
                    self._asked[name] = self.project.imported(self.path)
                elif name == LIBRARY_QUESTION:
                    self._asked[name] = (self.project.is_library(self.path),)
                elif name.startswith(CLASS_PREFIX):
                    self._asked[name] = (self.project.is_module_class(name[len(CLASS_PREFIX) :], self.path),)
                elif name.startswith(LOADS_PREFIX):
                    self._asked[name] = self.project.answer(name[len(LOADS_PREFIX) :], self.path, prefix=LOADS_PREFIX)
                else:
                    self._asked[name] = self.project.answer(name, self.path)
            except RecursionError:
                self._asked[name] = None
        return self._asked[name]

    def never_runs(self) -> bool:
        """Nothing in the run imports, runs or names this file
        (``_never_runs``); kept with the answers, so the cache asks again."""
        return self.fact(NEVER_RUNS) is not None

    def imported(self) -> bool:
        """Whether this file is a library module: in a package, or imported
        by another file of the run (``Project.imported``); kept with the
        other answers, so the cached result is redone when that changes."""
        return bool(self.fact(IMPORTED))


    def is_module_class(self, name: str) -> bool:
        """Whether the class a base names (``models.base.Backbone``) is an
        ``nn.Module`` class of the run (``Project.is_module_class``)."""
        return self.fact(CLASS_PREFIX + name) == (True,)

    def is_library(self) -> bool:
        """Whether other files import this one (``Project.is_library``); kept
        with the answers, so a cached result is made again when that changes."""
        return self.fact(LIBRARY_QUESTION) == (True,)

    def call(self, name: str, node: ast.Call) -> "Value | None":
        """The value a call of ``name`` returns, made at ``node``; None when unknown."""
        fact = self.fact(name)
        return None if fact is None else _value_of(fact, node)

    def used(self) -> tuple:
        """Every question asked so far with its answer, in a stable order."""
        return tuple(sorted(self._asked.items(), key=lambda item: item[0]))

    def agrees(self, used: tuple) -> bool:
        """Whether the project answers every question of ``used`` as it did then."""
        return all(self.fact(name) == fact for name, fact in used)


def loaded_parameters(function: ast.AST) -> tuple:
    """The positions of ``function``'s parameters it calls ``.load_state_dict(...)``
    on in its own body (``def load(path, model, optimizer)``: ``(1, 2)``);
    none for a function that moves anything (``model.to(device)`` before the
    load, or the optimizer's state after it: where its tensors end up is the
    function's business)."""
    if type(function) not in (ast.FunctionDef, ast.AsyncFunctionDef):
        return ()
    names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    found, stack = set(), list(function.body)
    while stack:
        node = stack.pop()
        if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
            continue
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in ("to", "cuda", "cpu"):
            return ()
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "load_state_dict":
            if type(node.func.value) is ast.Name and node.func.value.id in names:
                found.add(names.index(node.func.value.id))
        stack.extend(ast.iter_child_nodes(node))
    return tuple(sorted(found))


# -- facts: a function's result reduced to what holds for any arguments ------------------


def _fact_of(value: "Value", parameters: frozenset, depth: int) -> tuple | None:
    from fixdev.analysis.flow import HOST, MOVES_INPUTS, NOTHING, PARAM_FREE, ZERO_DIM, Parts, What, host_loader

    what = value.what
    if what is What.TENSOR:
        place = _place(value, parameters)
        return None if place is None else ("tensor", place, bool(value.flags & ZERO_DIM))
    if what is What.MODULE:
        place = _place(value, parameters)
        return None if place is None else ("module", place, value.flags & (PARAM_FREE | MOVES_INPUTS))
    if what is What.DEVICE:
        # `cuda if available else cpu` is the device, as a name bound to it is (flow._named_device)
        devices = [p for p, _ in value.places if p is not HOST]
        return ("device",) if devices and _place(value.but(places=frozenset((p, None) for p in devices)), parameters) == "device" else None
    if what is What.ARRAY and value.parts is None:
        return ("array",)
    if what is What.LOADER:
        if value == host_loader():
            return ("loader",)
        # a batch the dataset's __getitem__ or the collate_fn shows the shape of
        element = _fact_of(value.parts.elem, parameters, depth + 1) if isinstance(value.parts, Parts) and depth < _MAX_DEPTH else None
        return ("loader", element) if element is not None else None
    if what in (What.BATCH, What.UNKNOWN) and isinstance(value.parts, Parts) and depth < _MAX_DEPTH:
        # a tuple, list or dict: a batch, or `return train_loader, test_loader`
        parts = value.parts
        items = tuple((key, _fact_of(part, parameters, depth + 1)) for key, part in parts.items)
        element = None if parts.elem is NOTHING else _fact_of(parts.elem, parameters, depth + 1)
        if element is None and not any(fact for _, fact in items):
            return None
        return ("parts", items, element)
    return None


def _place(value: "Value", parameters: frozenset) -> str | None:
    """"host" or "device" when every placement says so, and no device is one
    a parameter names (``x.to(device)`` for a parameter ``device``)."""
    from fixdev.analysis.flow import HOST, Device

    places = {placement for placement, _ in value.places}
    if places == {HOST}:
        return "host"
    if places and all(type(p) is Device and not (p.text and parameters.intersection(_IDENTIFIER.findall(p.text))) for p in places):
        return "device"
    return None


def _parameters(function: ast.AST) -> frozenset:
    args = function.args
    return frozenset(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None)


def _made_from_parameters(function: ast.AST, fact: tuple) -> bool:
    """A loader whose dataset or ``collate_fn`` is a parameter (or built
    straight from one: ``TensorDataset(x, y)``) yields what the caller gave,
    which may be on a device."""
    if "loader" not in repr(fact):
        return False
    parameters = _parameters(function)
    assigned: dict[str, ast.AST] = {}
    for node in ast.walk(function):
        if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
            assigned[node.targets[0].id] = node.value
    for node in ast.walk(function):
        if type(node) is not ast.Call:
            continue
        callee = node.func.attr if type(node.func) is ast.Attribute else node.func.id if type(node.func) is ast.Name else ""
        if not callee.endswith("DataLoader"):
            continue
        given = [*node.args[:1], *(k.value for k in node.keywords if k.arg in ("dataset", "collate_fn") or k.arg is None)]
        if len(node.args) > 4:
            given.append(node.args[4])
        for expression in given:
            if type(expression) is ast.Name and expression.id in assigned:
                expression = assigned[expression.id]
            direct = [expression, *(expression.args if type(expression) is ast.Call else ()), *(k.value for k in getattr(expression, "keywords", ()))]
            if any(type(e) is ast.Name and e.id in parameters for e in direct) or type(expression) is ast.Starred:
                return True
    return False


def _value_of(fact: tuple, node: ast.Call) -> "Value":
    """A fact as the value a call at ``node`` returns. A host tensor's origin
    is where the caller binds it (as for a loader's batch), else the call."""
    from fixdev.analysis.flow import ARRAY_VALUE, HOST, PENDING, UNKNOWN_VALUE, ZERO_DIM, Device, Parts, Value, What, container_value, host_loader

    kind = fact[0]
    if kind == "tensor":
        _, place, zero_dim = fact
        places = frozenset({(HOST, PENDING)}) if place == "host" else frozenset({(Device(None), node)})
        return Value(What.TENSOR, places, flags=ZERO_DIM if zero_dim else 0)
    if kind == "module":
        _, place, flags = fact
        return Value(What.MODULE, frozenset({(HOST if place == "host" else Device(None), node)}), frozenset({node}), None, flags)
    if kind == "device":
        return Value(What.DEVICE, frozenset({(Device(None), None)}))
    if kind == "array":
        return ARRAY_VALUE
    if kind == "loader":
        if len(fact) == 1:
            return host_loader()
        return Value(What.LOADER, frozenset(), Parts(_value_of(fact[1], node)))
    _, items, element = fact
    item_values = tuple((key, UNKNOWN_VALUE if part is None else _value_of(part, node)) for key, part in items)
    element_value = UNKNOWN_VALUE if element is None else _value_of(element, node)
    return container_value([value for _, value in item_values] or [element_value], item_values, element_value)


# -- module names -----------------------------------------------------------------------


def _normal(path: Path | str) -> str:
    return os.path.abspath(path)


def _module_names(path: str, root: str, files: frozenset, packages: dict[str, bool]) -> list[str]:
    """The dotted names ``path`` may be imported by from anywhere: through
    the packages holding it (folders with an ``__init__.py``), and relative
    to ``root``. (Its bare name from a sibling is found from the importer.)"""
    folder, filename = os.path.split(path)
    parts = [] if filename == "__init__.py" else [filename[:-3]]
    names = []
    current = folder
    inside: list[str] = []
    while _is_package(current, files, packages):
        inside.insert(0, os.path.basename(current))
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    if inside:  # a module outside packages is imported by its bare name only from its folder
        names.append(".".join(inside + parts))
    if path.startswith(root + os.sep):
        relative = os.path.relpath(folder, root)
        names.append(".".join(([] if relative == "." else relative.split(os.sep)) + parts))
    return [name for name in dict.fromkeys(names) if name and all(part.isidentifier() for part in name.split("."))]


def _is_package(folder: str, files: frozenset, packages: dict[str, bool]) -> bool:
    if folder not in packages:
        marker = os.path.join(folder, "__init__.py")
        packages[folder] = marker in files or os.path.isfile(marker)
    return packages[folder]
