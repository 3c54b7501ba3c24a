#!/usr/bin/env bash
# Renders a results file as the HTML report and screenshots it in headless
# Chromium, failing when the browser reports an error on the page.
#   scripts/report-screenshot.sh [results.json] [out-dir]
# Defaults: the sample run in sandbox/report/testdata, .data/report.
# Installs chromium with apt-get when no Chromium is found.
set -euo pipefail

export GOTOOLCHAIN=local
in=$(realpath "${1:-sandbox/report/testdata/sample_run.json}")
out=${2:-.data/report}
mkdir -p "$out"
out=$(realpath "$out")
go=${GO:-go}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
html="$out/report.html"
png="$out/report.png"

"$go" run ./sandbox/report/cmd/reporthtml -in "$in" -out "$html"

browser=""
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null; then browser=$b; break; fi
done
if [[ -z $browser ]]; then
	echo "no Chromium found: installing chromium with apt-get" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
	browser=chromium
fi

log="$out/browser.log"
# --enable-logging=stderr --v=0 puts the page's console messages in the log
# ("INFO:CONSOLE:<line>] ..."): the report has no script, so any console
# line is an error. (That it loads nothing is checked by the Go tests.)
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
	--no-first-run --no-default-browser-check --disable-extensions \
	--enable-logging=stderr --v=0 \
	--window-size=1400,${HEIGHT:-2400} --screenshot="$png" \
	"file://$html" 2>"$log" || { cat "$log" >&2; echo "report-screenshot: the browser failed" >&2; exit 1; }

if grep -E ':CONSOLE[:(]|Uncaught' "$log" >&2; then
	echo "report-screenshot: the page logged errors (above)" >&2
	exit 1
fi
[[ -s $png ]] || { echo "report-screenshot: no screenshot written" >&2; exit 1; }
echo "report: $html"
echo "screenshot: $png"
