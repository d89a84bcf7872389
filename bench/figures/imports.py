"""What each layer of imports costs a fresh interpreter, in PSS: the daemon's (trio, pyfuse3,
mokkafs's serving modules) and the compiler's (pydantic, the profile's schema, the YAML
parser), alone and in one process. It is the floor under a node's memory whatever the
settings: one process that can both serve and compile at once holds at least the last row."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from bench.harness import PY, REPO

Layers = list[tuple[str, list[str]]]  # (a layer's name, its modules), in import order
DAEMON: Layers = [("trio", ["trio"]), ("pyfuse3", ["pyfuse3"]),
                  ("mokkafs serving", ["mokkafs.serve.wiring", "mokkafs.serve.daemon"])]
COMPILER: Layers = [("pydantic", ["pydantic"]),
                    ("mokkafs compiler", ["mokkafs.profile.load", "mokkafs.profile.compile"])]
# Run by a fresh interpreter: after each group of imports, its PSS in KiB. It reads its own
# smaps_rollup rather than importing bench.harness (whose imports would be measured too).
_PROBE = """
import json, sys
def pss():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1])
steps = [("interpreter", pss())]
for name, modules in json.loads(sys.argv[1]):
    for module in modules:
        __import__(module)
    steps.append((name, pss()))
print(json.dumps(steps))
"""


def import_costs() -> list[dict[str, Any]]:
    """A row a process: the compiler's imports alone (a compiling process), the daemon's
    alone, and both in one process; in each, the PSS in MiB once each layer is imported
    (the layers of the row's process only, left to right)."""
    rows = []
    for process, layers in (("compiling process", COMPILER), ("daemon", DAEMON),
                            ("both in one", DAEMON + COMPILER)):
        out = subprocess.run([PY, "-c", _PROBE, json.dumps(layers)], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout
        steps = json.loads(out)
        row: dict[str, Any] = {"process": process}
        row.update({name: kib / 1024 for name, kib in steps})
        rows.append(row)
    return rows


def columns() -> list[str]:
    return ["process", "interpreter", *(name for name, _ in DAEMON + COMPILER)]
