"""The FUSE edge: a thin pyfuse3 adapter over the current Tree, and the mount lifecycle."""

# The environment variable that gives ``mokkafs mount --cache-mode`` its default; read in one
# place (``mokkafs.fuse.modes.choose``). Here, not there, so the command's help can name it
# without importing pyfuse3.
CACHE_MODE_ENV = "MOKKAFS_CACHE_MODE"
