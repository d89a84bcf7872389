"""``mokkafs mig``: change a serving daemon's MIG layouts through its ``--control`` socket, in
``nvidia-smi mig``'s words (``-lgi``, ``-cgi PROFILE[:START],... [-C]``, ``-dgi [-gi IDS]``,
``-cci [PROFILES] -gi ID``, ``-dci [-ci IDS] -gi ID``; ``-i`` the GPU's index), and its MIG
mode in ``nvidia-smi -i N -mig 1|0``'s (``-mig 1|0``). docs/mig-imex.md.
"""

from __future__ import annotations

import argparse

from mokkafs.cli.arguments import control_arg

NAME = "mig"
HELP = ("create or destroy MIG instances of a serving daemon (its --control socket), as "
        "nvidia-smi mig does, or turn a GPU's MIG mode on or off; see docs/mig-imex.md")


def arguments(mig: argparse.ArgumentParser) -> None:
    control_arg(mig)
    mig.add_argument("-i", dest="gpu", type=int, default=None, metavar="GPU",
                     help="the GPU's index (nvidia-smi -i)")
    what = mig.add_mutually_exclusive_group(required=True)
    what.add_argument("-lgi", dest="action", action="store_const", const="list",
                      help="list the GPU instances of every GPU in MIG mode")
    what.add_argument("-cgi", dest="cgi", metavar="PROFILES",
                      help="create GPU instances: profile names or IDs, comma-separated, each "
                      "with an optional placement :START (nvidia-smi's 14:2)")
    what.add_argument("-dgi", dest="action", action="store_const", const="dgi",
                      help="destroy GPU instances (-gi IDS; all without) with their CIs")
    what.add_argument("-cci", dest="cci", nargs="?", const="", metavar="PROFILES",
                      help="create compute instances in -gi ID (default: one spanning it)")
    what.add_argument("-dci", dest="action", action="store_const", const="dci",
                      help="destroy compute instances of -gi ID (-ci IDS; all without)")
    what.add_argument("-mig", dest="mode", type=int, choices=(0, 1), metavar="1|0",
                      help="turn -i GPU's MIG mode on (1) or off (0), as nvidia-smi -i N -mig "
                      "does; off needs no GPU instance left")
    mig.add_argument("-C", dest="C", action="store_true",
                     help="with -cgi: a compute instance spanning each new GPU instance")
    mig.add_argument("-gi", dest="gi", default="", metavar="IDS",
                     help="GPU instance IDs, comma-separated (-dgi, -cci, -dci)")
    mig.add_argument("-ci", dest="ci", default="", metavar="IDS",
                     help="compute instance IDs, comma-separated (-dci)")


def _ids(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _placed(profiles: list[str]) -> tuple[list[str], list[int | None]]:
    """The profiles of ``-cgi``'s tuples and their placements (None: none given)."""
    names: list[str] = []
    starts: list[int | None] = []
    for p in profiles:
        name, colon, start = p.partition(":")
        names.append(name.strip())
        starts.append(int(start) if colon else None)
        if starts[-1] is not None and starts[-1] < 0:
            raise ValueError(p)
    return names, starts


def run(args: argparse.Namespace) -> int:
    from mokkafs.errors import UsageError
    from mokkafs.serve.control import request

    action = "cgi" if args.cgi else "cci" if args.cci is not None else \
        "mode" if args.mode is not None else args.action
    if action != "list" and args.gpu is None:
        raise UsageError(f"mokkafs mig -{'mig' if action == 'mode' else action}: name the GPU "
                         "with -i GPU")
    if action == "mode":
        request(args.control, {"op": "mig", "action": "mode", "gpu": args.gpu,
                               "mode": args.mode})
        print(f"{'Enabled' if args.mode else 'Disabled'} MIG Mode for GPU {args.gpu}")
        return 0
    profiles = [p.strip() for p in (args.cgi or args.cci or "").split(",") if p.strip()]
    try:
        message = {"op": "mig", "action": action, "gpu": args.gpu, "profiles": profiles,
                   "C": args.C, "gi": _ids(args.gi), "ci": _ids(args.ci)}
        if action == "cgi" and any(":" in p for p in profiles):
            message["profiles"], message["starts"] = _placed(profiles)
    except ValueError:
        raise UsageError("mokkafs mig: -gi and -ci take IDs such as 1,2; -cgi takes "
                         "PROFILE or PROFILE:START, such as 9,14:2") from None
    answer = request(args.control, message)
    for gpu in answer["mig"]:
        if args.gpu is not None and gpu["gpu"] != args.gpu:
            continue
        for gi in gpu["instances"]:
            cis = ",".join(f"{c['id']}:{c['profile']}" for c in gi["compute"]) or "-"
            print(f"{gpu['gpu']}\tMIG {gi['profile']}\t{gi['profile_id']}\t{gi['id']}\t"
                  f"{gi['start']}:{gi['size']}\t{cis}")
    return 0
