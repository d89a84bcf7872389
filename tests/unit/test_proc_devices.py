"""/proc/devices: host sections plus the simulated majors, found by the DRA driver's parser."""

from __future__ import annotations

import re
from pathlib import Path

from mokkafs.surfaces.proc_devices import render
from tests.helpers.profiles import state_of


def dra_major(content: str, name: str) -> int | None:
    """The DRA driver's lookup (dra-driver-nvidia-gpu internal/common/nvcaps.go), as a regex."""
    m = re.search(rf"(?s)Character devices:.*?\n([0-9]+) {re.escape(name)}\n.*Block devices:",
                  content)
    return int(m.group(1)) if m else None


def test_simulated_majors_are_found_by_the_dra_parser() -> None:
    text = render(state_of("h100")).decode()
    assert dra_major(text, "nvidia-caps-imex-channels") == 235
    assert dra_major(text, "nvidia-caps") == 236
    assert dra_major(text, "nvidia-frontend") == 195
    assert dra_major(text, "nvidia-uvm") == 510
    assert dra_major(text, "infiniband_verbs") == 231
    assert dra_major(text, "infiniband_mad") == 231


def test_host_sections_are_kept_and_sorted_by_major() -> None:
    text = render(state_of("h100")).decode()
    chars, block = text.split("Block devices:")
    majors = [int(line.split()[0]) for line in chars.splitlines()[1:] if line.strip()]
    assert majors == sorted(majors)
    assert "  1 mem\n" in chars and "136 pts\n" in chars
    assert block == "\n  7 loop\n259 blkext\n"
    assert "195 nvidia-old-name\n" in chars  # another name on a shared major is the host's


def test_ib_majors_only_with_ib() -> None:
    text = render(state_of("t4")).decode()
    assert "infiniband" not in text
    assert dra_major(text, "nvidia-caps") == 236


def test_majors_are_configurable(tmp_path: Path) -> None:
    src = (Path(__file__).parents[2] / "mokkafs/profiles/t4.yaml").read_text()
    path = tmp_path / "t4.yaml"
    path.write_text(src + "proc_devices: {nvidia_uvm: 234, nvidia_caps_imex_channels: 240}\n")
    text = render(state_of(path)).decode()
    assert dra_major(text, "nvidia-uvm") == 234
    assert dra_major(text, "nvidia-caps-imex-channels") == 240


def test_one_line_per_simulated_name() -> None:
    state = state_of("h100")
    host = "Character devices:\n235 nvidia-caps-imex-channels\n\nBlock devices:\n"
    from dataclasses import replace

    from mokkafs.state import HostFacts

    text = render(replace(state, host=HostFacts(host))).decode()
    assert text.count("nvidia-caps-imex-channels") == 1
