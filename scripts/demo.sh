#!/usr/bin/env bash
# `make demo`: build crucible-agent, start a real local LLM (llama-server with
# SmolLM2-135M-Instruct, see scripts/llm-server.sh), and hold a short ACP
# conversation with the agent over stdio (scripts/acp-demo.py).
#
#   DEMO_PORT=8080      port of the local LLM server
#   any arguments are passed to scripts/acp-demo.py, e.g.
#   bash scripts/demo.sh --raw --prompt "Write a haiku about Rust."
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PORT=${DEMO_PORT:-8080}
# The demo profile compiles in a few minutes; the shipped binary is `make build`'s.
AGENT="${CARGO_TARGET_DIR:-target}/demo/crucible-agent"
STARTED=$(date +%s)
# Keep the agent's log (its stderr, shown in this terminal) to warnings unless asked otherwise.
export RUST_LOG=${RUST_LOG:-warn}

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  step() { printf '\n\033[1m=== %s\033[0m\n' "$*"; }
else
  step() { printf '\n=== %s\n' "$*"; }
fi
die() {
  printf 'demo: error: %s\n' "$1" >&2
  shift
  for line in "$@"; do printf '    %s\n' "$line" >&2; done
  exit 1
}

command -v cargo >/dev/null 2>&1 || die "cargo not found" "install Rust (https://rustup.rs) and run 'make demo' again"
command -v python3 >/dev/null 2>&1 || die "python3 not found" "install Python 3.11 or newer and run 'make demo' again"

# A first run builds both the agent and llama-server: side by side, since
# each alone leaves a core idle for long stretches.
LLM_LOG=""
LLM_PID=""
TMP=""
# A failed or interrupted demo leaves no build running behind it.
cleanup() {
  if [ -n "$LLM_PID" ]; then kill "$LLM_PID" 2>/dev/null || true; fi
  if [ -n "$TMP" ]; then rm -rf "$TMP"; fi
}
trap cleanup EXIT
LLM_CACHE=${LLM_SERVER_CACHE:-$HOME/.cache/llm-server-e2e}
if [ ! -x "$LLM_CACHE/bin/llama-server" ] || [ ! -f "$LLM_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  LLM_LOG=$(mktemp "${TMPDIR:-/tmp}/crucible-demo-llm.XXXXXX")
  step "0/4 building llama-server in the background (first run only; log: $LLM_LOG)"
  bash scripts/llm-server.sh build >"$LLM_LOG" 2>&1 &
  LLM_PID=$!
fi

step "1/4 building crucible-agent (scripts/build.sh, the demo profile)"
PROFILE=demo bash scripts/build.sh >/dev/null
[ -x "$AGENT" ] || die "cargo finished but $AGENT is missing"

if [ -n "$LLM_PID" ]; then
  step "... waiting for the llama-server build"
  if ! wait "$LLM_PID"; then
    tail -n 20 "$LLM_LOG" >&2
    LLM_PID=""
    die "building llama-server failed (its log: $LLM_LOG)" "run 'bash scripts/llm-server.sh build' to see it again"
  fi
  LLM_PID=""
  rm -f "$LLM_LOG"
fi

step "2/4 starting the local LLM server on 127.0.0.1:$PORT"
bash scripts/llm-server.sh start "$PORT" ||
  die "the local LLM server did not start on port $PORT (see above)" \
    "if another program holds that port, run the demo on another one: DEMO_PORT=8090 make demo"

step "3/4 writing a demo configuration"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/crucible-demo.XXXXXX")
CONFIG="$TMP/config.toml"
cat >"$CONFIG" <<EOF
[chat]
default_provider = "local"

[llm.providers.local]
type = "openai"
endpoint = "http://127.0.0.1:$PORT/v1"
default_model = "smollm2-135m"
EOF
echo "$CONFIG:"
sed 's/^/    /' "$CONFIG"

step "4/4 talking to the agent over ACP (JSON-RPC on its stdin/stdout)"
if ! python3 scripts/acp-demo.py "$@" "$AGENT" --config "$CONFIG" --data-dir "$TMP/data"; then
  die "the ACP conversation failed (see above)" \
    "is the LLM server healthy?  bash scripts/llm-server.sh status" \
    "its log:                    ${LLM_SERVER_CACHE:-$HOME/.cache/llm-server-e2e}/server-$PORT.log" \
    "more detail:                RUST_LOG=debug make demo"
fi

case "$AGENT" in
  /*) AGENT_ABS=$AGENT ;;
  *) AGENT_ABS="$(pwd)/$AGENT" ;;
esac
cat <<EOF

=== done
That was a real ACP session: scripts/acp-demo.py played the editor, talking to
  $AGENT
over its stdin/stdout; the answers came from SmolLM2-135M, served by llama-server
on 127.0.0.1:$PORT (a tiny model: expect short, sometimes odd answers).

Use the agent from an editor or another ACP client by running the same binary
with your own config file (--config FILE); see README.md for details:
  Zed:   add an entry under "agent_servers" in settings.json whose command is
         $AGENT_ABS
  acpx:  npx -y acpx@0.19.1 --agent "$AGENT_ABS --config FILE" exec "say hi"

The LLM server is still running, so the next 'make demo' starts at once.
Stop it with:  bash scripts/llm-server.sh stop $PORT
EOF
echo "(make demo took $(($(date +%s) - STARTED)) s)"
