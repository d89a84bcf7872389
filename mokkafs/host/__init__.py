"""The host's side of things: Linux calls os lacks, the mount table, host facts the view shows."""
