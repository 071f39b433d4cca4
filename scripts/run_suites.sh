#!/usr/bin/env bash
# Run each suite given as an argument (a shell command) to its end, whatever
# the ones before it did, then exit non-zero if any failed, naming them.
# `make test` uses it so that a failure in the main suite never hides the
# LangGraph-oldest suite behind it.
set -u
failed=()
for suite in "$@"; do
  echo "== suite: $suite"
  bash -c "$suite"
  code=$?
  [ "$code" -eq 0 ] || failed+=("exit $code: $suite")
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "== ${#failed[@]} of $# suites failed:"
  printf '   %s\n' "${failed[@]}"
  exit 1
fi
echo "== all $# suites passed"
