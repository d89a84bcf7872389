"""Shared libraries built at install time (setup.py): mokkafs's NVML, ``libnvidia-ml.so.1``,
and ``libnvidia-ml.so`` linked to it (docs/nvml.md)."""
