#!/bin/sh
# Prints what record_status.sh kept and exits with the command's status.
#   check_status.sh <dir>
set -eu
out=$1
[ -f "$out/status" ] ||
  { echo "error: $out was not built (run the build first)"; exit 1; }
cat "$out/log"
exit "$(cat "$out/status")"
