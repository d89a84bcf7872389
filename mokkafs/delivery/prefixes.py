"""Which kernel paths the preload shim sends to the mount: the surfaces' roots the shim maps
(``mokkafs.surfaces.ROOTS``, ``mokkafs.tree.roots``), compiled into the shim as
native/path_prefixes.h. Generate it after a surface's roots change::

    python -m mokkafs.delivery.prefixes > native/path_prefixes.h

tests/unit/test_preload_paths.py fails while the checked-in header differs.
"""

from __future__ import annotations

from mokkafs.surfaces import ROOTS
from mokkafs.tree.roots import KERNEL_TOPS, Form, Root

COMMAND = "python -m mokkafs.delivery.prefixes > native/path_prefixes.h"


def redirected(form: Form, roots: tuple[Root, ...] = ROOTS) -> tuple[str, ...]:
    """The absolute paths of the roots of ``form`` the shim maps. Raises ``ValueError`` for
    one outside /sys, /proc and /dev: the shim looks no further (native/path_map.c)."""
    out = []
    for root in roots:
        if not root.shim or root.form != form:
            continue
        if root.path.partition("/")[0] not in KERNEL_TOPS:
            raise ValueError(f"{root.path}: the shim maps kernel paths only "
                             f"(below {', '.join(KERNEL_TOPS)}); declare it own()")
        out.append(f"/{root.path}")
    return tuple(out)


def _array(name: str, paths: tuple[str, ...]) -> str:
    lines = "".join(f'    "{path}",\n' for path in paths)
    return f"static const char *const {name}[] = {{\n{lines}    NULL,\n}};\n"


def header(roots: tuple[Root, ...] = ROOTS) -> str:
    """native/path_prefixes.h: the roots the shim maps, as three C arrays, one per form."""
    return ("/* SPDX-License-Identifier: Apache-2.0 */\n"
            "/* Generated from the surfaces' roots (mokkafs.surfaces.ROOTS) by\n"
            f" *   {COMMAND}\n"
            " * Do not edit: tests/unit/test_preload_paths.py checks it matches. */\n"
            "/* whole paths, matched as whole components */\n"
            + _array("prefixes", redirected("path", roots))
            + "/* a name followed by digits: /dev/nvidia0 */\n"
            + _array("numbered", redirected("numbered", roots))
            + "/* a name followed by a PCI domain and bus in hex: /sys/devices/pci0000:18 */\n"
            + _array("buses", redirected("bus", roots)))


if __name__ == "__main__":
    print(header(), end="")
