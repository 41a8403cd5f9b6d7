#!/usr/bin/env bash
# The history page (plots/history.py HISTORY PAGE.html; --changes --html) in a real headless browser
# (Debian's chromium, scripts/setup_packages.sh): pages of 12 and of 150 builds (a -7% step 40
# builds back, an alert) have the same fixed width, fit a 1280-pixel window, show the title, the
# change point and the alert on the first screen, link each build to its commit, filter by series,
# carry plotly.js inline (no network), and export Bencher's BMF and asv's results. The screenshot
# of the 150-build page is kept as BUILD_DIR/history-page-150.png (its path is printed).
# Exit 77 (skipped) without chromium or plotly.
#   plots/page_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:?usage: page_test.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null | tail -20; exit 1; }
# shellcheck source=scripts/python_with.sh
. "$src/scripts/python_with.sh"
py=$(python_with scipy plotly) || { echo "SKIP: no python3 with SciPy and plotly (scripts/setup_packages.sh)"; exit 77; }
browser=$(command -v chromium || command -v chromium-browser) ||
  { echo "SKIP: no chromium (scripts/setup_packages.sh)"; exit 77; }
url="https://example.org/ptdp/commit/{sha}"
make() {  # NAME BUILDS PYTHON-EXPRESSION-OF-i
  "$py" "$src/plots/history_fixtures.py" "$src/results/history.csv" "$tmp/$1.csv" "$3" --builds "$2" --noise 0.005 ||
    fail "history_fixtures.py $3"
}
make h12 12 "1000"
make h150 150 "930 if i >= 110 else 1000"
# A second series (another host) for the filter.
sed -n '2,$p' "$tmp/h150.csv" | sed 's/,vm,AMD EPYC,/,vm2,AMD EPYC,/' >"$tmp/vm2.csv"
cat "$tmp/vm2.csv" >>"$tmp/h150.csv"
"$py" "$src/plots/history.py" "$tmp/h12.csv" "$tmp/h12.html" --commit-url "$url" >"$tmp/out" 2>&1 || fail "h12 page"
"$py" "$src/plots/history.py" "$tmp/h150.csv" --changes --recent 5 --tolerance 5 --html "$tmp/h150.html" \
  --commit-url "$url" >"$tmp/out" 2>&1
[ $? -eq 1 ] || fail "h150 --changes: exit 1 (an alert) expected"
page="$tmp/h150.html"
grep -qF '<a href=\"https://example.org/ptdp/commit/149ababababababababababababababababababa\">149ababa</a>' "$page" ||
  fail "no commit link in the page"
grep -qF '"label":"all series"' "$page" && grep -qF 'on vm2' "$page" || fail "no series filter"
! grep -qiE '<script[^>]+src=' "$page" || fail "the page loads a script from elsewhere (not offline)"
grep -qF 'Plotly' "$page" || fail "plotly.js is not inlined"
shot() {  # NAME: a screenshot and the DOM after the scripts ran, in a 1280x900 window
  local flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,900
               --virtual-time-budget=10000 --user-data-dir="$tmp/chromium-$1")
  timeout 120 "$browser" "${flags[@]}" --screenshot="$tmp/$1.png" "file://$tmp/$1.html" >"$tmp/out" 2>&1 ||
    fail "chromium --screenshot $1"
  timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$tmp/$1.html" >"$tmp/$1.dom" 2>"$tmp/out" ||
    fail "chromium --dump-dom $1"
  grep -q 'data-plot="drawn"' "$tmp/$1.dom" || fail "$1: the plot was not drawn"
  sed -n 's/.*data-page-width="\([0-9]*\)" data-plot-width="\([0-9]*\)".*/\1 \2/p' "$tmp/$1.dom" | head -1
}
w12=$(shot h12) || exit 1
w150=$(shot h150) || exit 1
# "PAGE PLOT": the body's scroll width and the plot's, in pixels.
[ -n "$w12" ] && [ "$w12" = "$w150" ] || fail "the page's width changes with the builds: $w12 px at 12, $w150 px at 150"
[ "$w150" = "1200 1200" ] || fail "the page and its plot are $w150 px wide, not 1200 (in the 1280-pixel window)"
# Drawn (an SVG text element, not the figure's JSON): the title, the alert and the change point.
drawn() { grep -q "data-math=\"N\"[^>]*>$1" "$tmp/h150.dom"; }
drawn "ptdp throughput history" || fail "no title in the drawn page"
drawn "ALERT -7\." && drawn "step -[67]\." || fail "the alert or the change point is not drawn"
"$py" - "$tmp/h150.png" <<'EOF' || fail "the screenshot"
import sys
import matplotlib.image
img = matplotlib.image.imread(sys.argv[1])
h, w = img.shape[:2]
assert (w, h) == (1280, 900), (w, h)
colors = {tuple(p) for p in (img[::7, ::7, :3] * 255).astype(int).reshape(-1, 3)}
assert len(colors) > 20, f"{len(colors)} colors: a blank screenshot"
red = ((img[:, :, 0] > 0.75) & (img[:, :, 1] < 0.35) & (img[:, :, 2] < 0.35)).sum()
assert red > 50, "no red (the alert) on the first screen"
EOF
cp "$tmp/h150.png" "$build/history-page-150.png"
echo "screenshot: $build/history-page-150.png (150 builds; page and plot ${w150// / and } px wide, as at 12 builds)"
# Exports: Bencher's BMF (the newest build) and asv's results folder (every build).
"$py" "$src/plots/history.py" "$tmp/h150.csv" --bmf "$tmp/bmf.json" >"$tmp/out" 2>&1 || fail "--bmf"
"$py" - "$tmp/bmf.json" <<'EOF' || fail "the BMF file"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d) == 2, d.keys()
for bench, measures in d.items():
    t = measures["throughput"]
    assert t["lower_value"] <= t["value"] <= t["upper_value"] and 850 < t["value"] < 1000, t
EOF
mkdir "$tmp/asv"
"$py" "$src/plots/history.py" "$tmp/h150.csv" --asv "$tmp/asv" >"$tmp/out" 2>&1 || fail "--asv"
"$py" - "$tmp/asv" <<'EOF' || fail "the asv results"
import json, os, sys
root = sys.argv[1]
bench = json.load(open(os.path.join(root, "benchmarks.json")))
assert bench["version"] == 2 and len(bench) == 2, bench.keys()
machines = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
assert len(machines) == 2, machines
for m in machines:
    assert json.load(open(os.path.join(root, m, "machine.json")))["machine"] == m
    files = [f for f in os.listdir(os.path.join(root, m)) if f != "machine.json"]
    assert len(files) == 150, len(files)
    r = json.load(open(os.path.join(root, m, "149ababa-ptdp.json")))
    assert r["version"] == 2 and r["commit_hash"].startswith("149abab"), r
    (name, row), = r["results"].items()
    assert dict(zip(r["result_columns"], row))["result"][0] < 960, row
EOF
echo "PASS: history page"
