#!/bin/sh
# Runs a command the build runs for a test, keeping its output and exit
# status for the test to report (check_status.sh): a failure is then a
# failing test, not a failed build.
#   record_status.sh <dir> <command> [arguments]
set -eu
out=$1
shift
rm -rf "$out"
mkdir -p "$out"
status=0
"$@" >"$out/log" 2>&1 || status=$?
echo "$status" >"$out/status"
