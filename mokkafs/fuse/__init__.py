"""The FUSE edge: a thin pyfuse3 adapter over the current Tree, and the mount lifecycle."""
