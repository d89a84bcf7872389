"""``mokkafs render DIR`` touches only what it made: it refuses a directory it did not write
(a file of someone's is kept), a symbolic link, a mount below DIR, and never writes through a
link planted where it once put its temporary files."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.delivery.render import MARKER
from tests.helpers.cli import mokkafs

REFUSED = 2  # UsageError


def render(dest: Path) -> subprocess.CompletedProcess[str]:
    return mokkafs("render", "--profile", "t4", "--no-infiniband", str(dest))


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    dest = tmp_path / "view"
    result = render(dest)
    assert result.returncode == 0, result.stderr
    assert (dest / "proc/devices").is_file()
    return dest


def test_a_directory_render_did_not_write_is_refused_and_kept(tmp_path: Path) -> None:
    dest = tmp_path / "someones"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    result = render(dest)
    assert result.returncode == REFUSED
    assert f"{dest} is not a directory mokkafs render wrote" in result.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]
    assert (dest / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("a file")
    result = render(tmp_path / "file")
    assert result.returncode == REFUSED and "is not a directory" in result.stderr
    assert (tmp_path / "file").read_text() == "a file"


def test_an_empty_directory_is_rendered_into(tmp_path: Path) -> None:
    """Nothing to lose there (a ``mktemp -d``); then it is render's own to replace."""
    dest = tmp_path / "empty"
    dest.mkdir()
    for _ in range(2):
        result = render(dest)
        assert result.returncode == 0, result.stderr
        assert (dest / MARKER).is_file() and (dest / "proc/devices").is_file()


def test_a_symlink_as_dir_is_refused(tmp_path: Path, rendered: Path) -> None:
    """Even to a directory render wrote: the link's target is not the path it was given."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("kept")
    for target in (elsewhere, rendered):
        link = tmp_path / f"link-to-{target.name}"
        link.symlink_to(target)
        result = render(link)
        assert result.returncode == REFUSED
        assert f"{link} is a symbolic link" in result.stderr
        assert link.is_symlink()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep"]
    assert (rendered / MARKER).is_file()


def test_links_planted_in_its_output_are_not_followed(tmp_path: Path, rendered: Path) -> None:
    """Links at the names temporary files had (``.NAME.mokkafs-tmp`` beside each file), and
    a link to a directory: the second render replaces the tree, not what the links name."""
    victim = tmp_path / "victim"
    victim.write_text("root's file")
    victims = tmp_path / "victims"
    victims.mkdir()
    (victims / "keep").write_text("kept")
    (rendered / "proc/.devices.mokkafs-tmp").symlink_to(victim)
    (rendered / "sys/.mokkafs-tmp").symlink_to(victim)
    (rendered / "sys/planted").symlink_to(victims)
    result = render(rendered)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "root's file"
    assert sorted(p.name for p in victims.iterdir()) == ["keep"]
    assert not (rendered / "sys/planted").exists()  # the link went, not its target's files
    assert not (rendered / "proc/.devices.mokkafs-tmp").is_symlink()
    assert (rendered / "proc/devices").is_file() and not (rendered / "proc/devices").is_symlink()
    assert not [p for p in tmp_path.iterdir() if ".mokkafs-" in p.name]  # no build left


@pytest.fixture
def bound(tmp_path: Path, rendered: Path) -> Iterator[Path]:
    """A directory of the same filesystem bind-mounted below the rendered tree."""
    victims = tmp_path / "bound"
    victims.mkdir()
    (victims / "keep").write_text("kept")
    point = rendered / "sys/bus/mnt"
    point.mkdir()
    subprocess.run(["mount", "--bind", str(victims), str(point)], check=True)
    try:
        yield victims
    finally:
        subprocess.run(["umount", str(point)], check=True)


def test_a_mount_below_dir_is_not_crossed(rendered: Path, bound: Path) -> None:
    result = render(rendered)
    assert result.returncode == REFUSED
    assert f"{rendered}/sys/bus/mnt is a mount point" in result.stderr
    assert sorted(p.name for p in bound.iterdir()) == ["keep"]
    assert (rendered / MARKER).is_file() and (rendered / "proc/devices").is_file()
