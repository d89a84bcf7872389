"""Writes taken by a WriteBook without a mount, as the unit tests of each store take them."""

from __future__ import annotations

import pytest

from mokkafs.state import State
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.book import WriteBook


def written(state: State, *writes: tuple[str, str, str]) -> tuple[WriteBook, State]:
    """A book that took ``writes`` (holder, file name, text) one after another, each checked
    against the State the ones before it made; and that State."""
    book = WriteBook()
    served = book.merge(state)
    for holder, name, text in writes:
        book.write(holder, name, text, served, 0.0)
        served = book.merge(state)
    return book, served


def refused(state: State, *writes: tuple[str, str, str]) -> int:
    """The errno the last of ``writes`` is refused with (every one before it is taken)."""
    with pytest.raises(WriteRefused) as info:
        written(state, *writes)
    return info.value.errno
