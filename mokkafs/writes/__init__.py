"""Writes to the view's sysfs attributes, kept as a run-time layer over the profile's State
(docs/writes.md): ``stores`` is the one registry of the stores, by the key a surface gives each
writable file; ``attributes``, ``drivers``, ``dynids`` and ``hotplug`` parse and check one write
as the kernel's store methods do; ``book`` keeps them and derives the State they make."""
