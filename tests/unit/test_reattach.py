"""What a re-attach makes again over a container's dead bind of the view, from its mount table
and its record (pure: tables in, mounts out)."""

from __future__ import annotations

from pathlib import Path

from mokkafs.delivery.reattach import _Again, _again, _below, _runtime_mounts, live_source
from mokkafs.delivery.records import Record
from mokkafs.host.mountinfo import MountEntry

VIEW = "0:53"  # the dead mount's device


def mount(mount_id: int, parent: int, point: str, fstype: str = "tmpfs", dev: str = "0:70",
          root: str = "/") -> MountEntry:
    return MountEntry(dev, root, point, fstype, fstype, (), mount_id, parent, "rw")


SYS = mount(88, 1, "/sys", "fuse.mokkafs", VIEW, "/sys")
CGROUP = mount(102, 88, "/sys/fs/cgroup")
CPU = mount(103, 102, "/sys/fs/cgroup/cpu", "cgroup", "0:29", "/libpod-1")
MASK = mount(64, 88, "/sys/firmware", dev="0:50")


def test_children_listed_before_their_parent_are_found_after_it() -> None:
    """A re-attached table lists the cgroup copies (made first) before the tmpfs they sit on."""
    table = [SYS, CPU, mount(101, 1, "/run/mokkafs-host/node", "fuse.mokkafs", "0:99"),
             CGROUP, MASK]
    assert [m.mount_id for m in _below(table, "/sys")] == [102, 64, 103]


def test_the_record_gives_back_what_the_kernel_detached() -> None:
    """The table lost /sys/fs/cgroup (a failed revalidation of the dead view detached it);
    the record of that very bind has it, and what was mounted since is kept."""
    later = mount(120, 88, "/sys/kernel/debug", dev="0:80")
    record = Record(Path("/x"), 4026532000, [SYS, MASK, CGROUP, CPU])
    got = _runtime_mounts([SYS, MASK, later], record, "/sys")
    assert [m.point for m in got] == ["/sys/firmware", "/sys/fs/cgroup", "/sys/fs/cgroup/cpu",
                                      "/sys/kernel/debug"]


def test_a_record_of_another_bind_is_not_used() -> None:
    """A record whose /sys is another mount (a namespace inode reused, an older re-attach)."""
    record = Record(Path("/x"), 4026532000, [mount(77, 1, "/sys", "fuse.mokkafs", VIEW, "/sys"),
                                             mount(78, 77, "/sys/fs/cgroup")])
    assert _runtime_mounts([SYS, MASK], record, "/sys") == [MASK]


def test_a_recorded_tmpfs_is_made_fresh_even_when_its_device_number_is_reused() -> None:
    """The kernel detached the container's /sys/fs/cgroup; its device number now belongs to
    a tmpfs of the host's: cloning that would put the host's files in the container."""
    host = mount(40, 1, "/run/other", dev=CGROUP.dev)
    again = _again(CGROUP, [host], set())
    assert isinstance(again, _Again) and again.fd is None and again.tmpfs is not None


def test_a_filesystem_is_cloned_only_if_its_type_and_options_are_the_same() -> None:
    """A recorded cgroup hierarchy whose device number a host filesystem of another kind
    has now: it cannot be made again (and is reported), never cloned from that one."""
    other = mount(41, 1, "/mnt/x", "ext4", CPU.dev)
    assert _again(CPU, [other], {102}) == "/sys/fs/cgroup/cpu: a cgroup mount mokkafs " \
        "cannot make again"


def test_a_dead_bind_whose_root_the_kernel_dropped_is_bound_again_from_its_path() -> None:
    """A walk that met the dead daemon drops the bind's root dentry, and mountinfo then writes
    the root as ``/sys//deleted`` (a soak found a container left on a dead view by it)."""
    assert live_source("/run/mokkafs-host/node", "/sys//deleted") == "/run/mokkafs-host/node/sys"
    assert live_source("/run/mokkafs-host/node/", "/sys") == "/run/mokkafs-host/node/sys"
    assert live_source("/run/mokkafs-host/node", "/") == "/run/mokkafs-host/node"
