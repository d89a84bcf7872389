"""The capture's confined reader: links resolve inside the root and never out of it, only
regular files are opened, no more than the limit is read, and a reader process that dies costs
one path."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from mokkafs.capture.guarded import Root
from mokkafs.capture.reader import Unreadable


def test_links_resolve_inside_the_root_and_never_out(tmp_path: Path) -> None:
    (tmp_path / "outside").write_text("secret\n")
    root = tmp_path / "root"
    (root / "a/b").mkdir(parents=True)
    (root / "a/b/attr").write_text("0x10de\n")
    (root / "link").symlink_to("a/b")
    (root / "a/b/up").symlink_to("../../..")  # climbs out
    (root / "abs").symlink_to(str(tmp_path / "outside"))
    (root / "loop").symlink_to("loop")
    with Root(str(root)) as r:
        assert r.text("link/attr") == "0x10de"
        assert r.resolve("link/attr") == ["a", "b", "attr"]
        for path, reason in (("a/b/up/outside", "a link out of the root"),
                             ("abs", "a link out of the root"),
                             ("loop", "a symbolic link loop"),
                             ("missing", "absent")):
            with pytest.raises(Unreadable) as err:
                r.read(path)
            assert err.value.reason == reason


def test_only_regular_files_within_the_limit_are_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big").write_bytes(b"x" * 5000)
    (tmp_path / "page").write_bytes(b"y" * 4096)
    with Root(str(tmp_path)) as r:
        with pytest.raises(Unreadable, match="FIFO"):
            r.read("fifo")
        with pytest.raises(Unreadable, match="larger than 4096"):
            r.read("big")
        assert r.read("page") == b"y" * 4096
        assert r.read("big", limit=8192) == b"x" * 5000
        assert [(e.name, e.kind) for e in r.listdir(".")] == [
            ("big", "file"), ("fifo", "other"), ("page", "file")]


def test_a_reader_that_dies_costs_one_path_and_none_is_left(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("1\n")
    with Root(str(tmp_path)) as r:
        assert r.text("a") == "1"
        first = r._readers.live_pid()
        assert first is not None
        os.kill(first, signal.SIGKILL)
        with pytest.raises(Unreadable, match="its reader died"):
            r.read("a")
        assert r.text("a") == "1"  # a fresh reader
        second = r._readers.live_pid()
        assert second != first
    assert not Path(f"/proc/{first}").exists() and not Path(f"/proc/{second}").exists()
