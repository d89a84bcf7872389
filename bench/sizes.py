"""How large each figure is in a run: the full sweep (published), the quick run, and a smoke run
that only shows every figure still runs (its numbers mean nothing)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    name: str  # "Full sweep", "Quick run", "Smoke run": the report's first words
    results: str  # the results JSON's name in bench/results/
    hca_counts: list[int]
    reader_counts: list[int]
    cells_ms: int
    rounds: int
    floor: tuple[int, int]  # ms a cell, rounds
    swaps: int
    storm: tuple[int, int]  # edits, ms of reads
    idle_s: int
    scrapes: tuple[list[int], int]  # HCA counts, rounds
    monitoring: tuple[int, int, float]  # HCAs, seconds, lead seconds
    faults: int
    writes: int  # sriov_numvfs writes of each direction
    fleet: tuple[int, int]  # daemons, idle seconds
    shim: tuple[int, int]  # rounds, ms a cell
    cold_swaps: int  # swaps after a quiet spell, and as many right after another, each way
    nvml: tuple[int, int, int, int]  # enumeration rounds, Xids, gpustat seconds, wait seconds


FULL = Sizes("Full sweep", "full.json", [1, 8, 64, 256], [1, 2, 4], 1000, 3, (1000, 3), 100,
             (300, 3000), 60, ([8, 64], 10), (8, 60, 20.0), 30, 50, (50, 30), (7, 1000), 30,
             (1000, 30, 120, 30))
QUICK = Sizes("Quick run", "quick.json", [8, 64], [1, 2], 300, 1, (300, 1), 20, (100, 1000), 10,
              ([8, 64], 3), (8, 60, 20.0), 10, 10, (10, 5), (3, 300), 10, (200, 10, 30, 10))
# Cells long enough that a reader started on a busy machine still reads (none divides by 0).
SMOKE = Sizes("Smoke run", "smoke.json", [8], [1], 200, 1, (200, 1), 2, (2, 200), 1, ([8], 1),
              (8, 15, 1.0), 1, 1, (2, 1), (1, 200), 1, (2, 1, 2, 1))
