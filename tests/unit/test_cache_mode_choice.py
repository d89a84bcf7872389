"""How a mount's cache mode is chosen: the one variable that sets its default, and what a
machine without the patched pyfuse3 is told (loudly, with the cost and what to do)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from mokkafs.errors import UsageError
from mokkafs.fuse.cache_mode import CACHE_MODE_ENV, CacheMode, choose, patch_help
from tests.helpers.mounts import REPO


def test_the_variable_gives_the_default_and_the_option_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_MODE_ENV, "keep-cache")
    assert choose(None, patched=True) is CacheMode.KEEP_CACHE
    assert choose("no-open", patched=True) is CacheMode.NO_OPEN
    monkeypatch.setenv(CACHE_MODE_ENV, "fast")
    with pytest.raises(UsageError, match=rf"'fast' .*\${CACHE_MODE_ENV}"):
        choose(None, patched=True)
    monkeypatch.delenv(CACHE_MODE_ENV)
    assert choose(None, patched=True) is CacheMode.NO_OPEN


def test_the_command_leaves_the_default_to_the_variable() -> None:
    from mokkafs.cli import parse_mount

    assert parse_mount(["/mnt"]).cache_mode is None  # so choose() reads the variable
    text = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--help"],
                          capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert f"${CACHE_MODE_ENV}" in " ".join(text.split())


def test_auto_without_the_patch_warns_of_the_cost_and_names_the_fix(
        caplog: pytest.LogCaptureFixture, expected_logs: list[str]) -> None:
    expected_logs.append("lacks the no-open patch")
    with caplog.at_level(logging.WARNING):
        assert choose("auto", patched=False) is CacheMode.KEEP_CACHE
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert "a hundred times slower or more" in message
    assert f"as {REPO / 'native/pyfuse3/README.md'} says" in message  # a checkout's write-up


def test_a_pip_installation_is_sent_to_the_write_up_pip_installed(tmp_path: Path) -> None:
    prefix = tmp_path / "venv"
    installed = prefix / "share/mokkafs/pyfuse3/README.md"
    installed.parent.mkdir(parents=True)
    installed.write_text("# pyfuse3 patch\n")
    site = tmp_path / "venv/lib/python3.11/site-packages"  # no native/ beside the package
    assert patch_help(checkout=site, prefix=prefix) == (
        f"install pyfuse3 with the patch as {installed} says")
    with pytest.raises(UsageError) as refused:
        choose("no-open", patched=False)
    assert "native/pyfuse3/README.md says" in str(refused.value)
    assert "--cache-mode keep-cache" in str(refused.value)
