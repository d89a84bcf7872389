"""The run-time layers: what changed on the node since its profile was loaded (the MIG layouts
set with ``mokkafs mig``, the faults applied and cleared with ``mokkafs fault``, the sysfs
writes taken through the mount), each kept in a book of its own, apart from the profile, so
that a new profile takes them over.

``layer`` says what a layer is (the ``Layer`` protocol); ``registry`` lists them in the order
they apply (``LAYERS``, the one statement of that order) and holds a daemon's books
(``Layers``). One module each: ``mig``, ``faults``, ``writes``; ``kept`` is their sections of
the state file (pydantic, imported at the file's first read or write); ``mig_change`` makes a
MIG request's layout. The daemon (``mokkafs.serve``) owns the books: ``Swapper.change`` edits
one, the control socket's requests reach them through ``LAYERS``, the state file keeps them.
Pure: no I/O, no module-global state.
"""
