"""The functions of a captured node that mokkafs's own sections can make (placeholder)."""

from __future__ import annotations

from typing import Any

from mokkafs.capture.notes import Notes
from mokkafs.capture.pci import Function
from mokkafs.capture.reader import Root


def describe(root: Root, fns: list[Function], doc: dict[str, Any], node_name: str,
             notes: Notes) -> set[str]:
    return set()
