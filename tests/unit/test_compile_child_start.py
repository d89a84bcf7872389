"""A change after a quiet spell waits for a compiling process to start: the child's side
imports the compiler and nothing of the daemon's, so that start costs no more than it must."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.mounts import REPO

# What the daemon needs and a compile does not: each would add its import to every cold swap.
DAEMONS_OWN = ("trio", "pyfuse3", "mokkafs.source", "mokkafs.serve", "mokkafs.fuse",
               "mokkafs.obs", "mokkafs.tree", "mokkafs.surfaces")


def test_the_compiling_process_imports_nothing_of_the_daemon() -> None:
    probe = ("import sys, mokkafs.compile_process, mokkafs.profile.compile, "
             "mokkafs.profile.resolve; print('\\n'.join(sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.split()
    assert "mokkafs.profile.resolve" in loaded  # the probe did import the compiler
    extra = sorted(m for m in loaded if m.startswith(DAEMONS_OWN))
    assert extra == []
