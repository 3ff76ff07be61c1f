#!/usr/bin/env bash
# Short runs of every native fuzz target in the module (FUZZTIME each, default 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
status=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
		echo "== $pkg $target ($FUZZTIME)"
		if ! go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 3s; then
			status=1
		fi
	done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | grep -v '^./bench/' | sed 's|^\./||' | sort)
exit $status
