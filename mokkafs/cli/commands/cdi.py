"""``mokkafs cdi``: print (or write) the CDI spec of a serving mount."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mokkafs.cli.arguments import served_arg
from mokkafs.delivery.cdi import DEFAULT_VERSION, KIND, VERSIONS, build_spec, validate
from mokkafs.delivery.mounts import (
    check_parent,
    require_serving,
    served_device_nodes,
    served_nvml_driver,
    serves_machine,
)
from mokkafs.delivery.publisher import write_atomically
from mokkafs.delivery.share import require_share

NAME = "cdi"
HELP = "print (or write) the CDI spec of a serving mount"


def arguments(parser: argparse.ArgumentParser) -> None:
    served_arg(parser)
    parser.add_argument("--cdi-version", default=None,
                        help=f"CDI spec version, {', '.join(VERSIONS)} (default "
                             f"{DEFAULT_VERSION}: the newest podman 4.3 reads)")
    parser.add_argument("--cdi-kind", default=KIND, help=f"CDI kind (default {KIND})")
    parser.add_argument("--output", type=Path, default=None,
                        help="write it there atomically instead of to standard output")


def run(args: argparse.Namespace) -> int:
    require_serving(args.mountpoint)
    check_parent(args.mountpoint)  # the spec hands it to every container, as the daemon's does
    require_share(args.mountpoint)
    spec = build_spec(args.mountpoint, served_device_nodes(args.mountpoint),
                      args.cdi_version or DEFAULT_VERSION, kind=args.cdi_kind,
                      machine=serves_machine(args.mountpoint),
                      nvml_driver=served_nvml_driver(args.mountpoint))
    validate(spec)
    if args.output:
        write_atomically(spec, args.output)
    else:
        print(json.dumps(spec, indent=2))
    return 0
