#!/usr/bin/env bash
# fuzz.sh [packages...]: runs every Fuzz target of the given packages (default ./...) for FUZZTIME
# each (default 10s). Targets are found with `go test -list '^Fuzz'`; go test fuzzes one target of one
# package per run. A crash fails the script; go test writes the failing input under the package's
# testdata/fuzz/<Target>/, which is where seed inputs worth keeping go.
set -euo pipefail

export GOTOOLCHAIN=local
FUZZTIME=${FUZZTIME:-10s}
cd "$(dirname "${BASH_SOURCE[0]}")/.."

[[ $# -gt 0 ]] || set -- ./...

# Packages whose test files declare a Fuzz function (a cheap filter before compiling with -list).
mapfile -t candidates < <(go list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' "$@" |
	while read -r pkg dir files; do
		[[ -n $files ]] || continue
		for f in $files; do
			if grep -q '^func Fuzz[A-Z0-9_]' "$dir/$f"; then
				echo "$pkg"
				break
			fi
		done
	done)

if [[ ${#candidates[@]} -eq 0 ]]; then
	echo "fuzz: no Fuzz targets in $*"
	exit 0
fi

ran=0
failed=()
for pkg in "${candidates[@]}"; do
	if ! list=$(go test -list '^Fuzz' "$pkg"); then
		failed+=("$pkg (go test -list failed)")
		continue
	fi
	mapfile -t targets < <(grep '^Fuzz' <<<"$list" || true)
	for target in "${targets[@]}"; do
		echo "fuzz: $pkg $target for $FUZZTIME"
		if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg"; then
			ran=$((ran + 1))
		else
			failed+=("$pkg $target")
		fi
	done
done

echo "fuzz: $ran target(s) passed, ${#failed[@]} failed"
if [[ ${#failed[@]} -gt 0 ]]; then
	printf 'fuzz: FAILED %s\n' "${failed[@]}"
	exit 1
fi
