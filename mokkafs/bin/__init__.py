"""Executables built at install time (setup.py): mokkafs-hook, the static createContainer hook;
mokkafs-kmsg, the kmsg mount's process (no-open mode)."""
