"""What a newcomer reads first: a refused profile's headline and lines, and the readiness
line, in plain words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mokkafs.errors import Problem, ProfileError
from mokkafs.serve import READY
from tests.helpers.mounts import REPO


def tree(profile: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mokkafs", "tree", "--profile", str(profile)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_one_problem_is_counted_in_the_singular_and_names_no_made_up_field() -> None:
    result = tree("no-such-profile")
    assert result.returncode == 2
    head, line = result.stderr.splitlines()[:2]
    assert head == "mokkafs: invalid profile no-such-profile: 1 problem"
    assert line.startswith("  no-such-profile: no such file, and not a shipped profile (")


def test_problems_are_counted_in_the_plural(tmp_path: Path) -> None:
    bad = tmp_path / "node.yaml"
    bad.write_text("- a list\n- not a mapping\n")
    assert tree(bad).stderr.splitlines()[1] == (
        f"  {bad}:1: expected a mapping of sections (system, devices, ...)")
    error = ProfileError("node.yaml", [Problem("system.name", "required", 3),
                                       Problem("devices", "expected a list", 7)])
    assert str(error).splitlines() == ["invalid profile node.yaml: 2 problems",
                                       "  node.yaml:3: system.name: required",
                                       "  node.yaml:7: devices: expected a list"]


def test_the_readiness_line_names_the_cache_mode_after_the_words_cache_mode() -> None:
    from mokkafs.fuse.cache_mode import CacheMode
    from mokkafs.serve.config import default_announce
    from tests.helpers.profiles import state_of, tree_of

    state = state_of("t4")
    line = default_announce(state, tree_of(state), Path("/mnt"), CacheMode.KEEP_CACHE)
    assert line.startswith(f"{READY} ")
    assert line.endswith(", cache mode keep-cache)")
