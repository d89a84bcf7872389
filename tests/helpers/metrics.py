"""Reading the daemon's /metrics text in tests."""

from __future__ import annotations

from mokkafs.testing import samples


def fuse_requests(text: str) -> dict[str, float]:
    """``mokkafs_fuse_requests_total`` by operation: what reached the daemon."""
    prefix = 'mokkafs_fuse_requests_total{op="'
    return {series[len(prefix):-2]: value for series, value in samples(text).items()
            if series.startswith(prefix)}
