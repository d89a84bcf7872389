"""The stores and the files that reach them (mokkafs.writes.stores): every key a surface gives
a file names a store of the one registry, on a writable file, for what holds it; a store's
bytes are read as kernfs hands them; a key no store has is refused as kernfs refuses a file
without a store method."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from mokkafs.model.sysfs import StoreKey
from mokkafs.tree.nodes import File
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.book import WriteBook
from mokkafs.writes.dynids import DynId
from mokkafs.writes.stores import MAX_STORE, STORES
from tests.helpers.profiles import ALL_PROFILES, H100_GPU0, profile_id, state_of, tree_of


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=profile_id)
def test_every_key_names_a_store_on_a_writable_file(profile: Path) -> None:
    tree = tree_of(state_of(profile))
    keyed = [e.node for e in tree.entries.values()
             if isinstance(e.node, File) and e.node.store is not None]
    assert keyed
    for node in keyed:
        assert node.store is not None and node.store.name in STORES, node.path
        assert node.mode & 0o222, node.path
        # the holder is what holds the file: its directory (a function, a driver, a bus)
        assert node.store == StoreKey(node.directory.rpartition("/")[2], node.name), node.path


def test_each_store_but_the_driver_link_has_its_files() -> None:
    tree = tree_of(state_of("h100"))
    made = {e.node.store.name for e in tree.entries.values()
            if isinstance(e.node, File) and e.node.store is not None}
    assert made | {"driver"} == set(STORES)


def test_a_store_reads_a_page_at_most_one_character_a_byte() -> None:
    state = state_of("h100")
    book = WriteBook()
    served = book.merge(state)
    assert book.write(StoreKey(H100_GPU0, "driver_override"), b"\xffnv\n", served, 0.0)
    assert book.writes[(H100_GPU0, "driver_override")].value == "\xffnv"
    # what lies past the page is not read: the subvendor ID is not given
    past = b"10de 9999" + b" " * (MAX_STORE - 9) + b"1234"
    assert book.write(StoreKey("nvidia", "new_id"), past, served, 0.0)
    assert book.dynids["nvidia"] == (DynId(0x10DE, 0x9999),)


def test_a_key_no_store_has_is_refused() -> None:
    book = WriteBook()
    with pytest.raises(WriteRefused) as info:
        book.write(StoreKey(H100_GPU0, "numa_node"), b"1", book.merge(state_of("h100")), 0.0)
    assert info.value.errno == errno.EACCES and not book.writes
