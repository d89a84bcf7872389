#!/usr/bin/env bash
# Run one test (or any pytest selection) N times in each cache mode, one pytest session per
# run, and count the outcomes: how a flaky test is shown fixed (or not).
#
#   scripts/repeat-test.sh [-n N] [-m MODES] [-o DIR] -- PYTEST_ARGS...
#   scripts/repeat-test.sh -n 20 -- tests/containers/test_cdi.py::test_running_container_survives_a_daemon_restart
#
# MODES: space-separated, "default" (the mode the suite runs first) and/or a value of
# MOKKAFS_CACHE_MODE (default: "default keep-cache", as scripts/test.sh). The output of every
# failed run is kept in DIR (default: a new temporary directory); the exit status is 0 only
# when every run passed.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

runs=20
modes="default keep-cache"
out=""
while getopts "n:m:o:" opt; do
  case $opt in
    n) runs=$OPTARG ;;
    m) modes=$OPTARG ;;
    o) out=$OPTARG ;;
    *) echo "usage: $0 [-n N] [-m MODES] [-o DIR] -- PYTEST_ARGS..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if (($# == 0)); then
  echo "usage: $0 [-n N] [-m MODES] [-o DIR] -- PYTEST_ARGS... (no test given)" >&2
  exit 2
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/repeat-test.XXXXXX)
mkdir -p "$out"

status=0
for mode in $modes; do
  passed=0 failed=0
  for ((i = 1; i <= runs; i++)); do
    log="$out/$mode-$i.log"
    # a base directory of its own: mounts are checked (and leaks removed) below it alone
    base=(--basetemp "$out/tmp-$mode-$i")
    if [ "$mode" = default ]; then
      env -u MOKKAFS_CACHE_MODE .venv/bin/python -m pytest -q -p no:cacheprovider "${base[@]}" "$@" >"$log" 2>&1
    else
      MOKKAFS_CACHE_MODE=$mode .venv/bin/python -m pytest -q -p no:cacheprovider "${base[@]}" "$@" >"$log" 2>&1
    fi
    rc=$?
    # a selection that matched nothing passes vacuously: count it as a failure
    if ((rc == 0)) && grep -q " passed" "$log"; then
      passed=$((passed + 1)); rm -rf "$log" "$out/tmp-$mode-$i"
    else
      failed=$((failed + 1)); status=1
      echo "repeat-test: $mode run $i failed (exit $rc): $log" >&2
    fi
  done
  echo "repeat-test: $mode: $passed passed, $failed failed of $runs"
done
exit $status
