"""The pyfuse3 patch's rationale, shown with both builds (native/pyfuse3/README.md): a file
system that leaves ``open`` and ``opendir`` unimplemented, as pyfuse3 does by default, is
handed file handle 0 by every read and readdir of stock pyfuse3, and the inode by the
patched one."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mokkafs.testing import bare_fs
from tests.helpers.mounts import REPO, STOCK_PYFUSE3, is_mounted


@contextmanager
def no_open_fs(mnt: Path, pythonpath: str | None) -> Iterator[Path]:
    env = {"PYTHONPATH": pythonpath} if pythonpath else None
    with bare_fs([sys.executable, "-m", "tests.helpers.no_open_fs"], mnt, env=env,
                 cwd=REPO) as proc:
        yield mnt
    assert proc.returncode == 0
    assert not is_mounted(mnt)


@pytest.mark.parametrize(("build", "pythonpath", "fh"), [
    ("stock", str(STOCK_PYFUSE3), {"a": 0, "b": 0}),
    ("patched", None, {"a": 2, "b": 3}),
])
def test_reads_are_given_the_inode_only_with_the_patch(tmp_path: Path, build: str,
                                                       pythonpath: str | None,
                                                       fh: dict[str, int]) -> None:
    if pythonpath:
        assert (STOCK_PYFUSE3 / "pyfuse3").is_dir(), "run scripts/setup.sh: it installs it"
    with no_open_fs(tmp_path / "mnt", pythonpath) as mnt:
        assert {name: (mnt / name).read_text() for name in fh} == {
            name: f"fh={n}\n" for name, n in fh.items()}
        if build == "stock":  # the root's listing is asked for with handle 0 too
            with pytest.raises(OSError) as refused:
                os.listdir(mnt)
            assert refused.value.errno == errno.EBADF
        else:
            assert sorted(os.listdir(mnt)) == ["a", "b"]
