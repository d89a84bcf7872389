"""The serving process: the daemon's skeleton, and applying updates to what it serves."""

# How the daemon's readiness line begins (``mokkafs.serve.config.default_announce``): printed
# on stderr once the mount serves. Whatever waits for a daemon (mokkafs.testing, bench/, a
# script) looks for this; importing it loads nothing else of the daemon.
READY = "mokkafs: serving"
