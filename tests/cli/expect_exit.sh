#!/bin/sh
# expect_exit.sh CODE PATTERN COMMAND...: runs COMMAND and passes only when it exits with CODE
# and what it printed (standard output and error together) matches the extended regular
# expression PATTERN; a failure says which of the two did not hold.
code=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$code" ]; then
  echo "FAIL: exit status $rc, expected $code"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "FAIL: the output does not match: $pattern"
  exit 1
fi
echo PASS
