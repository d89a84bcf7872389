"""The machine around the devices: its DMI identity, with serial numbers and a UUID of this
node's own, and the drivers it runs."""

from __future__ import annotations

import hashlib
import uuid

from mokkafs.profile.schema import Profile
from mokkafs.state import Driver, Platform

# product_uuid of a node: a name-based UUID of its node name and index, in a space of our own.
NODE_UUIDS = uuid.UUID("6d6f6b6b-6166-7364-6d69-000000000000")
DEFAULT_DRIVER_VERSION = "550.163.01"


def _serial(prefix: str, what: str, node: str) -> str:
    digits = int.from_bytes(hashlib.blake2b(f"{what}/{node}".encode(), digest_size=6).digest(),
                            "big")
    return f"{prefix}{digits % 10**12:012d}"


def platform(profile: Profile, node_name: str, node_index: int | None) -> Platform:
    p = profile.platform
    node = f"{node_name}/{node_index if node_index is not None else ''}"
    return Platform(
        sys_vendor=p.sys_vendor, product_name=p.product_name, product_version=p.product_version,
        product_family=p.product_family, product_sku=p.product_sku,
        product_serial=_serial(p.serial_prefix, "product", node),
        product_uuid=str(uuid.uuid5(NODE_UUIDS, node)),
        board_vendor=p.board_vendor, board_name=p.board_name, board_version=p.board_version,
        board_serial=_serial(p.serial_prefix, "board", node),
        chassis_vendor=p.chassis_vendor, chassis_type=p.chassis_type,
        chassis_version=p.chassis_version,
        chassis_serial=_serial(p.serial_prefix, "chassis", node),
        bios_vendor=p.bios_vendor, bios_version=p.bios_version, bios_date=p.bios_date,
        bios_release=p.bios_release, arch=p.arch)


def driver(profile: Profile) -> Driver:
    cuda = profile.system.cuda_version
    return Driver(profile.system.driver_version or DEFAULT_DRIVER_VERSION,
                  profile.system.kernel_modules, profile.infiniband.ofed_version,
                  None if cuda is None else cuda[0] * 1000 + cuda[1] * 10)
