"""Faults: when each is in effect (``schedule``) and what the node looks like under them at a
given time (``effects``). Pure functions of a State and the clock; the daemon
(``mokkafs.serve.faults``) installs a new view at every transition. See docs/faults.md."""
