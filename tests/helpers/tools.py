"""A hard requirement on the tools the tests run: a missing tool fails with its install hint;
nothing is skipped."""

from __future__ import annotations

import shutil

import pytest


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run scripts/setup.sh (apt) to install the "
                    "test consumers", pytrace=False)
    return path
