"""The ``mokkafs`` command's entry point (and ``python -m mokkafs``'s): it settles what the
process leaves unloaded (``mokkafs.host.imports``) before anything is imported, then hands
over to ``mokkafs.cli``."""

from __future__ import annotations


def main() -> int:
    from mokkafs.host.imports import absent, defer

    defer("ssl")
    absent("_hashlib")
    from mokkafs.cli import main as cli_main

    return cli_main()
