"""What the ``mokkafs`` command keeps out of its process: modules its dependencies import but
it never uses. A daemon serves for months on every node of a fleet, so each MiB it maps for
nothing counts once per node.

- ``ssl``: trio imports it for its TLS streams, and with it OpenSSL's libssl. ``defer("ssl")``
  puts a stand-in in ``sys.modules`` that ``import ssl`` returns; the first name anyone reads
  from it imports the real module, which replaces the stand-in there and lends it every name,
  so code holding the stand-in works on as if it had the real one. (``importlib.util.
  LazyLoader`` cannot do this on Python 3.11: its module loads on any attribute, and ``import
  ssl`` itself reads ``__spec__``.)
- ``_hashlib``: OpenSSL's hashes, 3.5 MiB resident once libcrypto initialises, loaded by
  ``hashlib`` and ``hmac`` (pydantic imports ``secrets``). Both fall back to CPython's own
  implementations of every algorithm they always offer when it is missing, as on an
  interpreter built without OpenSSL; ``absent("_hashlib")`` makes it so. The digests are the
  same.

Both must happen before anything imports those modules: ``mokkafs.entry`` does it first.
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


def absent(name: str) -> None:
    """Make importing ``name`` fail with ImportError, as if it were not installed, unless it
    is loaded already. Only for a module whose importers all expect that it may be missing."""
    if name not in sys.modules:
        sys.modules[name] = None  # type: ignore[assignment]  # (the import system's "absent")


def loaded(name: str) -> bool:
    """Whether ``name`` is imported for real (neither deferred nor absent)."""
    return sys.modules.get(name) is not None and not isinstance(sys.modules[name], _StandIn)
