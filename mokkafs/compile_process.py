"""The compiling process's side (``python -m mokkafs.compile_process MEMORY PARENT``).

It compiles each profile text sent on stdin and answers on stdout, one frame each: an 8-byte
little-endian length and a pickle. The daemon's side is ``mokkafs.source.child.CompileChild``.
This module imports the compiler and nothing of the daemon's (no trio, no FUSE): a change
after a quiet spell waits for a child to start, and a start costs what its imports cost.
"""

from __future__ import annotations

import os
import pickle
import resource
import sys
import traceback
from typing import TYPE_CHECKING, BinaryIO

from mokkafs.errors import MokkafsError, Problem, ProfileError
from mokkafs.frames import LENGTH, dumps
from mokkafs.host import linux

if TYPE_CHECKING:
    from mokkafs.profile.compile import PciCache
    from mokkafs.profile.options import Options

Reply = tuple[str, object]  # ("state", State) | ("problems", (file, [Problem])) | ("bug", text)


def _read(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def _answer(text: str, filename: str, options: Options, memory: int,
            cache: PciCache) -> Reply:
    from mokkafs.profile.resolve import compile_text

    try:
        return "state", compile_text(text, filename, options, cache)
    except MemoryError:
        return "problems", (filename, [Problem("", (
            f"compiling it needs more than the {memory >> 20} MiB the compiling process may "
            "use; a node's profile needs far less"))])
    except ProfileError as exc:
        return "problems", (exc.filename, list(exc.problems))
    except MokkafsError as exc:
        return "problems", (filename, [Problem("", str(exc))])
    except Exception:  # a bug: its traceback goes to the parent's log
        return "bug", traceback.format_exc()


def main(memory: int, parent: int) -> None:
    """Compile each request on stdin until it ends, within ``memory`` bytes of address space.
    The child ends with the daemon ``parent``, quietly: a daemon killed mid-compile leaves no
    compiling process behind, and no traceback in the log it shared."""
    try:
        if os.getppid() != parent:  # it ended already
            os._exit(0)
        linux.end_with(parent)
    except ProcessLookupError:  # it ended meanwhile
        os._exit(0)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the replies
    from mokkafs.profile.compile import PciCache

    cache = PciCache()  # the last compile's PCI side, for the next one
    while (head := _read(inp, LENGTH.size)) is not None:
        frame = _read(inp, LENGTH.unpack(head)[0])
        if frame is None:
            break
        text, filename, options = pickle.loads(frame)
        reply = dumps(_answer(text, filename, options, memory, cache))
        try:
            out.write(LENGTH.pack(len(reply)) + reply)
            out.flush()
        except BrokenPipeError:  # the daemon is gone, or abandoned this request
            break
        del reply
        linux.release_free_heap()  # the compile's peak, once answered
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
