#!/usr/bin/env bash
# Set up (see setup.sh), then run the whole suite: lint, types, unit, FUSE and consumer tests,
# twice: once as a mount chooses by default (no-open cache mode, on the patched pyfuse3 the
# set-up builds) and once in keep-cache mode, the fallback for a stock pyfuse3.
# Extra arguments go to pytest (e.g. scripts/test.sh -k infiniband).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
# Property tests try the same examples every run, and nothing a run found replays in the next
# (tests/helpers/hypothesis_profiles.py, docs/testing.md).
export MOKKAFS_HYPOTHESIS_PROFILE="${MOKKAFS_HYPOTHESIS_PROFILE:-mokkafs-ci}"
.venv/bin/ruff check mokkafs tests bench scripts
.venv/bin/mypy
echo "test: pass 1 of 2, default cache mode (auto: no-open)" >&2
env -u MOKKAFS_CACHE_MODE .venv/bin/python -m pytest "$@"
echo "test: pass 2 of 2, MOKKAFS_CACHE_MODE=keep-cache" >&2
MOKKAFS_CACHE_MODE=keep-cache .venv/bin/python -m pytest "$@"
