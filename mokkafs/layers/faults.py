"""The faults' layer (``FAULTS``): the faults applied and cleared over the control socket
(``mokkafs fault apply|clear``), kept in the fault book (``mokkafs.faults.book.FaultBook``).

The faults carry on after a reboot, as the test they stage would: the state file keeps when
each was applied, on the daemon's clock (``Written.origin`` puts it on the next one's).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mokkafs.faults.book import FaultBook
from mokkafs.faults.schedule import remaining
from mokkafs.layers.layer import Edit, Layer, Op, Served, Written
from mokkafs.state import State

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel


class FaultLayer(Layer[FaultBook]):
    name = "faults"
    book_type = FaultBook
    ops = MappingProxyType({"apply": Op("faults", compiles=True), "clear": Op("faults")})

    def holds(self, book: FaultBook) -> bool:
        return bool(book.control or book.held)

    def over(self, book: FaultBook, state: State) -> State:
        return book.merge(state)

    def listing(self, book: FaultBook, served: Served) -> list[dict[str, Any]]:
        """The node's faults as served, each with the seconds until it ends as of now (None:
        until cleared)."""
        now, specs = served.clock(), {f.name: f for f in served.state.faults}
        return [{**f, "remaining": remaining(specs[str(f["name"])], now)
                 if f["name"] in specs else None} for f in served.status.faults]

    def asked(self, op: str, request: Mapping[str, Any], answer: dict[str, Any],
              ) -> Edit[FaultBook] | None:
        """``{"op": "apply", "file": NAME, "text": YAML}``, ``{"op": "clear", "names":
        [...]}``."""
        if op == "clear":
            names = [str(n) for n in request.get("names", [])]

            def clear(book: FaultBook, profile: State) -> None:
                book.clear(names, profile)

            return clear
        from mokkafs.profile.load import parse_as  # (the compile, imported first: ``Op``)
        from mokkafs.profile.schema import FaultFile

        filename = str(request.get("file", "the fault file"))
        document, _ = parse_as(FaultFile, str(request.get("text", "")), filename)

        def add(book: FaultBook, profile: State) -> None:
            book.apply(document.faults, profile, filename)

        return add

    def schema(self) -> type[BaseModel]:
        from mokkafs.layers.kept import FaultsKept

        return FaultsKept

    def record(self, book: FaultBook, state: State) -> dict[str, Any]:
        """Each fault as written, with how often it was applied and its origin as ``state``
        has it; the profile's faults cleared."""
        origins = {f.name: f.origin for f in state.faults if f.source == "control"}
        applied = [{"fault": fault.model_dump(mode="json", by_alias=True, exclude_defaults=True),
                    "applies": book.applies.get(name, 1), "origin": origins.get(name)}
                   for name, fault in book.control.items()]
        return {"faults": {"applied": applied, "cleared": dict(book.held)}}

    def restore(self, kept: Any, written: Written) -> tuple[FaultBook, dict[str, float]]:
        book, origins = FaultBook(), {}
        for applied in kept.faults.applied:
            name = applied.fault.name
            book.control[name] = applied.fault
            book.applies[name] = applied.applies
            book.restored.add(name)
            if applied.origin is not None:
                origins[name] = written.origin(applied.origin)
        book.held = dict(kept.faults.cleared)
        return book, origins


FAULTS = FaultLayer()
