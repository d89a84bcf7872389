"""The suite's fixtures come from plugins in tests/helpers/ (which also hold the plain helper
functions tests import); no test imports from a conftest."""

from __future__ import annotations

import pytest

# Before the plugins load: their asserts, and those of every helper, report as tests' do.
pytest.register_assert_rewrite("tests.helpers")

pytest_plugins = [
    "tests.helpers.hypothesis_profiles",  # first: no example database; ci or dev examples
    "tests.helpers.guards",  # autouse: no leaked mount, no unexpected log record
    "tests.helpers.passes",  # --mode-dependent-only: scripts/test.sh's second pass
    "tests.helpers.order",  # the slowest modules first
    "tests.helpers.mounts",  # mount_h100
    "tests.helpers.live",  # live
    "tests.helpers.consumers",  # ibdump
    "tests.helpers.containers",  # hosttools_image, h100_node
]
