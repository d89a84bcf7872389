"""The order modules run in (a plugin): the slowest first. scripts/test.sh hands whole
modules to its pytest-xdist workers in this order (--dist loadfile --no-loadscope-reorder):
a worker that starts the image build last would keep the run waiting minutes after the
other worker finished; many short unit tests last fill the gaps. A module's tests keep their
order and stay together (its module fixtures are made once)."""

from __future__ import annotations

import pytest

from tests.helpers.passes import where

# Most expensive first (from --durations): the image build, the other podman and systemd
# tests, then the FUSE mounts and consumers; whatever matches none comes last.
SLOWEST_FIRST = ("tests/deploy/test_image.py", "tests/deploy/", "tests/containers/",
                 "tests/e2e/", "tests/consumers/", "tests/capture/", "tests/fuse/",
                 "tests/native/")


def rank(item: pytest.Item) -> int:
    return next((i for i, p in enumerate(SLOWEST_FIRST) if where(item).startswith(p)),
                len(SLOWEST_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=rank)  # stable: the collection's order within a rank
