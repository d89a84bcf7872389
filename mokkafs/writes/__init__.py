"""Writes to the view's sysfs attributes, kept as a run-time layer over the profile's State
(docs/writes.md): ``attributes`` parses and checks one write as the kernel's store method
does, ``book`` keeps them and derives the State they make."""
