"""mokkafs: a FUSE view of a simulated GPU node's sysfs and procfs.

The view is computed live from a hardware profile: profile -> State -> surfaces -> Tree -> FUSE.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
