"""What the workers of one pytest run share (scripts/test.sh runs the suite in several
processes with pytest-xdist, each with session fixtures of its own): the run's temp
directory, and a lock in it, so that what one worker makes once (a build, an image) the
others wait for and reuse instead of making it beside it."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def run_dir(factory: pytest.TempPathFactory) -> Path:
    """The run's temp directory: under pytest-xdist, each worker's own (``popen-gwN``) is
    below it; without, it is the run's own."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def run_lock(factory: pytest.TempPathFactory, name: str) -> Iterator[None]:
    """Held by one worker of the run at a time."""
    with open(run_dir(factory) / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        yield


def made_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``make(dest)`` run once in the run for the directory ``dest`` (``name`` in the run's
    directory): the first worker to ask makes it, the others wait and get the same one. A
    make that fails leaves nothing: the next to ask tries again, and fails the same way."""
    dest = run_dir(factory) / name
    with run_lock(factory, name):
        if not dest.is_dir():
            work = run_dir(factory) / f"{name}.making"
            shutil.rmtree(work, ignore_errors=True)  # a worker killed while making it
            work.mkdir()
            try:
                make(work)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
            work.rename(dest)
    return dest

