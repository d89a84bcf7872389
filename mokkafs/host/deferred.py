"""Modules that the daemon's dependencies import but the daemon never uses, loaded only if
something touches them.

trio imports ``ssl`` for its TLS streams, and with it OpenSSL's libssl and libcrypto: 5 MiB
of a daemon's resident memory, a tenth of it, for a daemon that never speaks TLS.
``defer("ssl")`` puts a stand-in in ``sys.modules`` that ``import ssl`` returns; the first
attribute anyone reads from it imports the real module, which replaces the stand-in there and
lends it every name, so code holding the stand-in works on as if it had the real one.

``importlib.util.LazyLoader`` cannot do this on Python 3.11: its module loads on any attribute,
and ``import ssl`` itself reads ``__spec__``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

_lock = threading.RLock()  # loading one deferred module may load another


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str) -> object:  # only names not in the module's dict
        return getattr(_load(self), name)


def _load(stand_in: types.ModuleType) -> types.ModuleType:
    with _lock:
        name = stand_in.__name__
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
            try:
                real = importlib.import_module(name)
            except BaseException:
                sys.modules[name] = stand_in
                raise
            stand_in.__dict__.update(real.__dict__)
        return sys.modules[name]


def defer(name: str) -> None:
    """Make ``name`` load on first use. Nothing happens if it is loaded already, or cannot be
    found (importing it then fails as it would have)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stand_in = _StandIn(name)
    stand_in.__spec__ = spec  # what `import` asks a module in sys.modules for
    sys.modules[name] = stand_in


def loaded(name: str) -> bool:
    """Whether ``name`` is imported for real (not only deferred)."""
    return not isinstance(sys.modules.get(name), _StandIn) and name in sys.modules
