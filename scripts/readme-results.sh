#!/usr/bin/env bash
# readme-results.sh: copies the headline of sandbox/results/latest.md (the judge table, the run line,
# the agreement line and the summary table) into README.md between the results markers. `make results` runs it
# after the demo it writes into sandbox/results; internal/repotest fails when the two differ, so the README never drifts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# From the line after the title (the judge-versus-CommitLayer table, then the run line, the agreement
# line and the summary table) to the summary's last row.
block=$(awk 'NR>2{print} NR>2 && /^\| Errors \|/{exit}' sandbox/results/latest.md)
[[ -n $block ]] || { echo "readme-results: no summary in sandbox/results/latest.md" >&2; exit 1; }
python3 - "$block" <<'PY'
import sys, re
block = sys.argv[1]
s = open("README.md").read()
start, end = "<!-- results:start (generated from sandbox/results/latest.md by make readme-results) -->", "<!-- results:end -->"
i, j = s.index(start), s.index(end)
open("README.md", "w").write(s[:i + len(start)] + "\n" + block + "\n" + s[j:])
PY
echo "README.md: results from sandbox/results/latest.md"
