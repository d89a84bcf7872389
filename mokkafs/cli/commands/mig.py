"""``mokkafs mig``: change a serving daemon's MIG layouts through its ``--control`` socket, in
``nvidia-smi mig``'s words (``-lgi``, ``-cgi PROFILES [-C]``, ``-dgi [-gi IDS]``,
``-cci [PROFILES] -gi ID``, ``-dci [-ci IDS] -gi ID``; ``-i`` the GPU's index). docs/mig-imex.md.
"""

from __future__ import annotations

import argparse

from mokkafs.cli.arguments import control_arg

NAME = "mig"
HELP = ("create or destroy MIG instances of a serving daemon (its --control socket), as "
        "nvidia-smi mig does; see docs/mig-imex.md")


def arguments(mig: argparse.ArgumentParser) -> None:
    control_arg(mig)
    mig.add_argument("-i", dest="gpu", type=int, default=None, metavar="GPU",
                     help="the GPU's index (nvidia-smi -i)")
    what = mig.add_mutually_exclusive_group(required=True)
    what.add_argument("-lgi", dest="action", action="store_const", const="list",
                      help="list the GPU instances of every GPU in MIG mode")
    what.add_argument("-cgi", dest="cgi", metavar="PROFILES",
                      help="create GPU instances: profile names or IDs, comma-separated")
    what.add_argument("-dgi", dest="action", action="store_const", const="dgi",
                      help="destroy GPU instances (-gi IDS; all without) with their CIs")
    what.add_argument("-cci", dest="cci", nargs="?", const="", metavar="PROFILES",
                      help="create compute instances in -gi ID (default: one spanning it)")
    what.add_argument("-dci", dest="action", action="store_const", const="dci",
                      help="destroy compute instances of -gi ID (-ci IDS; all without)")
    mig.add_argument("-C", dest="C", action="store_true",
                     help="with -cgi: a compute instance spanning each new GPU instance")
    mig.add_argument("-gi", dest="gi", default="", metavar="IDS",
                     help="GPU instance IDs, comma-separated (-dgi, -cci, -dci)")
    mig.add_argument("-ci", dest="ci", default="", metavar="IDS",
                     help="compute instance IDs, comma-separated (-dci)")


def _ids(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def run(args: argparse.Namespace) -> int:
    from mokkafs.errors import UsageError
    from mokkafs.serve.control import request

    action = "cgi" if args.cgi else "cci" if args.cci is not None else args.action
    if action != "list" and args.gpu is None:
        raise UsageError(f"mokkafs mig -{action}: name the GPU with -i GPU")
    profiles = [p.strip() for p in (args.cgi or args.cci or "").split(",") if p.strip()]
    try:
        message = {"op": "mig", "action": action, "gpu": args.gpu, "profiles": profiles,
                   "C": args.C, "gi": _ids(args.gi), "ci": _ids(args.ci)}
    except ValueError:
        raise UsageError("mokkafs mig: -gi and -ci take IDs such as 1,2") from None
    answer = request(args.control, message)
    for gpu in answer["mig"]:
        if args.gpu is not None and gpu["gpu"] != args.gpu:
            continue
        for gi in gpu["instances"]:
            cis = ",".join(f"{c['id']}:{c['profile']}" for c in gi["compute"]) or "-"
            print(f"{gpu['gpu']}\tMIG {gi['profile']}\t{gi['profile_id']}\t{gi['id']}\t"
                  f"{gi['start']}:{gi['size']}\t{cis}")
    return 0
