"""A container given the CDI device reads the view's kernel log at /dev/kmsg: a follower
(tests/helpers/kmsg_follow.py) started before a fault sees its Xid once, and util-linux
``dmesg`` there prints the view's records and nothing of the host's."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.containers import CDI_DIR, HOST_TOOLS, IMAGE, RUN, Node, node_args, podman
from tests.helpers.kmsg import apply, running, xids
from tests.helpers.mounts import REPO, free_port, mokkafs_mount, shared_parent

pytestmark = pytest.mark.consumers

FOLLOW = str(REPO / "tests/helpers/kmsg_follow.py")


@pytest.fixture
def kmsg_node(tmp_path: Path, hosttools_image: str) -> Iterator[Node]:
    """An h100 node in the suite's cache mode (in no-open mode, dev/kmsg is a mount of its
    own over the view's file, docs/kmsg.md: the CDI spec binds that)."""
    profile = tmp_path / "config" / "node.yaml"
    profile.parent.mkdir()
    profile.write_text((REPO / "mokkafs/profiles/h100.yaml").read_text())
    kind = f"mokkafs-test-{secrets.token_hex(4)}.io/node"
    spec = CDI_DIR / (kind.replace("/", "_") + ".json")
    port = free_port()
    control = tmp_path / "ctl" / "sock"
    control.parent.mkdir(mode=0o700)
    args = [*node_args(profile, kind, port), "--control", str(control)]
    with shared_parent(tmp_path) as share, mokkafs_mount(share / "node", args) as mount:
        yield Node(mount, kind, spec, f"http://127.0.0.1:{port}", profile, control)
    assert not spec.exists(), "the CDI spec outlived the mount"


def container(node: Node, *command: str) -> list[str]:
    return ["podman", "run", "--rm", *RUN, "--device", node.device(), *HOST_TOOLS,
            "-v", f"{FOLLOW}:/follow.py:ro", IMAGE, *command]


def test_a_container_follows_the_views_kernel_log(kmsg_node: Node, tmp_path: Path) -> None:
    with running(*container(kmsg_node, "python3", "/follow.py", "/dev/kmsg", "end")) as follow:
        follow.until(lambda ls: "ready" in ls, "the follower in the container", timeout=120)
        apply(kmsg_node.control, tmp_path, "  - {name: lost, kind: gpu-lost, target: gpu0}\n")
        follow.until(lambda ls: len(xids(ls)) >= 1, "Xid 79 in the container")
        apply(kmsg_node.control, tmp_path, "  - {name: mark, kind: xid, target: gpu2, xid: 13}\n")
        got = xids(follow.until(lambda ls: len(xids(ls)) >= 2, "the marker"))
        assert got == [("0000:1b:00", 79), ("0000:52:00", 13)], follow.lines
    out = podman(*container(kmsg_node, "dmesg", "-r")[1:]).stdout.splitlines()
    assert out[0].startswith("<6>[") and "NVRM: loading NVIDIA" in out[0], out
    assert xids(out) == got
    assert all(re.match(r"<\d>\[ *\d+\.\d{6}\] NVRM: ", line) for line in out), out
    assert len(out) == 3  # the view's records, and none of the host's

