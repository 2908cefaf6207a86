"""Runs rules over source text and applies their fixes.

The engine knows no single rule. For one text it parses once, computes the
metadata the enabled rules ask for once, runs them all in one traversal,
drops suppressed findings, and applies non-overlapping fixes; it repeats on
the result until nothing more is fixable, so fixes that touch one expression
compose (``torch.zeros(x.shape).cuda()``) and a second run changes nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import warnings
from bisect import bisect_left, bisect_right, insort
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Sequence

import libcst as cst

from fixdev.engine import ast_reuse, budget, reparse, stop
from fixdev.engine.findings import Edit, Finding, apply_edits
from fixdev.engine.registry import load
from fixdev.engine.rule import RuleContext, Screening
from fixdev.engine.spans import MetadataWrapper
from fixdev.engine import noqa
from fixdev.engine.source import LineIndex, SourceError, SyntaxLocation, parseable_text

MAX_ROUNDS = 10

class FixConflictError(Exception):
    """A fix produced text that does not parse, or fixes never settled."""


_TOO_DEEP = ("too many nested", "too many levels of indentation", "too many statically nested")


def parse(text: str) -> cst.Module:
    """Parse with libcst, turning its failures into one-line ``SourceError``s."""
    return _libcst_parse(text, _cpython_syntax_error(text))


def _libcst_parse(text: str, cpython_error: SyntaxError | None, tree: ast.Module | None = None) -> cst.Module:
    cache = reparse.active()
    if cache is not None and tree is not None:
        module = cache.parse(parseable_text(text), tree)
        if module is not None:
            return module
    try:
        return cst.parse_module(parseable_text(text))
    except cst.ParserSyntaxError as exc:
        if cpython_error is not None and cpython_error.lineno:
            # Both parsers refuse the code: CPython's account is the one users
            # know (its line, column and message, e.g. "'(' was never closed").
            raise _syntax_error(cpython_error) from None
        # CPython accepted what libcst cannot parse: only libcst can say where.
        detail = str(exc.message).splitlines()[0] if exc.message else "invalid syntax"
        if detail.startswith("expected one of") or "error at" in detail:
            detail = "invalid syntax"
        line, column = exc.raw_line, exc.raw_column + 1
        raise SourceError(f"syntax error at line {line}, column {column}: {detail}", SyntaxLocation(line, column, line, column + 1, detail)) from None
    except RecursionError:
        raise SourceError("code is nested too deeply to parse") from None


def _syntax_error(error: SyntaxError) -> SourceError:
    # CPython's offsets are 1-based and count characters of the line; its
    # end (exclusive) is often the start itself: then one character is shown.
    column = error.offset if error.offset and error.offset > 0 else None
    where = f"line {error.lineno}" + (f", column {column}" if column else "")
    start = (error.lineno, column or 1)
    end = (error.end_lineno or error.lineno, error.end_offset or 0)
    if end <= start:
        end = (start[0], start[1] + 1)
    return SourceError(f"syntax error at {where}: {error.msg}", SyntaxLocation(*start, *end, error.msg))


def _cpython_syntax_error(text: str) -> SyntaxError | None:
    """CPython's verdict on ``text``: None when it parses, else its SyntaxError."""
    return _cpython_parse(text)[1]


def _cpython_parse(text: str) -> tuple[ast.Module | None, SyntaxError | None]:
    """CPython's tree of ``text`` (a byte-order mark is no syntax), or its SyntaxError.

    Asked first for two reasons: libcst's native parser can overflow the C
    stack (a crash, not an exception) on nesting deeper than Python itself
    allows, which CPython refuses cleanly; and CPython's error message and
    position are the ones users know. Its refusal is not final: libcst may
    accept syntax newer than the running Python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text[1:] if text.startswith("\ufeff") else text), None
        except SyntaxError as exc:
            if any(reason in str(exc.msg) for reason in _TOO_DEEP):
                raise SourceError(f"code is nested too deeply to parse at line {exc.lineno}: {exc.msg}") from None
            return None, exc
        except (RecursionError, MemoryError):
            raise SourceError("code is nested too deeply to parse") from None
        except ValueError as exc:
            return None, SyntaxError(str(exc))  # e.g. NUL bytes: no position, so libcst's account is used


def check_round_trip(code: str, text: str) -> None:
    """libcst drops some exotic whitespace (a form feed starting a line); its
    offsets would then be wrong, so no finding or fix could be trusted. Checked
    only when there is something to report: it costs a full code generation
    (``code``, the one the spans are computed from)."""
    if code != parseable_text(text):
        raise SourceError("libcst cannot reproduce this file exactly (a form feed at the start of a line?); left unchanged")


def syntax_check(text: str) -> None:
    """Cheap syntax check for files no rule needs to parse: CPython's parser,
    confirmed by libcst's (newer syntax than the running Python is not an error)."""
    error = _cpython_syntax_error(text)
    if error is not None:
        _libcst_parse(text, error)


def _conflict(edit: Edit, other: Edit) -> bool:
    if edit == other:
        return False
    if edit.start < other.end and other.start < edit.end:
        return True
    if edit.start == edit.end == other.start == other.end:
        return True  # two different insertions at one point: order would be a guess
    if edit.start == edit.end and other.start < edit.start < other.end:
        return True
    if other.start == other.end and edit.start < other.start < edit.end:
        return True
    return False


class _Taken:
    """The edits a round has taken, in order, none in conflict with another.
    Sorted by (start, end), such edits also have their ends in order, so only
    those touching a new edit's span are asked about it (``_conflict`` needs
    ``other.start <= edit.end`` and ``other.end >= edit.start``): a round of n
    fixes costs n log n, not n² as a scan of every taken edit per fix did."""

    def __init__(self) -> None:
        self.edits: list[Edit] = []  # in the order taken
        self._sorted: list[Edit] = []
        self._ends: list[int] = []
        self._seen: set[Edit] = set()

    def overlaps(self, edit: Edit) -> bool:
        ordered = self._sorted
        i = bisect_right(ordered, edit.end, key=lambda e: e.start)
        while i > 0:
            i -= 1
            other = ordered[i]
            if other.end < edit.start:
                break
            if _conflict(edit, other):
                return True
        return False

    def add(self, edit: Edit) -> None:
        if edit in self._seen:
            return
        self._seen.add(edit)
        self.edits.append(edit)
        insort(self._sorted, edit, key=lambda e: (e.start, e.end))


@dataclass
class FixOutcome:
    text: str  # the fixed text
    applied: list[Finding] = field(default_factory=list)  # positions in the original text
    remaining: list[Finding] = field(default_factory=list)  # positions in the fixed text
    remaining_in_original: list[Finding] = field(default_factory=list)  # the same findings, in the original text


Approver = Callable[[str, Finding], bool]


def _node_count(tree: ast.AST) -> int:
    """``budget.count_nodes(tree)``; in the language server (``ast_reuse``
    active) each top-level statement's count is kept with its node, which a
    later version keeps only for the same statement. A module's count is its
    own node, its statements' and its ``type_ignores`` (no child nodes)."""
    if ast_reuse.active() is None or type(tree) is not ast.Module:
        return budget.count_nodes(tree)
    statements = sum(ast_reuse.remembered("nodes", statement, lambda statement=statement: _statement_count(statement)) for statement in tree.body)
    return 1 + len(tree.type_ignores) + statements


_BODIED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _statement_count(statement: ast.stmt) -> int:
    """``budget.count_nodes(statement)``; a def's or class's as its own node,
    its other fields' nodes, and each body statement's count, kept with it
    (a long def typed in keeps the body statements the edit did not touch:
    ``ast_reuse.AstReuse._rebuilt``)."""
    if type(statement) not in _BODIED:
        return budget.count_nodes(statement)
    count = 1
    for name in statement._fields:
        value = getattr(statement, name, None)
        if name == "body":
            count += sum(ast_reuse.remembered("nodes", inner, lambda inner=inner: _statement_count(inner)) for inner in value)
        elif type(value) is list:
            count += sum(budget.count_nodes(item) for item in value if isinstance(item, ast.AST))
        elif isinstance(value, ast.AST):
            count += budget.count_nodes(value)
    return count


class Engine:
    def __init__(
        self, rules: Sequence[Any], options: Mapping[str, Mapping[str, Any]] | None = None, ignored_codes: Iterable[str] = (), unsafe_fixes: bool = False,
    ) -> None:
        ignored = set(ignored_codes)
        self.unsafe_fixes = unsafe_fixes  # apply fixes that may change more than the device
        # Rules may come as classes or as registry table entries (RuleInfo).
        self.rules = tuple(load(rule) for rule in rules if rule.code not in ignored)
        self.options = options or {}

    def lint(self, text: str, project: Any = None, triggers: bool = True, triggered: Collection[str] | None = None) -> list[Finding]:
        """Findings for ``text``, sorted by position, suppressions applied.
        ``project``: facts about the run's other files, handed to the rules as is.
        ``triggers=False``: every rule runs, whatever the text shows (facts
        from outside the text, such as an error's message, may say what it does not).
        ``triggered``: the codes of the rules whose triggers the caller has
        already tried on this very text and found matching; not tried again."""
        # The file's caches (trees, metadata, the analyses screens and rules
        # share) are dropped as soon as it is done. They hold cycles (a
        # context's spans point back at it), and dropped they are freed at
        # once, by reference counting, instead of waiting for the cycle
        # collector to walk millions of objects to find them.
        shared: dict[str, Any] = {}
        with _no_cycle_collection(), ast_reuse.walking():
            try:
                return self._lint(text, project, triggers, triggered, shared)
            finally:
                shared.clear()

    def _lint(self, text: str, project: Any, triggers: bool, triggered: Collection[str] | None, shared: dict[str, Any]) -> list[Finding]:
        if not triggers:
            rules = list(self.rules)
        elif triggered is not None:
            rules = [rule for rule in self.rules if rule.code in triggered]
        else:
            rules = [rule for rule in self.rules if rule.might_match(text)]
        # Rules that judge the file's # noqa directives (unused-noqa) visit
        # nothing: they are handed the directives once the others have run.
        judges = [rule for rule in rules if rule.judges_noqa]
        rules = [rule for rule in rules if not rule.judges_noqa]
        found, findings = self._visit(text, rules, project, triggers, shared)
        if judges:
            findings = findings + self._judge(text, judges, found)
        # After suppression: silencing one rule must not hide another's finding.
        # After suppression: silencing one rule must not hide another's finding.
        return sorted(_one_per_value(_one_per_span(findings), self.unsafe_fixes), key=lambda f: (f.start, f.code, f.end, f.message))

    def _judge(self, text: str, judges: Sequence[Any], found: Sequence[Finding]) -> list[Finding]:
        """What the judging rules say of the directives, given what the
        others found (``found``, before suppression) and the codes of every
        rule that runs on this file: those a trigger or a screen turned away
        ran too, and found nothing. Their findings are suppressed as any
        other (``# noqa: FDV100``, ``# fixdev: ignore[unused-noqa]``)."""
        directives = noqa.directives(text)
        if not directives:
            return []
        index = LineIndex(text)
        directives = noqa.with_usage(directives, found, index)
        ran = frozenset(rule.code for rule in self.rules)
        judged = [finding for judge in judges for finding in judge.judge_noqa(text, directives, ran)]
        if not judged:
            return []
        suppressions = noqa.comment_suppressions(text)
        return [finding for finding in judged if not noqa.is_suppressed(finding, index, suppressions)]

    def _visit(self, text: str, rules: Sequence[Any], project: Any, triggers: bool, shared: dict[str, Any]) -> tuple[list[Finding], list[Finding]]:
        """The rules' findings (before suppression), and those the report
        keeps (suppressions applied)."""
        if not rules:
            syntax_check(text)
            return [], []
        stop.checkpoint()
        # The language server's: parsed in pieces against the version before,
        # unchanged statements keeping their nodes (the CLI: one whole parse).
        tree, cpython_error = ast_reuse.parse(text, _cpython_parse)
        if tree is not None and triggers:
            # Screens read CPython's tree: most files a trigger matches hold
            # nothing for any rule, and then libcst never parses them.
            screening = Screening(text, tree, project, shared)
            passed = []
            for rule in rules:
                stop.checkpoint()  # between steps only (the language server's newer change)
                if rule.screen(screening):
                    passed.append(rule)
            rules = passed
            if not rules:
                return [], []
        if tree is not None:
            budget.check(tree, text, _node_count)  # before libcst's tree, which takes most of a file's memory
        stop.checkpoint()
        module = _libcst_parse(text, cpython_error, tree)
        stop.checkpoint()
        cache = reparse.active()
        if cache is not None and cache.last is module:
            shared["code"] = parseable_text(text)  # put together from pieces, checked to be the text: no generation needed
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        context = RuleContext(module=module, text=text, wrapper=wrapper, options=self.options, shared=shared, project=project, tree=tree)
        visitors = [rule(context) for rule in rules]
        context.run(visitors)
        found = findings = [finding for visitor in visitors for finding in visitor.findings]
        if not findings:
            return [], []
        spans = context.spans()
        index = LineIndex(text)
        lines = {index.position(offset)[0] for f in findings for offset in (f.start, max(f.start, f.end - 1))}
        suppressions = noqa.suppressed_codes(text, module, spans.whole_file, lines)
        if spans.whole:
            # Positioned as a whole module: its code must be the text. (A
            # statement at a time, each one's code was checked where it stands.)
            check_round_trip(context.code(), text)
        if suppressions:
            findings = [f for f in findings if not noqa.is_suppressed(f, index, suppressions)]
        if any(f.fix is None for f in findings) and getattr(project, "never_runs", None) is not None and project.never_runs():
            # A report without a fix promises that the line can fail; in a
            # module nothing imports, runs or names (the run's facts say
            # so), it never runs. Fixes stay: they are harmless there.
            findings = [f for f in findings if f.fix is not None]
        return found, findings

    def fix(
        self, text: str, approve: Approver | None = None, project: Any = None, triggers: bool = True, triggered: Collection[str] | None = None,
    ) -> FixOutcome:
        """Apply fixes until none is left; ``approve`` may veto each one.
        ``triggered`` is ``lint``'s, for ``text`` (a fixed text's triggers are tried again)."""
        outcome = FixOutcome(text)
        rounds: list[_Round] = []  # the edits of each round, as applied
        # A declined fix stays declined for the run. Other fixes move it (and
        # may rewrite text around it) between rounds, so it is known by its
        # rule and its span in the original text, which do not change.
        declined: set[tuple[str, int, int]] = set()
        for round_number in range(MAX_ROUNDS):
            findings = self.lint(outcome.text, project, triggers, triggered if round_number == 0 else None)
            taken = _Taken()
            chosen: list[Finding] = []
            # Findings that share one fix (two names one inserted line moves)
            # take the answer given for it: asked once, applied or declined together.
            answered: dict[tuple[Edit, ...], bool] = {}
            for finding in findings:
                if finding.fix is None or not (finding.fix.safe or self.unsafe_fixes):
                    continue
                original = _in_original(finding, rounds)
                key = (finding.code, original.start, original.end)
                if key in declined:
                    continue
                edits = tuple(sorted(finding.fix.edits))
                if edits in answered:
                    if answered[edits]:
                        chosen.append(finding)
                    else:
                        declined.add(key)
                    continue
                if any(taken.overlaps(edit) for edit in finding.fix.edits):
                    continue
                answered[edits] = approve is None or approve(outcome.text, finding)
                if not answered[edits]:
                    declined.add(key)
                    continue
                for edit in finding.fix.edits:
                    taken.add(edit)
                chosen.append(finding)
            if not chosen:
                outcome.remaining = findings
                outcome.remaining_in_original = [_in_original(finding, rounds) for finding in findings]
                return outcome
            applied_edits = [_with_newline(edit, outcome.text) for edit in taken.edits]
            new_text = apply_edits(outcome.text, applied_edits)
            self._check_parses(outcome.text, new_text, chosen)
            outcome.text = new_text
            # Applied findings are reported in the original text's terms.
            outcome.applied.extend(_in_original(finding, rounds) for finding in chosen)
            rounds.append(_Round(sorted(applied_edits)))
        raise FixConflictError(f"fixes did not settle after {MAX_ROUNDS} rounds; nothing written")

    def _check_parses(self, old: str, new: str, chosen: Sequence[Finding]) -> None:
        try:
            parse(new)
        except SourceError:
            for finding in chosen:  # name the culprit
                try:
                    parse(apply_edits(old, finding.fix.edits))
                except SourceError as exc:
                    raise FixConflictError(
                        f"internal error: the {finding.code} [{finding.name}] fix gives code that does not parse ({exc}); nothing written"
                    ) from None
            raise FixConflictError("internal error: the combined fixes give code that does not parse; nothing written") from None


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cycle collector paused while one file is analysed. A file's trees
    and flow are millions of objects that live until it is done: the
    collector, run every few hundred allocations, walked them again and again
    (a quarter of a run over real code, most of it in full collections).
    When the file is done they hold no cycle and are freed by reference
    counting (``lint``); the collector's next run finds little left."""
    if not gc.isenabled():  # already paused (fix lints round after round)
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Round:
    """One round's edits (sorted, none overlapping), with where each edit's
    content starts and ends in the new text and the shift before it, made
    once: an offset is mapped back by bisection (the first edit whose new end
    is at or after it decides), so placing a round's n findings costs n log n,
    not n² as a walk over the round's edits per finding did."""

    def __init__(self, edits: Sequence[Edit]) -> None:
        self.edits = edits
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.deltas: list[int] = []  # the shift before each edit
        delta = 0
        for edit in edits:
            self.deltas.append(delta)
            self.starts.append(edit.start + delta)
            self.ends.append(edit.start + delta + len(edit.content))
            delta += len(edit.content) - (edit.end - edit.start)
        self.delta = delta

    def back(self, offset: int, end: bool = False) -> int:
        """An offset in the text after the edits → the offset in the text before
        them. A point inside new content maps to the replaced text's start, or,
        for the ``end`` of a span, to its end: a span reaching into rewritten
        text maps to a span covering what was rewritten."""
        k = bisect_left(self.ends, offset)
        if k == len(self.edits):
            return offset - self.delta
        edit, new_start = self.edits[k], self.starts[k]
        if offset < new_start:
            return offset - self.deltas[k]
        if offset < self.ends[k]:
            return edit.end if end and offset > new_start else edit.start
        return edit.end


def _in_original(finding: Finding, rounds: Sequence[_Round]) -> Finding:
    def back(offset: int, end: bool = False) -> int:
        for shift in reversed(rounds):
            offset = shift.back(offset, end)
        return offset

    if not rounds:
        return finding
    fix = finding.fix
    if fix is not None:
        fix = dataclasses.replace(fix, edits=tuple(Edit(back(e.start), back(e.end, True), e.content) for e in fix.edits))
    return dataclasses.replace(finding, start=back(finding.start), end=back(finding.end, True), fix=fix)


def _one_per_span(findings: Iterable[Finding]) -> list[Finding]:
    """One problem, one finding: where rules report the very same span, keep
    one, the one with a fix first, then the lowest code. Counts and summaries
    then agree whatever mode runs (each fix is applied once either way)."""
    best: dict[tuple[int, int], Finding] = {}
    for finding in findings:
        span = (finding.start, finding.end)
        kept = best.get(span)
        if kept is None or _preference(finding) < _preference(kept):
            best[span] = finding
    return list(best.values())


def _one_per_value(findings: list[Finding], unsafe_fixes: bool) -> list[Finding]:
    """One value, one fix: a finding about a value made at spans where other
    findings' fixes make it on the device (``device=`` on the factory) is the
    same bug, fixed at its source; it is dropped, lest both fixes land
    (``torch.tensor(w, device=d)`` and then ``w = w.to(d)``). Only where
    those source fixes are ones the run applies: a source fix left to
    ``--unsafe-fixes`` leaves the downstream one in place."""
    placed = {(f.start, f.end) for f in findings if f.places_value and f.fix is not None and (f.fix.safe or unsafe_fixes)}
    if not placed:
        return findings
    return [f for f in findings if not (f.origins and all(origin in placed for origin in f.origins))]


def _preference(finding: Finding) -> tuple:
    return (finding.fix is None, finding.code, finding.message)


def _with_newline(edit: Edit, text: str) -> Edit:
    """Rules write line breaks as the module's default newline; in a file with
    lone CRs (which libcst saw as LFs) they must be CRs again."""
    if "\n" in edit.content and "\r" in text and "\n" not in text:
        return Edit(edit.start, edit.end, edit.content.replace("\n", "\r"))
    return edit
