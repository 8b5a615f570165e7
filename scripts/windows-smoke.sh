#!/usr/bin/env bash
# The Windows smoke (issue 31): builds the Windows .exe with mingw-w64
# (cross-check.sh, cached in ~/.cache/cross-check), starts the scripted model
# (e2e/fake_llm.py) and drives the .exe under Wine as an ACP client would
# (scripts/windows-smoke.py: a Windows cwd, write_file, shell, a cancelled
# long command, a session loaded again after a restart).
# Run from the checkout root:  bash scripts/windows-smoke.sh [EXE]
# CROSS_CHECK: path of cross-check.sh (default ../shared/tools/cross-check.sh,
# then /work/shared/tools/cross-check.sh).
set -euo pipefail

die() { echo "windows-smoke: $*" >&2; exit 1; }
[ -f Cargo.toml ] || die "run me from the checkout root"
CROSS_CHECK=${CROSS_CHECK:-}
for candidate in "$CROSS_CHECK" ../shared/tools/cross-check.sh /work/shared/tools/cross-check.sh; do
  [ -n "$candidate" ] && [ -f "$candidate" ] && { CROSS_CHECK=$(realpath "$candidate"); break; }
done
[ -f "$CROSS_CHECK" ] || die "cross-check.sh not found (set CROSS_CHECK)"

exe=${1:-}
if [ -z "$exe" ]; then
  exe=$(bash "$CROSS_CHECK" build windows | grep -m1 '/crucible-agent\.exe$') \
    || die "the Windows build produced no crucible-agent.exe"
fi
[ -f "$exe" ] || die "no such file: $exe"

log=$(mktemp)
python3 -u e2e/fake_llm.py --port 0 > "$log" 2>&1 &
fake=$!
trap 'kill "$fake" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 50); do grep -q '^PORT ' "$log" && break; sleep 0.1; done
port=$(awk '/^PORT /{print $2; exit}' "$log")
[ -n "$port" ] || { cat "$log" >&2; die "the scripted model server did not start"; }

python3 -u scripts/windows-smoke.py "bash $CROSS_CHECK run-windows" "$exe" "http://127.0.0.1:$port"
