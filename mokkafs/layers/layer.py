"""What a run-time layer is (``Layer``): a kind of change made at run time, kept in a book of
its own (its ``book_type``) and applied over a State; listed over the control socket, which
edits it with the requests it names (its ``ops``); kept in the state file, and restored from
it, checked again.

A layer object holds no book: it is what the daemon and the state file know of one kind of
book. ``mokkafs.layers.registry`` lists them in the order they apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from mokkafs.state import State

if TYPE_CHECKING:
    from pydantic import BaseModel

    from mokkafs.obs.status import Status


class Book(Protocol):
    """What a layer keeps: one per daemon, edited as a copy (kept if its view is installed)."""

    def copy(self) -> Self: ...


B = TypeVar("B", bound=Book)

# An edit of a copy of a book, checked against a State (the profile's, or the State served
# for a layer edited through the mount). It raises to refuse, and then nothing changes;
# False: it changes nothing, but what it counted.
Edit = Callable[[B, State], bool | None]


class StateFileError(Exception):
    """Why a state file cannot be used (never quoting what is in it)."""


@dataclass(frozen=True)
class Op:
    """A control request a layer answers: the reason its change gives in the log, and whether
    it needs the compile (imported first, in a worker thread)."""

    reason: str
    compiles: bool = False


@dataclass(frozen=True)
class Written:
    """When the state file being restored was written: ``clock`` on the writing daemon's
    clock; ``now`` on this one's; ``since`` (after a reboot, when the clock began again) the
    wall-clock seconds since, never less than 0."""

    clock: float
    now: float
    since: float | None = None

    @property
    def rebooted(self) -> bool:
        return self.since is not None

    def origin(self, kept: float) -> float:
        """``kept``, a time on the writer's clock, on this daemon's: the same in the same boot;
        after a reboot, as far behind now as it was behind the write, plus the time since."""
        if self.since is None:
            return kept
        return self.now - (max(0.0, self.clock - kept) + self.since)


class Served(Protocol):
    """What a listing reads of the daemon that serves the layers (``serve.swap.Swapper``)."""

    profile: State  # as the source gave it
    state: State  # with the layers, as served
    status: Status
    clock: Callable[[], float]


NO_OPS: Mapping[str, Op] = MappingProxyType({})
NONE_ENDS: Mapping[str, str] = MappingProxyType({})


class Layer(Protocol[B]):
    """One kind of change made at run time: its book, and all the daemon does with it."""

    name: str  # its key in the control socket's answers, the reason of its changes
    book_type: type[B]  # its book, which keeps nothing when made with no arguments
    # Edited through the mount (a write): each edit is checked against the State served (the
    # edits before it made it), and its change returns before the kernel is told.
    through_mount: bool = False
    listed: bool = True  # shown by ``{"op": "list"}`` (``mokkafs fault list``)
    ops: Mapping[str, Op] = NO_OPS  # the control requests it answers, by ``op``
    # Its sections of the state file a reboot ends (each a list), with what each entry is:
    # after a reboot it restores the others, those empty; none: all of it is restored.
    reboot_ends: Mapping[str, str] = NONE_ENDS

    def holds(self, book: B) -> bool:
        """Whether ``book`` keeps anything (else the state file need not)."""
        ...

    def over(self, book: B, state: State) -> State:
        """``state`` with ``book`` applied: what no longer applies to it ends (and leaves
        ``book``), with a log line."""
        ...

    def listing(self, book: B, served: Served) -> list[dict[str, Any]]:
        """What the control socket answers of it."""
        ...

    def asked(self, op: str, request: Mapping[str, Any], answer: dict[str, Any],
              ) -> Edit[B] | None:
        """The edit a control request asks for (None: it only asks to see); it may add to
        ``answer``. Raises ``UsageError`` or ``ProfileError`` for a request it refuses."""
        return None

    def schema(self) -> type[BaseModel]:
        """Its sections of the state file (``mokkafs.layers.kept``), as a pydantic model."""
        ...

    def record(self, book: B, state: State) -> dict[str, Any]:
        """Its sections of the state file (JSON-able), ``state`` being the State served."""
        ...

    def restore(self, kept: Any, written: Written) -> tuple[B, dict[str, float]]:
        """The book ``kept`` (the state file's document, checked by ``schema``) keeps, and
        the origins of the faults it adds, by name, on this daemon's clock."""
        ...

    def recheck(self, book: B, profile: State) -> None:
        """Check a restored ``book`` against the profile at start; raises
        ``StateFileError``."""
        return None
