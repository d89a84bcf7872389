"""Profiles a hostile or careless user writes: every one is refused in bounded time and memory,
with one line per problem naming the file, the YAML path and the fix, and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.profile.load import MAX_YAML_NODES, expanded_size
from mokkafs.profile.resolve import MAX_PROFILE_BYTES, read_text
from tests.helpers.mounts import REPO, SHIPPED_PROFILES
from tests.helpers.profiles import state_of

H100 = (SHIPPED_PROFILES / "h100.yaml").read_text()


def alias_bomb(levels: int) -> str:
    """Nine levels of ten aliases under ``system:``: 595 bytes that expand to 10^9 nodes."""
    text = "system:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels + 1):
        text += f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n"
    return text


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mokkafs", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=60)


def write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


CASES: dict[str, tuple[str | bytes, str, str]] = {
    # name: (content, expected message, YAML path of the problem)
    "latin-1": (H100.encode() + b"# caf\xe9\n", "not UTF-8 text (at offset", ""),
    "hca-type-over-16-bits": (H100.replace("MT4129", "MT99999"), "at most 65535",
                              "infiniband.hca_type"),
    "alias-bomb": (alias_bomb(9), f"more than {MAX_YAML_NODES:,} YAML nodes", ""),
    "cores": (H100.replace("  root_complexes:", "  cores_per_numa: 4096\n  root_complexes:"),
              "less than or equal to 512", "pcie_topology.cores_per_numa"),
    "numa-node": (H100.replace("numa_node: 1\n", "numa_node: 1023\n", 1), "less than 64",
                  "pcie_topology.root_complexes[4].numa_node"),
    "gpus": ("device_defaults:\n  pci: {device_id: 0x233010DE}\ndevices:\n" + "".join(
        f'  - {{index: {i}, pci: {{bus_id: "0000:{i // 32:02x}:{i % 32:02x}.0"}}}}\n'
        for i in range(10_000)), "at most 64 items", "devices"),
    "infinite-rate": (H100.replace('  guid_prefix: "946dae"\n', '  guid_prefix: "946dae"\n'
                                   "  traffic: {xmit_bytes_per_sec: .inf}\n"),
                      "finite number", "infiniband.traffic.xmit_bytes_per_sec"),
    "multi-line-text": (H100.replace('fw_version: "28.39.2048"', 'fw_version: "28.39\\n2048"'),
                        "one line of text", "infiniband.fw_version"),
    "gid-tables": ("device_defaults:\n  pci: {device_id: 0x233010DE}\ndevices:\n"
                   '  - {index: 0, pci: {bus_id: "0000:1b:00.0"}}\n'
                   "infiniband: {enabled: true, hca_count: 256, gid_table_len: 256, "
                   "pkey_table_len: 256}\n", "files; at most 150,000",
                   "infiniband.gid_table_len"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_with_the_field_named(tmp_path: Path, case: str) -> None:
    content, expected, yaml_path = CASES[case]
    path = write(tmp_path, f"{case}.yaml", content)
    with pytest.raises(ProfileError) as info:
        state_of(path)
    assert expected in str(info.value), str(info.value)
    assert any(p.path == yaml_path for p in info.value.problems), info.value.problems
    result = cli("tree", "--profile", str(path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"mokkafs: invalid profile {path}")
    assert all(line.startswith(f"  {path}") for line in lines[1:]), lines


def test_the_alias_bomb_is_measured_without_expanding_it() -> None:
    import yaml

    node = yaml.compose(alias_bomb(9))
    assert node is not None
    assert expanded_size(node, limit=10**12) > 10**9  # counted, not expanded: this returns


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "loop.yaml", "system: &s\n  again: *s\n")
    with pytest.raises(ProfileError, match="recursive alias"):
        state_of(path)


def test_deep_nesting_is_refused_not_a_crash(tmp_path: Path) -> None:
    block = "".join(f"{'  ' * i}k{i}:\n" for i in range(2000)) + f"{'  ' * 2000}x: 1\n"
    path = write(tmp_path, "deep.yaml", "dynamic_metrics_defaults:\n" + "".join(
        "  " + line + "\n" for line in block.splitlines()))
    result = cli("tree", "--profile", str(path))
    assert result.returncode in (0, 2), result.stderr  # accepted (ignored key) or refused
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", ["missing", "symlink-loop", "directory", "fifo", "too-big",
                                  "broken-link"])
def test_unreadable_inputs(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "node.yaml"
    expected = {"missing": "no such file", "symlink-loop": "a loop of symbolic links",
                "directory": "not a regular file", "fifo": "not a regular file",
                "too-big": f"larger than {MAX_PROFILE_BYTES // 1024} KiB",
                "broken-link": "no such file"}[kind]
    if kind == "symlink-loop":
        os.symlink("node.yaml", path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # a read would block for ever: never opened for a blocking read
    elif kind == "too-big":
        path.write_text("description: x\n" + "# padding\n" * (MAX_PROFILE_BYTES // 10 + 1))
    elif kind == "broken-link":
        os.symlink("elsewhere.yaml", path)
    with pytest.raises(ProfileError, match=expected):
        read_text(path)
    result = cli("tree", "--profile", str(path))
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_mount_refuses_bad_input_before_mounting(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    path = write(tmp_path, "bomb.yaml", alias_bomb(9))
    result = cli("mount", "--profile", str(path), str(mnt))
    assert result.returncode == 2 and "YAML nodes" in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.ismount(mnt)


SECRET = "s3cr3t"
NOT_QUOTED = {
    # a document that is no profile: refused whole, nothing of it named
    "kubeconfig": (f"apiVersion: v1\nkind: Config\nusers:\n- {{name: a, token: {SECRET}}}\n",
                   "not a mokkafs (nvml-mock) profile"),
    "shadow": (f"{SECRET}:$6$x$y:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n",
               "not a mokkafs (nvml-mock) profile"),
    "list": (f"- {SECRET}\n", "expected a mapping"),
    # what a YAML error would quote of the text
    "undefined-alias": (f"system: *{SECRET}\n", "YAML syntax error"),
    "unknown-tag": (f"system: !{SECRET} x\n", "YAML syntax error"),
    # a profile's keys the schema does not have
    "top-level": (f"system: {{}}\n{SECRET}: 1\n", "a top-level key that is not a section"),
    "closed-section": (f"node: {{index: 1, {SECRET}: 2}}\n", "an unknown key in this section"),
    "duplicate-ignored": (f"system: {{{SECRET}: 1, {SECRET}: 2}}\n", "appears twice"),
}


@pytest.mark.parametrize("case", sorted(NOT_QUOTED))
def test_no_error_quotes_what_the_schema_does_not_name(tmp_path: Path, case: str) -> None:
    text, expected = NOT_QUOTED[case]
    with pytest.raises(ProfileError) as info:
        state_of(write(tmp_path, f"{case}.yaml", text))
    assert expected in str(info.value), str(info.value)
    assert SECRET not in str(info.value), str(info.value)
    assert all(p.line is None or p.line >= 1 for p in info.value.problems)
