from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.live import Live, live_mount


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    """A mount of a watched a100 profile, with its metrics endpoint."""
    with live_mount(tmp_path) as mounted:
        yield mounted
