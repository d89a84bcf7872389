"""Hypothesis's settings for the suite: no example database anywhere (nothing a run found is
replayed by the next, so one bad seed cannot fail every later run), and two profiles.

- ``mokkafs-ci`` (``scripts/test.sh``, or wherever ``CI`` is set, as CI services do): examples
  derived from each test alone (``derandomize``): every run of a commit tests the same
  examples, so the suite's verdict is the code's, never a seed's.
- ``mokkafs-dev`` (a bare ``pytest``): fresh random examples every run, which is where new
  failures are found. Each failure prints its example and a ``@reproduce_failure`` blob; the
  fix adds the example to the test as an ``@example``, which every later run then tries.

``MOKKAFS_HYPOTHESIS_PROFILE`` names one of them; pytest's ``--hypothesis-profile`` overrides
both. docs/testing.md says why. A plugin: it loads before any test module is imported, so
every ``@settings`` of a test inherits the profile."""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE_ENV = "MOKKAFS_HYPOTHESIS_PROFILE"
CI_PROFILE = "mokkafs-ci"
DEV_PROFILE = "mokkafs-dev"

settings.register_profile(CI_PROFILE, database=None, derandomize=True, print_blob=True,
                          deadline=None)
settings.register_profile(DEV_PROFILE, database=None, derandomize=False, print_blob=True,
                          deadline=None)
settings.load_profile(os.environ.get(PROFILE_ENV)
                      or (CI_PROFILE if "CI" in os.environ else DEV_PROFILE))
