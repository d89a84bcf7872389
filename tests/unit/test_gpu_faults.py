"""gpu-hot and ecc-errors (mokkafs.faults.gpu, mokkafs.model.ecc): what each does to a GPU's
file in NVML's own place, as arithmetic of the State and the time: the temperature and the
clocks while hot and back after; ECC counts growing at their rates, kept when the storm is
cleared, with a remapped row (or a retired page before Ampere) and an Xid 48 per
uncorrectable error; bad faults refused naming the field."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.faults.effects import applied, at, carry
from mokkafs.faults.xid import events
from mokkafs.model.ecc import MAX_RETIRED_PAGES, Ecc, EccBurst, ecc_values, kept_over
from mokkafs.state import State
from mokkafs.tree.nodes import File
from tests.helpers.faults import with_faults
from tests.helpers.profiles import tree_of

GPU0 = "0000:1b:00.0"


def place(state: State, now: float, bdf: str = GPU0) -> dict[str, str]:
    entry = tree_of(at(state, now)).resolve(f"run/mokkafs-nvml/gpus/{bdf}")
    assert entry is not None and isinstance(entry.node, File)
    text = entry.node.read(now).decode()
    return dict(line.split("=", 1) for line in text.splitlines())


def test_a_burst_counts_each_error_at_its_time() -> None:
    burst = EccBurst(10.0, 0.5, start=100.0, end=110.0)
    assert burst.counts(99.0) == (0, 0) and burst.counts(100.0) == (0, 0)
    assert burst.counts(102.0) == (20, 1)  # the first uncorrectable one at 102 s
    assert burst.counts(101.999) == (19, 0)
    assert burst.counts(500.0) == (100, 5)  # stopped at its end
    assert burst.uncorrected_times() == [102.0, 104.0, 106.0, 108.0, 110.0]
    assert EccBurst(1.0, 1.0, 0.0, math.inf).uncorrected_times() == []  # endless: none logged
    assert Ecc((3, 1), (burst, EccBurst(1.0, 0.0, 105.0))).counts(107.0) == (3 + 70 + 2, 1 + 3)


def test_counts_keep_going_from_where_they_are_when_bursts_change() -> None:
    storm = (EccBurst(10.0, 1.0, 0.0),)
    assert kept_over((0, 0), storm, (), 5.0) == (50, 5)  # cleared: what it counted stays
    assert kept_over((2, 1), storm, storm, 5.0) == (2, 1)  # unchanged: nothing moves
    again = (EccBurst(10.0, 1.0, 5.0),)  # changed: starts anew, the old counts kept
    assert Ecc(kept_over((0, 0), storm, again, 5.0), again).counts(6.0) == (60, 6)


def test_rows_are_remapped_from_ampere_and_pages_retired_before() -> None:
    hopper = dict(ecc_values(9, GPU0, 80 << 30, (7, 2)))
    assert hopper["remapped_rows_uncorrectable"] == 2 and hopper["remapped_rows_pending"] == 1
    assert hopper["remapped_rows_correctable"] == 0 and hopper["remapped_rows_failure"] == 0
    assert "retired_pages_dbe" not in hopper
    volta = dict(ecc_values(5, GPU0, 32 << 30, (7, 100)))
    assert volta["retired_pages_dbe"] == MAX_RETIRED_PAGES and volta["retired_pages_pending"]
    addresses = str(volta["retired_pages_dbe_addresses"]).split(",")
    assert len(set(addresses)) == MAX_RETIRED_PAGES
    assert all(int(a, 16) % 4096 == 0 and int(a, 16) < 32 << 30 for a in addresses)
    assert "remapped_rows_pending" not in volta
    assert dict(ecc_values(5, GPU0, None, (0, 0)))["retired_pages_dbe_addresses"] is None


def test_a_hot_gpu_reads_its_temperature_and_throttles_then_cools(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: hot, kind: gpu-hot, target: gpu0, "
                                          "temperature: 92, clock_mhz: 900, after: 10, "
                                          "for: 20}\n"), 0.0)
    before, hot, after = place(state, 5.0), place(state, 15.0), place(state, 35.0)
    assert before["temperature_gpu"] == after["temperature_gpu"] == "34"
    assert before["clocks_event_reasons"] == after["clocks_event_reasons"] == "1"  # idle
    assert hot["temperature_gpu"] == "92"
    assert hot["clock_graphics"] == hot["clock_sm"] == "345"  # idle clocks are below it
    assert hot["clocks_event_reasons"] == str(0x1 | 0x20 | 0x8 | 0x40)  # <= half of 1980
    assert hot["clock_memory"] == before["clock_memory"]
    assert place(state, 15.0, "0000:43:00.0")["temperature_gpu"] == "34"  # the others
    mild = applied(with_faults(tmp_path, "  - {name: hot, kind: gpu-hot, target: gpu0, "
                                         "temperature: 85, clock_mhz: 1500}\n"), 0.0)
    assert place(mild, 1.0)["clocks_event_reasons"] == str(0x1 | 0x20)  # above half


def test_an_ecc_storm_grows_logs_xid_48_and_stays_counted_when_cleared(tmp_path: Path) -> None:
    faults = ("  - {name: storm, kind: ecc-errors, target: gpu0, after: 10, for: 100, "
              "rates: {corrected: 10, uncorrected: 0.5}}\n")
    storm = applied(with_faults(tmp_path, faults), 0.0)
    assert place(storm, 5.0)["ecc_volatile_corrected"] == "0"
    got = place(storm, 16.0)
    assert (got["ecc_volatile_corrected"], got["ecc_volatile_uncorrected"]) == ("60", "3")
    assert got["ecc_aggregate_uncorrected"] == "3" and got["remapped_rows_uncorrectable"] == "3"
    assert got["remapped_rows_pending"] == "1"
    assert place(storm, 16.0, "0000:43:00.0")["ecc_volatile_corrected"] == "0"
    xids = [t for t, line in events(storm) if "Xid (PCI:0000:1b:00): 48," in line]
    assert xids == [10.0 + 2 * i for i in range(1, 51)]
    cleared = carry(storm, with_faults(tmp_path, "  []\n"), 20.0)
    for t in (20.0, 50.0):
        got = place(cleared, t)
        assert (got["ecc_volatile_corrected"], got["ecc_volatile_uncorrected"]) == ("100", "5")
    assert place(at(storm, 200.0), 200.0)["ecc_volatile_uncorrected"] == "50"  # its end


BAD = {
    "hot-without-temperature": ("  - {name: a, kind: gpu-hot, target: gpu0}\n",
                                "faults[0].temperature", "needs temperature"),
    "clock-above-max": ("  - {name: a, kind: gpu-hot, target: gpu0, temperature: 90, "
                        "clock_mhz: 3000}\n", "faults[0].clock_mhz", "1980 MHz at most"),
    "ecc-no-rates": ("  - {name: a, kind: ecc-errors, target: gpu0}\n", "faults[0].rates",
                     "needs rates"),
    "ecc-bad-rate": ("  - {name: a, kind: ecc-errors, target: gpu0, rates: {sbe: 1}}\n",
                     "faults[0].rates.sbe", "corrected and uncorrected"),
    "uncorrected-endless": ("  - {name: a, kind: ecc-errors, target: gpu0, "
                            "rates: {uncorrected: 1}}\n", "faults[0].rates.uncorrected",
                            "need for"),
    "ecc-on-an-hca": ("  - {name: a, kind: ecc-errors, target: mlx5_0, rates: {corrected: 1}}"
                      "\n", "faults[0].target", "no GPU"),
    "temperature-on-ecc": ("  - {name: a, kind: ecc-errors, target: gpu0, temperature: 3, "
                           "rates: {corrected: 1}}\n", "faults[0].temperature",
                           "ecc-errors does not use temperature"),
    "too-many-xids": ("  - {name: a, kind: ecc-errors, target: gpu0, for: 1000, "
                      "rates: {uncorrected: 200}}\n", "faults", "200000 Xids"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_gpu_fault_names_the_field(tmp_path: Path, case: str) -> None:
    text, where, message = BAD[case]
    with pytest.raises(ProfileError) as info:
        with_faults(tmp_path, text)
    assert message in str(info.value), str(info.value)
    assert any(p.path == where for p in info.value.problems), info.value.problems
