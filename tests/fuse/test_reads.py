"""Reads across swaps on a real mount, in the pass's cache mode (scripts/test.sh runs each):
a whole read (open, read, close) sees one generation, sizes and content together, and a read
in pieces sees what its mode promises (docs/architecture.md, "Swaps")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.live import Live, live_mount, profile_text, rename_over, requests
from tests.helpers.mounts import REPO, wait_for
from tests.helpers.pass_mode import PASS_MODE

MODE = PASS_MODE
OLD_FW, NEW_FW = "28.39.2048", "22.36.1010-rc12"  # the two generations differ in length too
SWAPS = 30


def profiles() -> dict[bytes, str]:
    """Each generation's fw_ver bytes -> its profile text (h100 with one firmware or the
    other: an HCA-only change, so each swap is quick)."""
    old = profile_text("h100")
    new = old.replace(f'fw_version: "{OLD_FW}"', f'fw_version: "{NEW_FW}"')
    assert new != old
    return {f"{OLD_FW}\n".encode(): old, f"{NEW_FW}\n".encode(): new}


def fw_files(live: Live) -> list[Path]:
    ib = live.mount.sys / "class/infiniband"
    return sorted(ib / name / "fw_ver" for name in os.listdir(ib))


def test_whole_reads_during_swaps_see_one_generation(tmp_path: Path) -> None:
    """Readers open, read and close files whose content and length alternate between two
    generations while the profile swaps between them: every read is one generation exactly
    (no new bytes cut to the old length, none padded with NULs, none old cut to the new)."""
    texts = profiles()
    with live_mount(tmp_path, "h100") as live:
        files = fw_files(live)
        assert len(files) >= 4
        listing = tmp_path / "paths"
        listing.write_text("".join(f"{f}\n" for f in files))
        stop = tmp_path / "stop"
        outs = [tmp_path / f"reader{i}.jsonl" for i in range(2)]
        readers = [subprocess.Popen([sys.executable, "-m", "tests.helpers.reader",
                                     str(listing), str(out), str(stop)], cwd=REPO)
                   for out in outs]

        def written() -> int:
            return sum(out.stat().st_size for out in outs if out.exists())

        try:
            generation = live.generation()
            order = list(texts.values())
            for i in range(SWAPS):
                # Readers read between every two swaps (their output grows), however slow.
                size = written()
                wait_for(lambda: written() > size, 20, "the readers' progress")  # noqa: B023
                rename_over(live, order[(i + 1) % 2])
                generation += 1
                live.wait_generation(generation)
        finally:
            stop.touch()
            for r in readers:
                r.wait(timeout=30)
    reads = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    seen = [bytes.fromhex(read["data"]) if "data" in read else read["errno"]
            for read in reads]
    torn = [data for data in seen if data not in texts]
    assert len(seen) > SWAPS
    assert not torn, f"{len(torn)} of {len(seen)} reads were torn, e.g. {torn[:3]}"
    assert set(seen) == set(texts)  # both generations were read


def test_a_read_in_pieces(tmp_path: Path) -> None:
    """A reader that takes a file a byte per read() call. keep-cache mode: its open holds one
    generation, whatever swaps come before its last byte, though another reader sees the
    new one meanwhile (and the kernel the new size). no-open mode (no open to hold one): its
    first call fetches the whole file into the page cache with one READ, and the rest is
    served from there."""
    texts = profiles()
    (short, short_text), (long, long_text) = texts.items()
    assert len(long) > len(short)
    with live_mount(tmp_path, "h100") as live:
        rename_over(live, long_text)
        live.wait_generation(2)
        fw = fw_files(live)[0]
        assert fw.read_bytes() == long
        with open(fw, "rb", buffering=0) as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # no page kept
            before = requests(live)
            got = f.read(1)
            if MODE == "keep-cache":
                rename_over(live, short_text)
                live.wait_generation(3)
                assert fw.read_bytes() == short  # a reader after the swap sees the new
                assert os.stat(fw).st_size == len(short)
            while piece := f.read(1):
                got += piece
                if MODE == "keep-cache" and len(got) == 4:
                    rename_over(live, long_text)
                    live.wait_generation(4)
                    rename_over(live, short_text)
                    live.wait_generation(5)
            asked = requests(live)
        assert got == long
        if MODE == "no-open":
            assert asked.get("read", 0) - before.get("read", 0) == 1


def test_a_listing_read_across_a_swap_gives_the_kernel_the_new_sizes(tmp_path: Path) -> None:
    """Every listing is READDIRPLUS: it gives the kernel each entry's attributes, which it
    keeps an hour. A directory opened before a swap and read after it must give those of the
    tree in force (keep-cache mode holds the names it opened with), or stat shows a size the
    bytes no longer have."""
    texts = profiles()
    (short, _), (long, long_text) = texts.items()
    with live_mount(tmp_path, "h100") as live:
        fw = fw_files(live)[0]
        assert os.stat(fw).st_size == len(short)
        fd = os.open(fw.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            rename_over(live, long_text)
            live.wait_generation(2)
            assert "fw_ver" in os.listdir(fd)
        finally:
            os.close(fd)
        assert os.stat(fw).st_size == len(long)
        assert fw.read_bytes() == long
