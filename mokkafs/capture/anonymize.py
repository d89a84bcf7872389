"""``--anonymize``: stable pseudonyms for what identifies a machine (serial numbers, UUIDs,
GUIDs, MAC addresses, host names) so a capture can be shared in public.

A pseudonym is a keyed hash of the value (the same value gives the same pseudonym in every
capture) in the value's own format; a value that would take another's pseudonym takes the
next one, so distinct values stay distinct. Config space and VPD bytes are not text: VPD (it
holds the board's serial number) is dropped, config space kept."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KEY = b"mokkafs-capture-anonymize-1"
UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                  r"[0-9a-fA-F]{12}\b")
GUID = re.compile(r"\b[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}\b")
MAC = re.compile(r"\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}\b")
SERIAL_KEYS = ("serial",)  # keys whose whole value is a serial number
BINARY_KEYS = ("config",)


@dataclass
class Pseudonyms:
    given: dict[tuple[str, str], str] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)

    def of(self, kind: str, value: str, shape: Callable[[bytes], str]) -> str:
        key = (kind, value)
        if key not in self.given:
            n = 0
            while True:
                digest = hashlib.blake2b(f"{kind}/{value}/{n}".encode(), key=KEY).digest()
                made = shape(digest)
                if made not in self.taken and made != value:
                    break
                n += 1
            self.given[key] = made
            self.taken.add(made)
            self.counts[kind] = self.counts.get(kind, 0) + 1
        return self.given[key]

    def report(self) -> list[str]:
        return [f"replaced {n} distinct {kind}" for kind, n in sorted(self.counts.items())]


def _hexlike(template: str, digest: bytes) -> str:
    digits = iter(digest.hex() * 2)
    out = "".join(next(digits) if c in "0123456789abcdefABCDEF" else c for c in template)
    return out.upper() if template.isupper() else out


def _mac(value: str, digest: bytes) -> str:
    b = bytearray(digest[:6])
    b[0] = (b[0] | 0x02) & 0xFE  # locally administered, unicast
    return ":".join(f"{x:02x}" for x in b)


def _serial(value: str, digest: bytes) -> str:
    num = int.from_bytes(digest, "big")
    out = []
    for c in value:
        if c.isdigit():
            out.append(str(num % 10))
            num //= 10
        elif c.isalpha():
            out.append("ABCDEFGHJKLMNPQRSTUVWXYZ"[num % 24])
            num //= 24
        else:
            out.append(c)
    return "".join(out)


def anonymize(doc: dict[str, Any], node_name: str) -> tuple[dict[str, Any], list[str]]:
    """``doc`` with pseudonyms, and one line per kind of thing replaced."""
    p = Pseudonyms()
    host = p.of("host names", node_name, lambda d: f"node-{d.hex()[:8]}")

    def text(value: str) -> str:
        value = UUID.sub(lambda m: p.of("UUIDs", m.group(0),
                                        lambda d: _hexlike(m.group(0), d)), value)
        value = GUID.sub(lambda m: p.of("GUIDs", m.group(0),
                                        lambda d: _hexlike(m.group(0), d)), value)
        value = MAC.sub(lambda m: p.of("MAC addresses", m.group(0),
                                       lambda d: _mac(m.group(0), d)), value)
        if node_name:
            value = re.sub(rf"(?<![\w.-]){re.escape(node_name)}(?![\w-])", host, value)
        return value

    dropped = 0

    def walk(value: Any, key: str = "") -> Any:
        nonlocal dropped
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k == "vpd":
                    dropped += 1
                    continue
                out[k] = walk(v, k)
            return out
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str) and key in BINARY_KEYS:
            return value
        if isinstance(value, str) and key in SERIAL_KEYS:
            return p.of("serial numbers", value, lambda d: _serial(value, d))
        if isinstance(value, str):
            return text(value)
        return value

    out = walk(doc)
    lines = p.report()
    if dropped:
        lines.append(f"dropped the VPD (board serial numbers) of {dropped} functions")
    return out, lines
