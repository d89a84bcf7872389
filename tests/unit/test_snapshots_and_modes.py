"""The no-open snapshot store and the choice of cache mode, without a mount."""

from __future__ import annotations

import logging

import pytest

from mokkafs.errors import UsageError
from mokkafs.fuse.cache_mode import CacheMode, choose
from mokkafs.fuse.told import ToldStore


def test_mtime_moves_exactly_when_the_bytes_do() -> None:
    snaps = ToldStore()
    first = snaps.take(7, b"10\n")
    assert snaps.take(7, b"10\n") is first  # unchanged: the kernel keeps its pages
    second = snaps.take(7, b"11\n")
    assert second.mtime_ns > first.mtime_ns
    third = snaps.take(7, b"12\n")
    assert third.mtime_ns > second.mtime_ns  # even within one clock tick
    assert snaps.get(7) is third and snaps.get(8) is None


def test_the_store_keeps_to_its_budget_dropping_the_least_recently_used() -> None:
    snaps = ToldStore(budget=100)
    for inode in range(10):
        snaps.take(inode, bytes(30))
    assert snaps.size <= 100 and len(snaps) == 3
    assert [i for i in range(10) if snaps.get(i)] == [7, 8, 9]
    snaps.take(7, bytes(30))  # used again: now the newest
    snaps.take(10, bytes(30))
    assert snaps.get(8) is None and snaps.get(7) is not None
    snaps.forget(7)
    assert snaps.get(7) is None and snaps.size == 60


def test_auto_picks_no_open_only_with_the_patch(caplog: pytest.LogCaptureFixture,
                                                expected_logs: list[str]) -> None:
    expected_logs.append("lacks the no-open patch")
    assert choose("auto", patched=True) is CacheMode.NO_OPEN
    with caplog.at_level(logging.WARNING):
        assert choose("auto", patched=False) is CacheMode.KEEP_CACHE
    assert "lacks the no-open patch" in caplog.text
    assert choose("keep-cache", patched=True) is CacheMode.KEEP_CACHE


def test_no_open_without_the_patch_and_unknown_modes_are_clear_errors() -> None:
    with pytest.raises(UsageError, match=r"pass-inode-when-no-open\.patch"):
        choose("no-open", patched=False)
    with pytest.raises(UsageError, match="not one of auto, no-open, keep-cache"):
        choose("fast", patched=True)


def test_pinned_snapshots_outlive_the_budget_and_go_when_forgotten() -> None:
    snaps = ToldStore(budget=100)
    pinned = snaps.take(1, b"12345\n", pinned=True)  # a counter rounds keep fresh
    for inode in range(10, 20):  # a walk over the host's sysfs
        snaps.take(inode, bytes(30))
    assert snaps.get(1) is pinned and snaps.size <= 100
    assert snaps.refresh(1, b"12346\n").mtime_ns == pinned.mtime_ns  # stays pinned
    for inode in range(20, 30):
        snaps.take(inode, bytes(30))
    assert snaps.get(1) is not None
    snaps.forget(1)
    assert snaps.get(1) is None
