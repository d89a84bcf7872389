"""A capture's profile document as YAML: its sections in the order the schema lists them,
a header saying what it is, and the document validated against the schema before it is
written, so what ``mokkafs capture`` prints ``mokkafs mount`` loads."""

from __future__ import annotations

from typing import Any

import yaml

from mokkafs.errors import InternalError
from mokkafs.profile.resolve import MAX_PROFILE_BYTES
from mokkafs.profile.schema import Profile

ORDER = ("description", "system", "device_defaults", "devices", "nvlink", "infiniband",
         "pcie_topology", "node", "proc_devices", "platform", "machine", "pci_functions")


class Hex(int):
    """An integer the profile shows in hex, as PCI ids are written (``0x233010DE``)."""


class _Dumper(yaml.SafeDumper):
    pass


def _hex(dumper: yaml.SafeDumper, value: Hex) -> yaml.Node:
    digits = 8 if value > 0xFFFF else 4 if value > 0xFF else 2
    return dumper.represent_scalar("tag:yaml.org,2002:int", f"0x{int(value):0{digits}X}")


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value.rstrip("\n") else None
    if style is None and "\n" in value:
        style = '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(Hex, _hex)


def render(doc: dict[str, Any], header: list[str]) -> str:
    """The YAML text of ``doc``. Raises InternalError when the schema refuses it (a capture
    must never write what mount cannot load) or it is larger than a profile may be."""
    ordered = {k: doc[k] for k in ORDER if k in doc}
    try:
        Profile.model_validate(ordered)
    except ValueError as exc:
        raise InternalError(f"the captured profile does not validate: {exc}") from None
    body = yaml.dump(ordered, Dumper=_Dumper, sort_keys=False, width=100,
                     allow_unicode=False, default_flow_style=False)
    text = "".join(f"# {line}\n" for line in header) + body
    if len(text.encode()) > MAX_PROFILE_BYTES:
        raise InternalError(f"the captured profile is {len(text.encode()):,} bytes; a profile "
                            f"may be {MAX_PROFILE_BYTES:,}")
    return text
