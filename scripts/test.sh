#!/usr/bin/env bash
# Set up (see setup.sh), then run the whole suite: lint, types, unit, FUSE and consumer tests.
# Extra arguments go to pytest (e.g. scripts/test.sh -k infiniband).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
cd "$here"
.venv/bin/ruff check mokkafs tests bench
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
