"""Which of scripts/test.sh's two passes runs a test (a plugin). The first pass runs every
test in the default cache mode (no-open); the second, in keep-cache mode
(tests/helpers/pass_mode.py), runs only the tests whose result can depend on the cache mode:
``--mode-dependent-only`` deselects those marked ``once``.

A test is ``once`` when it mounts no mokkafs view, or when the path it proves does not
change with the mode: the directories in ONCE, and any module that says
``pytestmark = pytest.mark.once``. Every other test runs in both passes: a new test runs
twice until it is shown not to need it."""

from __future__ import annotations

from pathlib import Path

import pytest

# Relative to the repository: pure code and the CLI's refusals (unit), the set-up and the
# README (e2e), and the deployment's own files and images (deploy: systemd, Helm, the image).
ONCE = ("tests/unit/", "tests/e2e/", "tests/deploy/")
ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--mode-dependent-only", action="store_true",
                     help="run only the tests whose result can depend on the cache mode "
                          "(deselect those marked once): scripts/test.sh's second pass")


def where(item: pytest.Item) -> str:
    """The item's file, relative to the repository ("" for one outside it)."""
    path = item.path.resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else ""


def is_once(item: pytest.Item) -> bool:
    return where(item).startswith(ONCE) or item.get_closest_marker("once") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--mode-dependent-only"):
        return
    dropped = [item for item in items if is_once(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not is_once(item)]
