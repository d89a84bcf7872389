"""The serving process: the daemon's skeleton, and applying updates to what it serves."""
