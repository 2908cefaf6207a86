"""Processing many files on several cores, results in input order."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Iterator, Sequence

from fixdev.files import cache
from fixdev.files.runner import FileResult, Mode, Overrides, process_file

# Below this many files a pool costs more (start-up, imports) than it saves.
MIN_FILES_FOR_POOL = 8


# The run's project facts, in a worker: sent once, when the worker starts.
_project: Any = None


def _start_worker(project: Any) -> None:
    global _project
    _project = project


def _work(task: tuple[Path, Mode, Overrides, bool], project: Any = None) -> FileResult:
    path, mode, overrides, use_cache = task
    return process_file(path, mode, overrides, use_cache=use_cache, project=project)


def _work_in_worker(task: tuple[Path, Mode, Overrides, bool]) -> FileResult:
    return _work(task, _project)


def project_of(paths: Sequence[Path], use_cache: bool = False) -> Any:
    """What the rules may know about the run's files together (which file
    each import means, what its functions return): an index of the paths,
    read no further until a rule asks (``fixdev.analysis.project``)."""
    from fixdev.analysis.project import Project  # no libcst; the files are read when asked

    return Project(paths, use_cache=use_cache)


def process_files(paths: Sequence[Path], mode: Mode, overrides: Overrides, jobs: int, use_cache: bool = True) -> Iterator[FileResult]:
    """Results in input order, streamed as soon as they are ready. Cached
    results are taken here, in this process; only files that need work go to
    the pool, so a warm run starts no workers at all."""
    project = project_of(paths, use_cache)
    ready: dict[int, FileResult] = {}
    if use_cache and not cache.is_empty():  # (a first run has nothing to look up: the files go straight to the workers)
        for i, path in enumerate(paths):
            hit = process_file(path, mode, overrides, use_cache=True, cache_only=True, project=project)
            if hit is not None:
                ready[i] = hit
    pending = [i for i in range(len(paths)) if i not in ready]
    use_pool = jobs > 1 and len(pending) >= MIN_FILES_FOR_POOL
    if use_pool:
        # Largest files first: the last ones to finish are then small, and no
        # worker waits long for another at the end (results still come out
        # in input order).
        pending.sort(key=lambda i: _size(paths[i]), reverse=True)
    tasks = [(paths[i], mode, overrides, use_cache) for i in pending]
    pool_options = {"max_workers": min(jobs, len(tasks)), "initializer": _start_worker, "initargs": (project,)}
    with ProcessPoolExecutor(**pool_options) if use_pool else _NoPool() as pool:
        # Small chunks keep one huge file from holding the others back.
        computed = pool.map(_work_in_worker, tasks, chunksize=max(1, min(8, len(tasks) // (jobs * 8)))) if use_pool else (_work(task, project) for task in tasks)
        following = 0
        for i, result in zip(pending, computed):
            ready[i] = result
            while following in ready:
                yield ready.pop(following)
                following += 1
    while following in ready:
        yield ready.pop(following)
        following += 1


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # process_file says what is wrong with it


class _NoPool:
    def __enter__(self) -> "_NoPool":
        return self

    def __exit__(self, *exc: object) -> None:
        return None
