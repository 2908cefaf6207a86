"""Files a program writes with ``torch.save`` and what it writes there.

A ``torch.load`` can only fail for want of a GPU when the file holds tensors
saved from one. When the file it reads is one the same code writes, the code
shows what is in it (issue 25: datasets a ``download()`` builds with
``torch.tensor``, ``torch.save(x.cpu(), path)``, a cache of torchtext
vectors), and when the same run has just written it, the device it was saved
from is one this run has.

"The same file" is the same path expression, compared as ``ast.unparse``
prints it (formatting aside), through ``with open(path, "wb") as f: torch.save(obj, f)``
on either side. A path that names a function's own locals matches only in that
function, one that names ``self`` only in that class; one built from
module-level names, attributes and strings anywhere in the file. Anything else
(a path from a parameter here, from the command line there) is not known to be
the same file, and the load is judged as before.

All queries are on CPython's tree of ``FileFlow`` (``flow.tree``).
"""

from __future__ import annotations

import ast

from fixdev.analysis.flow import HOST, FileFlow, ast_walk

# Libraries whose objects hold data loaded from disk: their tensors live on
# the host (a torchvision dataset's ``targets``, torchtext's ``vocab.vectors``).
HOST_DATA_LIBRARIES = ("torchvision.datasets.", "torchtext.")
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_MAX_DEPTH = 4  # names followed to their one assignment, containers opened


class SavedFiles:
    """The ``torch.save`` calls of one file, by the file they write."""

    def __init__(self, flow: FileFlow) -> None:
        self.flow = flow
        self.parents = {child: parent for parent in ast_walk(flow.tree) for child in ast.iter_child_nodes(parent)}
        self.saves: list[tuple[ast.Call, ast.expr, ast.expr]] = []  # (call, what, where)
        for node in ast_walk(flow.tree):
            if type(node) is ast.Call and flow.qualified_name(node.func) == "torch.save":
                obj = _argument(node, 0, "obj")
                path = _argument(node, 1, "f")
                if obj is not None and path is not None:
                    self.saves.append((node, obj, path))

    # -- the query -----------------------------------------------------------------------

    def written_here(self, load: ast.Call, path: ast.expr) -> bool:
        """The file ``load`` reads through ``path`` is one this code writes,
        and it cannot hold tensors of a GPU this run lacks: every save of it
        writes values the analysis shows on the host, or the same run saved it
        before this load, on a device it has."""
        key = self._key(path)
        if key is None:
            return False
        writers = [(call, obj) for call, obj, where in self.saves if self._key(where) == key and self._same_place(path, where)]
        if not writers:
            return False
        if any(self._saved_before(call, load) for call, _ in writers):
            return True
        return all(self.on_the_host(obj) for _, obj in writers)

    def on_the_host(self, expr: ast.expr, depth: int = 0) -> bool:
        """What ``expr`` evaluates to holds only host tensors (or none): the
        device flow says so, each part of a tuple, list or dict literal does,
        the one value a local name is bound to does, or it is data a data
        library loaded (``datasets.MNIST(...).targets``)."""
        places = self.flow.value(expr).placements
        if places and all(place is HOST for place in places):
            return True
        if depth >= _MAX_DEPTH:
            return False
        kind = type(expr)
        if kind in (ast.Tuple, ast.List, ast.Set):
            return all(type(item) is not ast.Starred and self.on_the_host(item, depth + 1) for item in expr.elts)
        if kind is ast.Dict:
            return all(key is not None and self.on_the_host(value, depth + 1) for key, value in zip(expr.keys, expr.values))
        if kind is ast.Constant:
            return True
        if kind is ast.Name:
            bound = self._only_value(expr)
            return bound is not None and self.on_the_host(bound, depth + 1)
        return self._library_data(expr, depth)

    # -- helpers -------------------------------------------------------------------------

    def _library_data(self, expr: ast.expr, depth: int) -> bool:
        """An attribute of an object a data library made, never assigned
        anything but a loaded file."""
        if type(expr) is not ast.Attribute:
            return False
        chain = ast.unparse(expr)
        for node in ast_walk(self.flow.tree):
            if type(node) is ast.Assign and any(type(t) is ast.Attribute and ast.unparse(t) == chain for t in node.targets):
                # a loaded file put back where it came from moves nothing
                if not (type(node.value) is ast.Call and self.flow.qualified_name(node.value.func) == "torch.load"):
                    return False
        root = expr
        while type(root) is ast.Attribute:
            root = root.value
        if type(root) is ast.Name and depth < _MAX_DEPTH:
            bound = self._only_value(root)
            root = bound if bound is not None else root
        if type(root) is not ast.Call:
            return False
        name = self.flow.qualified_name(root.func) or ""
        return name.startswith(HOST_DATA_LIBRARIES)

    def _only_value(self, name: ast.Name) -> ast.expr | None:
        """The value ``name`` is bound to, when its scope binds it exactly once,
        by a plain assignment, before this use."""
        scope = self._scope(name)
        found = None
        for node in _own_nodes(scope):
            if type(node) is ast.Name and node.id == name.id and type(node.ctx) is not ast.Load:
                parent = self.parents.get(node)
                if found is not None or type(parent) is not ast.Assign or len(parent.targets) != 1 or parent.targets[0] is not node:
                    return None
                found = parent
            elif type(node) in (ast.Global, ast.Nonlocal) and name.id in node.names:
                return None
            elif type(node) is ast.arg and node.arg == name.id:
                return None
        if found is None or (found.lineno, found.col_offset) >= (name.lineno, name.col_offset):
            return None
        return found.value

    def _key(self, path: ast.expr) -> str | None:
        """The file ``path`` names, as comparable text (``ast.unparse``, so
        formatting aside)."""
        path = self._path(path)
        if type(path) is ast.Call and not _is_path_call(path):
            return None  # io.BytesIO(), a function's result: nothing to compare
        return ast.unparse(path)

    def _path(self, path: ast.expr) -> ast.expr:
        """The path a file object was opened from (``with open(p, "wb") as
        f``), or ``path`` itself."""
        opened = self._opened(path) if type(path) is ast.Name else None
        return opened if opened is not None else path

    def _opened(self, name: ast.Name) -> ast.expr | None:
        node = self.parents.get(name)
        while node is not None and type(node) not in _FUNCTIONS:
            if type(node) in (ast.With, ast.AsyncWith):
                for item in node.items:
                    call = item.context_expr
                    target = item.optional_vars
                    if type(target) is ast.Name and target.id == name.id and type(call) is ast.Call and type(call.func) is ast.Name and call.func.id == "open" and call.args:
                        return call.args[0]
            node = self.parents.get(node)
        return None

    def _same_place(self, a: ast.expr, b: ast.expr) -> bool:
        """The names the two path expressions read mean the same thing: the
        same function when one names a local, the same class for ``self``."""
        names = {n.id for n in ast_walk(self._path(a)) if type(n) is ast.Name}
        a_scope, b_scope = self._scope(a), self._scope(b)
        if names & {"self", "cls"} and self._class(a) is not self._class(b):
            return False
        local = names - {"self", "cls"}
        if type(a_scope) is not ast.Module and any(_binds(a_scope, n) for n in local):
            return a_scope is b_scope
        if type(b_scope) is not ast.Module and any(_binds(b_scope, n) for n in local):
            return False
        return True

    def _saved_before(self, save: ast.Call, load: ast.Call) -> bool:
        """The save runs before the load in the same run of the same scope:
        earlier in its text, and not in another arm of an ``if`` or ``try``."""
        if self._scope(save) is not self._scope(load) or (save.end_lineno, save.end_col_offset) > (load.lineno, load.col_offset):
            return False
        ancestors = []
        node = save
        while node is not None:
            ancestors.append(node)
            node = self.parents.get(node)
        below, node = load, self.parents.get(load)
        while node is not None and node not in ancestors:
            below, node = node, self.parents.get(node)
        if node is None:
            return False
        save_side = ancestors[ancestors.index(node) - 1]
        return _arm(node, save_side) == _arm(node, below)

    def _scope(self, node: ast.AST) -> ast.AST:
        node = self.parents.get(node)
        while node is not None and type(node) not in _FUNCTIONS:
            node = self.parents.get(node)
        return node if node is not None else self.flow.tree

    def _class(self, node: ast.AST) -> ast.ClassDef | None:
        node = self.parents.get(node)
        while node is not None and type(node) is not ast.ClassDef:
            node = self.parents.get(node)
        return node


def saved_files(shared: dict, flow: FileFlow) -> SavedFiles:
    """The file's ``SavedFiles``, made once per file and kept in the rules'
    ``shared`` cache (which the engine clears when the file is done: kept on
    the flow, it and the flow would hold each other in a cycle)."""
    found = shared.get("saved_files")
    if found is None:
        found = shared["saved_files"] = SavedFiles(flow)
    return found


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position and type(call.args[position]) is not ast.Starred:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _is_path_call(node: ast.expr) -> bool:
    """``os.path.join(...)``, ``Path(...)``, ``"{}.pt".format(...)``: a call
    that only spells a path out of its arguments."""
    func = node.func if type(node) is ast.Call else None
    name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
    return name in ("join", "Path", "format", "expanduser", "abspath")


def _arm(block: ast.AST, child: ast.AST) -> str:
    """Which arm of ``block`` holds ``child``: the field of the statement list."""
    for field in ("body", "orelse", "handlers", "finalbody"):
        if child in getattr(block, field, ()):
            return field
    return ""


def _own_nodes(scope: ast.AST):
    """The nodes of ``scope``, not those of functions or classes inside it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if type(node) not in _FUNCTIONS and type(node) is not ast.ClassDef:
            stack.extend(ast.iter_child_nodes(node))


def _binds(scope: ast.AST, name: str) -> bool:
    """``scope`` (a function) binds ``name``: a parameter or an assignment."""
    args = getattr(scope, "args", None)
    if args is not None and any(a.arg == name for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a is not None):
        return True
    return any(type(n) is ast.Name and n.id == name and type(n.ctx) is not ast.Load for n in _own_nodes(scope))
