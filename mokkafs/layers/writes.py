"""The writes' layer (``WRITES``): the sysfs writes taken through the mount, and the drivers'
dynamic IDs, kept in the write book (``mokkafs.writes.book.WriteBook``; docs/writes.md).

A write comes through the mount: it is checked against the State served (the writes before it
made it), and answered before the kernel is told (``mokkafs.serve.writes``). The control
socket lists them (``mokkafs writes list``) and clears them all (``mokkafs writes clear``).
A reboot ends them, as it ends a real node's VFs.
"""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mokkafs.layers.layer import Edit, Layer, Op, Served, Written
from mokkafs.state import State
from mokkafs.writes import dynids
from mokkafs.writes.book import Write, WriteBook

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import BaseModel

log = logging.getLogger(__name__)


class WriteLayer(Layer[WriteBook]):
    name = "writes"
    book_type = WriteBook
    through_mount = True
    ops = MappingProxyType({"writes": Op("writes"), "clear-writes": Op("writes cleared")})
    reboot_ends = MappingProxyType({"writes": "sysfs writes", "dynids": "dynamic IDs"})

    def holds(self, book: WriteBook) -> bool:
        return bool(book.writes or book.dynids)

    def over(self, book: WriteBook, state: State) -> State:
        return book.merge(state)

    def listing(self, book: WriteBook, served: Served) -> list[dict[str, Any]]:
        return list(book.listing())

    def asked(self, op: str, request: Mapping[str, Any], answer: dict[str, Any],
              ) -> Edit[WriteBook] | None:
        """``{"op": "writes"}`` lists them; ``{"op": "clear-writes"}`` forgets them all (the
        profile's values serve again). Both answer how many were cleared."""
        answer["cleared"] = 0
        if op != "clear-writes":
            return None

        def clear(book: WriteBook, served: State) -> bool:
            answer["cleared"] = count = book.clear()
            if count:
                log.info("writes cleared: %d", count)
            return count > 0

        return clear

    def schema(self) -> type[BaseModel]:
        from mokkafs.layers.kept import WritesKept

        return WritesKept

    def record(self, book: WriteBook, state: State) -> dict[str, Any]:
        return {"writes": [{"bdf": w.bdf, "attribute": w.attribute, "value": w.value,
                            "at": w.at} for w in book.writes.values()],
                "dynids": [{"driver": driver, "id": i.text(), "at": i.at}
                           for driver, ids in book.dynids.items() for i in ids]}

    def restore(self, kept: Any, written: Written) -> tuple[WriteBook, dict[str, float]]:
        book = WriteBook({(w.bdf, w.attribute): Write(w.bdf, w.attribute, w.value, w.at)
                          for w in kept.writes})
        ids: dict[str, list[dynids.DynId]] = {}
        for k in kept.dynids:
            ids.setdefault(k.driver, []).append(dynids.parse(k.id, 7, k.at)[0])
        book.dynids = {driver: tuple(each) for driver, each in ids.items()}
        return book, {}


WRITES = WriteLayer()
