"""The suite's Hypothesis settings (tests/helpers/hypothesis_profiles.py): no run keeps an
example database that would replay a failure in every later run, and the CI profile tries
the same examples every run while the developer's tries fresh ones."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import settings

from tests.helpers.mounts import REPO

# Not imported from the plugin: importing it loads its profile, and the first test proves that
# the suite's conftest does.
PROFILE_ENV, CI_PROFILE, DEV_PROFILE = "MOKKAFS_HYPOTHESIS_PROFILE", "mokkafs-ci", "mokkafs-dev"


def test_no_property_test_keeps_examples_between_runs() -> None:
    assert settings.default is not None and settings.default.database is None
    assert settings(max_examples=300, deadline=None).database is None  # as tests declare


@pytest.mark.parametrize(("env", "derandomized"), [
    ({PROFILE_ENV: CI_PROFILE}, True), ({"CI": "true"}, True), ({PROFILE_ENV: DEV_PROFILE}, False),
    ({}, False)])
def test_ci_tries_the_same_examples_and_development_fresh_ones(
        env: dict[str, str], derandomized: bool) -> None:
    base = {k: v for k, v in os.environ.items() if k not in (PROFILE_ENV, "CI")}
    done = subprocess.run(
        [sys.executable, "-c", "import tests.helpers.hypothesis_profiles\n"
         "from hypothesis import settings\n"
         "print(settings.default.derandomize, settings.default.database)"],
        capture_output=True, text=True, timeout=60, cwd=REPO, env={**base, **env}, check=True)
    assert done.stdout.split() == [str(derandomized), "None"]
