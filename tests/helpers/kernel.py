"""A fake kernel for the FUSE side's notifications (``Invalidator``'s kernel): it records every
invalidation and store with the thread it came from, in order. Tests subclass it to make
stores slow or failing."""

from __future__ import annotations

import threading
from typing import cast

Call = tuple[str, tuple[object, ...], int]  # ("inode" | "entry" | "store", arguments, thread)


class FakeKernel:
    def __init__(self) -> None:
        self.calls: list[Call] = []

    def invalidate_inode(self, inode: int, attr_only: bool) -> None:
        self.calls.append(("inode", (inode, attr_only), threading.get_ident()))

    def invalidate_entry(self, parent: int, name: bytes, deleted: int) -> None:
        self.calls.append(("entry", (parent, name, deleted), threading.get_ident()))

    def store(self, inode: int, data: bytes) -> None:
        assert threading.current_thread() is not threading.main_thread(), "a store on the loop"
        self.calls.append(("store", (inode, data), threading.get_ident()))

    def stores(self) -> list[tuple[int, bytes]]:
        """Every (inode, content) stored since the calls were last cleared, in order."""
        return [cast(tuple[int, bytes], args) for kind, args, _ in self.calls
                if kind == "store"]

    def stored_inodes(self) -> list[int]:
        return [inode for inode, _ in self.stores()]
