"""Processing many files on several cores, results in input order."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Iterator, Sequence

from .runner import FileResult, Mode, Overrides, process_file

# Below this many files a pool costs more (start-up, imports) than it saves.
MIN_FILES_FOR_POOL = 8


def _work(task: tuple[Path, Mode, Overrides, bool]) -> FileResult:
    path, mode, overrides, use_cache = task
    return process_file(path, mode, overrides, use_cache=use_cache)


def process_files(paths: Sequence[Path], mode: Mode, overrides: Overrides, jobs: int, use_cache: bool = True) -> Iterator[FileResult]:
    """Results in input order, streamed as soon as they are ready. Cached
    results are taken here, in this process; only files that need work go to
    the pool, so a warm run starts no workers at all."""
    ready: dict[int, FileResult] = {}
    if use_cache:
        for i, path in enumerate(paths):
            hit = process_file(path, mode, overrides, use_cache=True, cache_only=True)
            if hit is not None:
                ready[i] = hit
    pending = [i for i in range(len(paths)) if i not in ready]
    tasks = [(paths[i], mode, overrides, use_cache) for i in pending]
    use_pool = jobs > 1 and len(tasks) >= MIN_FILES_FOR_POOL
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) if use_pool else _NoPool() as pool:
        # Small chunks keep one huge file from holding the others back.
        computed = pool.map(_work, tasks, chunksize=max(1, min(8, len(tasks) // (jobs * 8)))) if use_pool else map(_work, tasks)
        following = 0
        for i, result in zip(pending, computed):
            ready[i] = result
            while following in ready:
                yield ready.pop(following)
                following += 1
    while following in ready:
        yield ready.pop(following)
        following += 1


class _NoPool:
    def __enter__(self) -> "_NoPool":
        return self

    def __exit__(self, *exc: object) -> None:
        return None
