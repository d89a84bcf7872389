"""PCI Vital Product Data, in the binary format the kernel's ``vpd`` sysfs attribute returns
(PCI Local Bus 3.0 section 6.4 and appendix I; Linux drivers/pci/vpd.c reads it to the end
tag): a large-resource Identifier String (tag 0x82), a VPD-R list (tag 0x90) of keywords
(two ASCII bytes, a length byte, the data) closed by ``RV`` whose first byte makes every
byte from the start through it sum to zero, and the small-resource End tag (0x78).

``nvlink_management`` is the VPD of an HGX B200's NVLink management ports: ConnectX-7
functions on the baseboard that reach the NVSwitch trays' management, which Fabric
Manager and the DRA driver find by the string ``SW_MNG`` in it (NVIDIA/nvrc and the DRA
driver read ``vpd`` and search for the bytes; stricter published readers want the field
``SMDL=SW_MNG`` in the vendor keyword ``VA``, as here). Part and serial numbers are made up.
"""

from __future__ import annotations

import struct

ID_STRING, VPD_R, END = 0x82, 0x90, 0x78
SW_MNG = "SW_MNG"


def encode(identifier: str, keywords: list[tuple[str, str]]) -> bytes:
    """The VPD of ``identifier`` and the read-only ``keywords`` (each two characters long),
    with the ``RV`` checksum. Raises ValueError for a bad keyword or a field too long."""
    ident = identifier.encode("ascii")
    if len(ident) > 0xFFFF:
        raise ValueError("identifier string longer than 65535 bytes")
    fields = bytearray()
    for key, value in keywords:
        data = value.encode("ascii")
        if len(key) != 2 or not key.isascii() or key == "RV":
            raise ValueError(f"VPD keyword {key!r}: two ASCII characters other than RV")
        if len(data) > 0xFF:
            raise ValueError(f"VPD keyword {key}: value longer than 255 bytes")
        fields += key.encode("ascii") + bytes([len(data)]) + data
    fields += b"RV\x01"  # the checksum byte follows; no reserved space after it
    head = bytes([ID_STRING]) + struct.pack("<H", len(ident)) + ident
    vpd_r = bytes([VPD_R]) + struct.pack("<H", len(fields) + 1) + bytes(fields)
    checksum = -sum(head + vpd_r) & 0xFF
    return head + vpd_r + bytes([checksum, END])


def nvlink_management(serial: str) -> bytes:
    """The VPD of an NVLink management port whose board serial is ``serial``."""
    return encode("NVIDIA ConnectX-7 HHHL NVLink management adapter", [
        ("PN", "MCX750500B-0D00"),
        ("EC", "A1"),
        ("V2", "MCX750500B-0D00"),
        ("SN", serial),
        ("V3", "0" * 32),
        ("VA", f"MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX750500B:SMDL={SW_MNG}"),
        ("V0", "PCIeGen5 x16"),
    ])


def decode(data: bytes) -> tuple[str, dict[str, bytes]]:
    """The identifier and keywords of a VPD ``encode`` made (for checks and tests). Raises
    ValueError where the tags, lengths or checksum are wrong."""
    if len(data) < 3 or data[0] != ID_STRING:
        raise ValueError("VPD does not start with an identifier string")
    n = struct.unpack_from("<H", data, 1)[0]
    ident = data[3:3 + n].decode("ascii")
    at = 3 + n
    if data[at] != VPD_R:
        raise ValueError("no VPD-R after the identifier")
    end = at + 3 + struct.unpack_from("<H", data, at + 1)[0]
    at += 3
    keys: dict[str, bytes] = {}
    while at < end:
        key, size = data[at:at + 2].decode("ascii"), data[at + 2]
        keys[key] = data[at + 3:at + 3 + size]
        if key == "RV" and sum(data[:at + 4]) & 0xFF:
            raise ValueError("VPD checksum does not sum to zero")
        at += 3 + size
    if data[end:] != bytes([END]):
        raise ValueError("VPD does not end with the end tag")
    return ident, keys
