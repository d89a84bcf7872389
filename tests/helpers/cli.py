"""The ``mokkafs`` command line, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers.mounts import REPO


def mokkafs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mokkafs", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=120, env={**os.environ, **(env or {})})
