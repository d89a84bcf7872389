#!/usr/bin/env bash
# Set up (see setup.sh), then run the suite: lint, types, unit, FUSE and consumer tests.
#
#   scripts/test.sh           everything, in two passes (what .ci/run runs)
#   scripts/test.sh --quick   ruff, mypy and tests/unit (no FUSE mount, daemon or container):
#                             one pass, for the inner loop
#   scripts/test.sh [--quick] ARGS...   ARGS go to pytest (e.g. -k infiniband)
#
# Pass 1 runs every test as a mount chooses by default (no-open cache mode, on the patched
# pyfuse3 the set-up builds); pass 2 runs, in keep-cache mode (the fallback for a stock
# pyfuse3), the tests whose result can depend on the mode (tests/helpers/passes.py). Tests run
# in parallel, one pytest-xdist worker per CPU and one more (a test often waits on a process it
# started: a daemon, podman, a consumer), a module on one worker, the slowest modules
# first (tests/helpers/order.py). Every step runs even when one before it failed; the summary
# at the end gives each one's result and time, and the script exits 1 when any failed. A pass
# that ran no test (pytest's exit 5) failed, unless ARGS chose tests pass 2 leaves to pass 1.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
quick=false
if [ "${1:-}" = "--quick" ]; then
  quick=true
  shift
fi
"$here/scripts/setup.sh"
cd "$here"
# The suite starts hundreds of Python processes (daemons, compiling processes, CLI calls),
# each importing the package from this checkout: its bytecode is made here once, so that none
# compiles those modules again where PYTHONDONTWRITEBYTECODE keeps Python from writing them.
.venv/bin/python -m compileall -q mokkafs tests bench >/dev/null
# Property tests try the same examples every run, and nothing a run found replays in the next
# (tests/helpers/hypothesis_profiles.py, docs/testing.md).
export MOKKAFS_HYPOTHESIS_PROFILE="${MOKKAFS_HYPOTHESIS_PROFILE:-mokkafs-ci}"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary=() passed=0 failed=0 status=0

count() {  # the number before WORD in pytest's closing line (0 when absent)
  local n
  n=$(grep -oE "[0-9]+ $2" <<<"$1" | head -1 | cut -d' ' -f1) || true
  echo "${n:-0}"
}

# step NAME COMMAND...: run it, note its result and time; for pytest, its closing line.
step() {
  local name=$1 start=$SECONDS rc log="$logs/${#summary[@]}" closing="" result
  shift
  echo "test: $name" >&2
  set +e
  "$@" | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  if [[ $name == pass* ]]; then
    closing=$(grep -E ' in [0-9.]+s' "$log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//') || true
    passed=$((passed + $(count "$closing" passed)))
    failed=$((failed + $(count "$closing" failed) + $(count "$closing" error)))
  fi
  case $rc in
    0) result=ok ;;
    5) if [[ $name == "pass 2"* ]] && ((${#args[@]})); then
         result="ok: none of the tests chosen depends on the cache mode"
       else
         result="FAILED: no test ran (exit 5)"
         status=1
       fi ;;
    *) result="FAILED (exit $rc)"; status=1 ;;
  esac
  summary+=("$(printf '%-32s %5d s  %s%s' "$name" $((SECONDS - start)) "$result" \
                "${closing:+  [$closing]}")")
}

args=("$@")
pytest=(.venv/bin/python -m pytest -n "$(($(nproc) + 1))" --dist loadfile --no-loadscope-reorder --durations=10)
[ -t 1 ] && pytest+=(--color=yes)  # its output goes through tee, to read its closing line
step "ruff" .venv/bin/ruff check mokkafs tests bench scripts
step "mypy" .venv/bin/mypy
if $quick; then
  step "pass 1 of 1, unit tests" env -u MOKKAFS_CACHE_MODE "${pytest[@]}" tests/unit "${args[@]}"
else
  step "pass 1 of 2, no-open" env -u MOKKAFS_CACHE_MODE "${pytest[@]}" "${args[@]}"
  step "pass 2 of 2, keep-cache" env MOKKAFS_CACHE_MODE=keep-cache "${pytest[@]}" \
    --mode-dependent-only "${args[@]}"
fi

echo
echo "test: summary"
printf 'test:   %s\n' "${summary[@]}"
echo "test: $passed passed, $failed failed"
exit $status
