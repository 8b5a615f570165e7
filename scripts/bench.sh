#!/usr/bin/env bash
# `make bench`: crucible-agent (release build) side by side with codex-acp's
# native binary against a scripted local streaming server; prints a table and
# writes bench/results.md. Not run by CI (it measures this machine: close other
# heavy work first; numbers vary about 2x between runs on a busy machine, so
# compare only within one run).
#   BENCH_QUICK=1 make bench    fewer repetitions (about 3 minutes instead of 10)
#   BENCH_LOCAL=0 make bench    without the local-model section (a real llama-server)
#   BENCH_LONG=0 make bench     without the 30-turn session on the local model
#   make bench-long             only that session (scripts/bench.sh long);
#                               BENCH_AGENT, BENCH_LABEL, BENCH_PAUSE as in the Makefile
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/crucible-e2e"
CODEX_VERSION=0.16.0
CODEX_NPM="$CACHE/codex-acp"
CODEX_PKG="$CODEX_NPM/node_modules/@zed-industries/codex-acp-linux-x64"
AGENT="${CARGO_TARGET_DIR:-target}/release/crucible-agent"

# The 30-turn session on the real local model (bench/long_session.py).
long_session() {
  local agent=${BENCH_AGENT:-$AGENT}
  echo "== bench: 30-turn session on the local model (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
  bash scripts/llm-server.sh build >/dev/null
  python3 bench/long_session.py "$agent" scripts/llm-server.sh --pause "${BENCH_PAUSE:-10}" \
    --label "${BENCH_LABEL:-$(git rev-parse --short HEAD 2>/dev/null || echo latest) ($agent)}" \
    --out bench/results.md
}

if [ "${1:-}" = long ]; then
  if [ -z "${BENCH_AGENT:-}" ]; then
    echo "== bench: building the release binary"
    CARGO="$CARGO" bash scripts/build.sh >/dev/null
  fi
  long_session
  exit 0
fi

die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || die "python3 is not installed"
command -v npm >/dev/null 2>&1 || die "npm is not installed (codex-acp, the peer we compare with, comes from npm)"
[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] || die "the codex-acp peer binary used here is for Linux x86_64 only"

echo "== bench: building the release binary"
CARGO="$CARGO" bash scripts/build.sh >/dev/null

if ! grep -q "\"version\": \"$CODEX_VERSION\"" "$CODEX_PKG/package.json" 2>/dev/null; then
  echo "== bench: installing codex-acp $CODEX_VERSION into $CODEX_NPM"
  mkdir -p "$CODEX_NPM"
  npm install --prefix "$CODEX_NPM" --no-audit --no-fund --loglevel=error \
    "@zed-industries/codex-acp-linux-x64@$CODEX_VERSION" || die "npm could not install codex-acp $CODEX_VERSION"
fi
[ -x "$CODEX_PKG/bin/codex-acp" ] || die "codex-acp binary missing at $CODEX_PKG/bin/codex-acp"

echo "== bench: running (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
quick=()
[ -n "${BENCH_QUICK:-}" ] && quick=(--quick)
python3 bench/bench.py "$AGENT" "$CODEX_PKG/bin/codex-acp" "${quick[@]}" --out bench/results.md

# The local-model section: a real llama-server (built on first use, ~7 min)
# and SmolLM2, through a proxy that reads the server's own timings.
# BENCH_LOCAL=0 skips it.
if [ "${BENCH_LOCAL:-1}" != 0 ]; then
  echo "== bench: local model (llama-server + SmolLM2-135M)"
  bash scripts/llm-server.sh build >/dev/null
  python3 bench/local_model.py "$AGENT" scripts/llm-server.sh --codex "$CODEX_PKG/bin/codex-acp" \
    --out bench/results.md
fi

if [ "${BENCH_LONG:-1}" != 0 ]; then
  long_session
fi
