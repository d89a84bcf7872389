"""Reading the daemon's /metrics text in tests."""

from __future__ import annotations


def fuse_requests(text: str) -> dict[str, float]:
    """``mokkafs_fuse_requests_total`` by operation: what reached the daemon."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("mokkafs_fuse_requests_total{"):
            out[line.split('op="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return out
