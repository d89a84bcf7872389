"""mokkafs-hook's link and ldcache (createContainer hooks of the CDI spec's ``nvml`` device),
on a bundle made here: the links and the linker cache land in the container's root and
nowhere else, whatever links the image holds, and nothing they cannot do fails the container."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mokkafs.delivery.cdi import hook_path, package_nvml_library
from tests.helpers.tools import require_tool

LIB_DIR = "/usr/lib/x86_64-linux-gnu"
VERSIONED = "libnvidia-ml.so.550.163.01"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """An OCI bundle whose root holds /etc and the library at its versioned name, as the
    runtime leaves it before the hooks run."""
    lib = tmp_path / "rootfs" / LIB_DIR.lstrip("/")
    lib.mkdir(parents=True)
    (tmp_path / "rootfs/etc").mkdir()
    (lib / VERSIONED).write_bytes(Path(package_nvml_library()).read_bytes())
    (tmp_path / "config.json").write_text(json.dumps({"root": {"path": "rootfs"}}))
    return tmp_path


def hook(bundle: Path, *args: str) -> str:
    """Run the hook as the runtime does (the OCI state on stdin); it never fails."""
    state = json.dumps({"ociVersion": "1.0.2", "id": "c1", "pid": 1, "bundle": str(bundle)})
    result = subprocess.run([hook_path(), *args], input=state, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_links_and_the_linker_cache_as_the_toolkits_hooks_make_them(bundle: Path) -> None:
    require_tool("ldconfig")
    assert hook(bundle, "link", VERSIONED, f"{LIB_DIR}/libnvidia-ml.so.1",
                "libnvidia-ml.so.1", f"{LIB_DIR}/libnvidia-ml.so") == ""
    lib = bundle / "rootfs" / LIB_DIR.lstrip("/")
    assert (lib / "libnvidia-ml.so.1").readlink() == Path(VERSIONED)
    assert (lib / "libnvidia-ml.so").readlink() == Path("libnvidia-ml.so.1")
    hook(bundle, "ldcache", LIB_DIR)
    cache = bundle / "rootfs/etc/ld.so.cache"
    listed = subprocess.run(["ldconfig", "-p", "-C", str(cache)], capture_output=True,
                            text=True, check=True).stdout
    assert f"libnvidia-ml.so.1 (libc6,x86-64) => {LIB_DIR}/libnvidia-ml.so.1" in listed
    # again, as at every container's start: the same links, replaced
    hook(bundle, "link", VERSIONED, f"{LIB_DIR}/libnvidia-ml.so.1")
    assert (lib / "libnvidia-ml.so.1").readlink() == Path(VERSIONED)


def test_links_resolve_inside_the_containers_root(bundle: Path, tmp_path: Path) -> None:
    """An image's link pointing at a host path is followed inside the root, never out."""
    outside = tmp_path / "outside"
    outside.mkdir()
    lib = bundle / "rootfs" / LIB_DIR.lstrip("/")
    (lib / "escape").symlink_to(outside)
    note = hook(bundle, "link", VERSIONED, f"{LIB_DIR}/escape/libnvidia-ml.so.1")
    assert "cannot make the link" in note and "links not all made" in note
    assert not any(outside.iterdir())


def test_a_file_of_the_image_is_left_and_bad_arguments_refused(bundle: Path) -> None:
    lib = bundle / "rootfs" / LIB_DIR.lstrip("/")
    (lib / "libnvidia-ml.so").write_text("the image's own\n")
    note = hook(bundle, "link", "libnvidia-ml.so.1", f"{LIB_DIR}/libnvidia-ml.so",
                "../../etc/passwd", f"{LIB_DIR}/libnvidia-ml.so.1",
                "libnvidia-ml.so.1", "relative/libnvidia-ml.so")
    assert "is in the image and not a link; left" in note
    assert note.count("not a name and an absolute path") == 2
    assert (lib / "libnvidia-ml.so").read_text() == "the image's own\n"
    assert not (lib / "libnvidia-ml.so.1").exists()


def test_a_cache_that_cannot_be_written_is_reported_not_fatal(bundle: Path) -> None:
    (bundle / "rootfs/etc").rmdir()
    note = hook(bundle, "ldcache", LIB_DIR)
    assert "the container's linker cache was not updated" in note
    assert not (bundle / "rootfs/etc").exists()
