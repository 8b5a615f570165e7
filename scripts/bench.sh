#!/usr/bin/env bash
# `make bench`: crucible-agent (release build) side by side with codex-acp's
# native binary against a scripted local streaming server; prints a table and
# writes bench/results.md. Not run by CI (it measures this machine: close other
# heavy work first; numbers vary about 2x between runs on a busy machine, so
# compare only within one run).
#   BENCH_QUICK=1 make bench    fewer repetitions (about 3 minutes instead of 10)
#   BENCH_LOCAL=0 make bench    without the local-model section (a real llama-server)
#   BENCH_LONG=0 make bench     without the 30-turn session on the local model
#   BENCH_REMOTE=0 make bench   without the remote section (serve over WebSocket
#                               and Streamable HTTP beside stdio; `make bench remote`
#                               runs only it: scripts/bench.sh remote)
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

# The remote section: `serve` beside stdio (bench/remote.mjs, on Node with
# the ws package), against the scripted model server of the e2e tier.
remote_section() {
  local ws_version=8.23.0 clients="$CACHE/clients" fake_log fake_pid port
  if ! grep -q "\"version\": \"$ws_version\"" "$clients/node_modules/ws/package.json" 2>/dev/null; then
    mkdir -p "$clients"
    npm install --prefix "$clients" --no-audit --no-fund --loglevel=error "ws@$ws_version" ||
      die "npm could not install ws@$ws_version"
  fi
  fake_log=$(mktemp)
  python3 -u e2e/fake_llm.py --port 0 >"$fake_log" 2>&1 &
  fake_pid=$!
  for _ in $(seq 1 50); do grep -q '^PORT ' "$fake_log" && break; sleep 0.1; done
  port=$(awk '/^PORT /{print $2; exit}' "$fake_log")
  [ -n "$port" ] || { kill "$fake_pid"; die "the scripted model server did not start"; }
  echo "== bench: remote (serve over WebSocket and Streamable HTTP; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
  local quick=()
  [ -n "${BENCH_QUICK:-}" ] && quick=(--quick)
  # 1,000 idle connections need a descriptor each, on both sides.
  ulimit -n 8192 2>/dev/null || true
  node bench/remote.mjs "$(pwd)/$AGENT" "http://127.0.0.1:$port" "$clients/node_modules/ws" "${quick[@]}" \
    --out bench/results.md || { kill "$fake_pid"; die "the remote bench failed"; }
  kill "$fake_pid" 2>/dev/null || true
  rm -f "$fake_log"
}

if [ "${1:-}" = remote ]; then
  echo "== bench: building the release binary"
  CARGO="$CARGO" bash scripts/build.sh >/dev/null
  remote_section
  exit 0
fi

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

if [ "${BENCH_REMOTE:-1}" != 0 ]; then
  remote_section
fi

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
