"""Executables built at install time (setup.py): mokkafs-hook, the static createContainer hook."""
