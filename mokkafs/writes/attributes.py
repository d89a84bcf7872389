"""The SR-IOV attributes: each parses what is written as the kernel's store method does,
refuses what it refuses with its errno, and says what its kept value does to a State. Every
store refuses with ``WriteRefused``, and reads numbers as the kernel does (``kstrtoul``,
``kstrtobool``).

``sriov_numvfs`` (drivers/pci/iov.c, sriov_numvfs_store): ``kstrtou16(buf, 0)`` (decimal, 0x
hex, 0 octal, one trailing newline; else EINVAL, above 65535 ERANGE); above ``sriov_totalvfs``
ERANGE; the same number again changes nothing; a PF without a driver ENOENT; N to M with both
non-zero EBUSY; 0 removes the VFs. ``sriov_drivers_autoprobe`` (sriov_drivers_autoprobe_store):
``kstrtobool`` (1/0, y/n, on/off; else EINVAL); it decides whether VFs made later are bound.

Each is an entry of the one registry of stores (``mokkafs.writes.stores``), by its file's
name; its target is the PF whose directory holds it.
"""

from __future__ import annotations

import errno

from mokkafs.model import sriov
from mokkafs.state import PciFunction, State


class WriteRefused(Exception):
    """A write the kernel would refuse: ``errno`` for the writer, ``reason`` for the log."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.errno = code
        self.reason = reason


def kstrtoul(text: str, limit: int) -> int:
    """``kstrtou16``/``kstrtoul`` with base 0: one trailing newline allowed."""
    body = text[:-1] if text.endswith("\n") else text
    if body.startswith("+"):
        body = body[1:]
    if not body or not body.isascii() or not body.isalnum():
        raise WriteRefused(errno.EINVAL, "not a number")
    try:
        if body[:2].lower() == "0x":
            value = int(body[2:], 16) if body[2:] else -1
        elif body.startswith("0") and len(body) > 1:
            value = int(body[1:], 8)
        else:
            value = int(body, 10)
    except ValueError:
        raise WriteRefused(errno.EINVAL, "not a number") from None
    if value < 0:
        raise WriteRefused(errno.EINVAL, "not a number")
    if value > limit:
        raise WriteRefused(errno.ERANGE, f"{value} does not fit")
    return value


def kstrtobool(text: str) -> bool:
    """lib/kstrtox.c: the first characters decide; an empty or other string is EINVAL."""
    t = text.lower()
    if t[:1] in ("y", "1"):
        return True
    if t[:1] in ("n", "0"):
        return False
    if t[:2] == "on":
        return True
    if t[:2] == "of":
        return False
    raise WriteRefused(errno.EINVAL, "not a boolean")


def numvfs(text: str, fn: PciFunction) -> str | None:
    cap = fn.sriov
    assert cap is not None
    n = kstrtoul(text, 0xFFFF)
    if n == cap.numvfs:
        return None
    if not fn.driver:
        raise WriteRefused(errno.ENOENT, f"{fn.bdf} has no driver to configure its VFs")
    if n > cap.total:
        raise WriteRefused(errno.ERANGE, f"{n} VFs requested; {fn.bdf} has {cap.total} at most")
    if n and cap.numvfs:
        raise WriteRefused(errno.EBUSY, f"{cap.numvfs} VFs already enabled on {fn.bdf}; "
                           f"disable before enabling {n}")
    # VFs are bound as they are made, or not: as autoprobe is at the write.
    return f"{n}" if cap.autoprobe or not n else f"{n} unbound"


def apply_numvfs(state: State, bdf: str, value: str) -> State:
    count, _, unbound = value.partition(" ")
    return sriov.with_numvfs(state, bdf, int(count), probed=not unbound)


def autoprobe(text: str, fn: PciFunction) -> str | None:
    return "1" if kstrtobool(text) else "0"


def apply_autoprobe(state: State, bdf: str, value: str) -> State:
    fn = state.function(bdf)
    assert fn.sriov is not None
    return sriov.with_numvfs(state, bdf, fn.sriov.numvfs, autoprobe=value == "1",
                             probed=fn.sriov.probed)


def is_pf(fn: PciFunction) -> bool:
    return fn.sriov is not None


def too_many(state: State, fn: PciFunction, value: str) -> str | None:
    """Why a kept count no longer applies to the PF a new State has (None: it does)."""
    if fn.sriov is not None and int(value.partition(" ")[0]) > fn.sriov.total:
        return f"{fn.bdf} has {fn.sriov.total} VFs at most"
    return None
