"""Writes taken by a WriteBook without a mount, as the unit tests of each store take them."""

from __future__ import annotations

import pytest

from mokkafs.model.sysfs import StoreKey
from mokkafs.state import State
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import File
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.book import WriteBook


def take(book: WriteBook, holder: str, name: str, text: str, served: State) -> bool:
    """One write of ``text`` (a byte a character) to ``holder``'s ``name``, as the mount
    forwards it: the key a surface gives that file, and the bytes."""
    return book.write(StoreKey(holder, name), text.encode("latin-1"), served, 0.0)


def written(state: State, *writes: tuple[str, str, str]) -> tuple[WriteBook, State]:
    """A book that took ``writes`` (holder, file name, text) one after another, each checked
    against the State the ones before it made; and that State."""
    book = WriteBook()
    served = book.merge(state)
    for holder, name, text in writes:
        take(book, holder, name, text, served)
        served = book.merge(state)
    return book, served


def refused(state: State, *writes: tuple[str, str, str]) -> int:
    """The errno the last of ``writes`` is refused with (every one before it is taken)."""
    with pytest.raises(WriteRefused) as info:
        written(state, *writes)
    return info.value.errno


def store_of(tree: Tree, path: str) -> StoreKey | None:
    """The key a surface gave the file at ``path`` (None: it has no store the view
    simulates)."""
    entry = tree.resolve(path)
    assert entry is not None and isinstance(entry.node, File), path
    return entry.node.store
