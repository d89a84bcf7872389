"""The suite's own machinery: the guards around every test (tests/helpers/guards.py) and
which pass of scripts/test.sh runs a test (tests/helpers/passes.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mokkafs.host.mountinfo import parse
from tests.helpers.guards import changed_host_mounts, under
from tests.helpers.mounts import REPO

# One mountinfo, the host's cgroup2 and two pytest-xdist workers' mounts under one run's base.
RUN = "/tmp/pytest-of-root/pytest-7"
MOUNTINFO = f"""\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
41 22 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
90 1 0:50 / {RUN}/popen-gw0/test_a0/mnt rw,nosuid,nodev - fuse.mokkafs mokkafs rw
91 1 0:51 / {RUN}/popen-gw1/test_b0/mnt rw,nosuid,nodev - fuse.mokkafs mokkafs rw
"""


def test_a_worker_sees_only_its_own_mounts_left_behind() -> None:
    """Under pytest-xdist another worker's test holds mounts while this one ends: they are
    below another base directory, and not this test's."""
    entries = parse(MOUNTINFO)
    assert under(Path(f"{RUN}/popen-gw0"), entries) == {f"{RUN}/popen-gw0/test_a0/mnt"}
    assert under(Path(RUN), entries) == {f"{RUN}/popen-gw0/test_a0/mnt",
                                         f"{RUN}/popen-gw1/test_b0/mnt"}


def test_a_host_mount_whose_options_changed_is_named() -> None:
    """What a booting systemd in the host's cgroup namespace did: the host's cgroup2 gained
    nsdelegate. Mounts that come and go (a test's, another worker's) are not the host's."""
    before = parse(MOUNTINFO)
    after = parse(MOUNTINFO.replace("cgroup2 cgroup2 rw", "cgroup2 cgroup2 rw,nsdelegate")
                  .replace(f"91 1 0:51 / {RUN}/popen-gw1/test_b0/mnt", "92 1 0:52 / /tmp/x"))
    assert changed_host_mounts(before, after) == [
        "/sys/fs/cgroup/unified: rw,relatime rw -> rw,relatime rw,nsdelegate"]
    assert changed_host_mounts(before, before) == []


def test_a_long_test_is_not_dumped_as_a_hang_before_its_limit() -> None:
    """pytest-timeout dumps every thread's stack when a test reaches its limit (300 s, or a
    test's own @pytest.mark.timeout); faulthandler_timeout would dump them earlier, in the
    middle of a test that is only slow, such as the image build's (1200 s)."""
    ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert ini["timeout"] == 300
    assert "faulthandler_timeout" not in ini
