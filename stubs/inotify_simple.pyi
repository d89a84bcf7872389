# Types of the parts of inotify_simple (2.x) mokkafs uses; the package ships none.
from enum import IntEnum
from io import FileIO
from os import PathLike
from typing import NamedTuple

class Event(NamedTuple):
    wd: int
    mask: int
    cookie: int
    name: str

class INotify(FileIO):
    fd: int
    def __init__(self, inheritable: bool = ..., nonblocking: bool = ...,
                 closefd: bool = ...) -> None: ...
    def add_watch(self, path: str | bytes | PathLike[str], mask: int) -> int: ...
    def rm_watch(self, wd: int) -> None: ...
    def read(  # type: ignore[override]
        self, timeout: int | None = ..., read_delay: int | None = ...) -> list[Event]: ...

class flags(IntEnum):
    MODIFY = 0x00000002
    ATTRIB = 0x00000004
    CLOSE_WRITE = 0x00000008
    MOVED_FROM = 0x00000040
    MOVED_TO = 0x00000080
    CREATE = 0x00000100
    DELETE = 0x00000200
    DELETE_SELF = 0x00000400
    MOVE_SELF = 0x00000800
    Q_OVERFLOW = 0x00004000
    IGNORED = 0x00008000
    ONLYDIR = 0x01000000
