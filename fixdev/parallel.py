"""Processing many files on several cores, results in input order."""

from __future__ import annotations

import os
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
    tasks = [(path, mode, overrides, use_cache) for path in paths]
    if jobs <= 1 or len(tasks) < MIN_FILES_FOR_POOL:
        yield from map(_work, tasks)
        return
    # Largest files first would balance better, but results must stream in
    # input order; small chunks keep one huge file from holding the others.
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
        yield from pool.map(_work, tasks, chunksize=max(1, min(8, len(tasks) // (jobs * 8))))
