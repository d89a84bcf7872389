"""The run-time layers, in the order they apply (``LAYERS``, the one statement of it), and a
daemon's books of them (``Layers``), with what a state file gives back (``Restored``).

Innermost first: the MIG modes and layouts set at run time, the faults applied and cleared
over the control socket, the sysfs writes taken. Each applies over the State the ones before
it made. ``Layers.over`` puts them over a profile's State in that order; the state file keeps
and restores them in it; the control socket finds a request's layer in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from mokkafs.faults.book import FaultBook
from mokkafs.layers.faults import FAULTS
from mokkafs.layers.layer import Book, Layer
from mokkafs.layers.mig import MIG, MigBook
from mokkafs.layers.writes import WRITES
from mokkafs.state import State
from mokkafs.writes.book import WriteBook

LAYERS: tuple[Layer[Any], ...] = (MIG, FAULTS, WRITES)

B = TypeVar("B", bound=Book)


class Layers:
    """One book of each layer: those given (each to the layer of its type), and new ones."""

    def __init__(self, *books: Book) -> None:
        self._books: dict[str, Book] = {}
        for layer in LAYERS:
            given = [b for b in books if isinstance(b, layer.book_type)]
            self._books[layer.name] = given[0] if given else layer.book_type()
        if len(books) != len({type(b) for b in books}) or \
                any(not isinstance(b, tuple(la.book_type for la in LAYERS)) for b in books):
            raise TypeError("one book per layer, each of a layer's book type")

    def __getitem__(self, layer: Layer[B]) -> B:
        return cast(B, self._books[layer.name])

    def __setitem__(self, layer: Layer[B], book: B) -> None:
        self._books[layer.name] = book

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layers) and self._books == other._books

    def __repr__(self) -> str:
        return f"Layers({', '.join(map(repr, self._books.values()))})"

    @property
    def faults(self) -> FaultBook:
        return self[FAULTS]

    @property
    def mig(self) -> MigBook:
        return self[MIG]

    @property
    def writes(self) -> WriteBook:
        return self[WRITES]

    def copy(self) -> Layers:
        """A copy a change edits; the swapper keeps it only if its view is installed."""
        return Layers(*(book.copy() for book in self._books.values()))

    @property
    def empty(self) -> bool:
        """Whether nothing changed at run time is kept (no fault applied or cleared, no MIG
        mode or layout, no write, no dynamic ID)."""
        return not any(layer.holds(self[layer]) for layer in LAYERS)

    def over(self, profile: State) -> State:
        """``profile`` with every layer applied, in order; what no longer applies ends."""
        state = profile
        for layer in LAYERS:
            state = layer.over(self[layer], state)
        return state


@dataclass
class Restored:
    """What a state file gives back (``mokkafs.serve.record.restore``)."""

    layers: Layers
    origins: dict[str, float] = field(default_factory=dict)  # name -> daemon clock
    rebooted: bool = False
    ended: list[str] = field(default_factory=list)  # what the reboot ended, a line each
