"""Frames on the pipe between the daemon and its compiling process: an 8-byte little-endian
length, then a pickle. A State is pickled with ``dumps``, which writes mokkafs's slotted
dataclasses (nearly every object of a State) as ``rebuilt`` and their slots' values: half
the time ``dataclasses``' own ``__getstate__``/``__setstate__`` take, which look up each
object's fields again. Both sides import this module by its name (the compiling process runs
``mokkafs.compile_process`` as ``__main__``, where nothing pickled may point)."""

from __future__ import annotations

import io
import pickle
import struct
from dataclasses import is_dataclass
from typing import Any, BinaryIO

LENGTH = struct.Struct("<Q")  # a frame's head: the length of the pickle after it


def rebuilt(cls: type, names: tuple[str, ...], values: tuple[Any, ...]) -> object:
    """An instance of a slotted dataclass from its slots' names and values, as ``_Pickler``
    gave them (the names pickled once per class, then referred to): unpickling without
    ``dataclasses``' per-object ``fields()``, half a State's unpickling. Like any unpickling,
    it runs no ``__init__``."""
    obj: object = object.__new__(cls)
    for name, value in zip(names, values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def _slots(cls: type) -> tuple[str, ...]:
    return tuple(name for c in reversed(cls.__mro__) for name in c.__dict__.get("__slots__", ())
                 if name != "__weakref__")


class _Pickler(pickle.Pickler):
    """Pickles mokkafs's slotted dataclasses (nearly every object of a State) as ``rebuilt``
    and their slots' values; everything else as pickle does. (None of them pickles itself
    otherwise: a ``__getstate__`` of one's own would be passed by.)"""

    def __init__(self, file: BinaryIO) -> None:
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self._names: dict[type, tuple[str, ...] | None] = {}

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if cls in self._names:
            names = self._names[cls]
        else:
            slotted = is_dataclass(cls) and cls.__module__.startswith("mokkafs.") and all(
                "__slots__" in c.__dict__ for c in cls.__mro__[:-1])
            names = self._names[cls] = _slots(cls) if slotted else None
        if names is None:
            return NotImplemented
        return rebuilt, (cls, names, tuple([getattr(obj, name) for name in names]))


def dumps(obj: object) -> bytes:
    """``obj`` pickled, its slotted dataclasses the quick way (``rebuilt``)."""
    out = io.BytesIO()
    _Pickler(out).dump(obj)
    return out.getvalue()
