#!/usr/bin/env bash
# Remakes the README's picture, assets/demo.svg: the agent at work with a real
# model in a real terminal, as `make demo` shows it. In a tmux window of 100×32
# it runs the demo's ACP client (scripts/acp-demo.py, playing the editor)
# against the agent, which asks the model to read a file: the model calls
# `read_file`, the agent runs it, and the model answers from what it read.
# Then it captures the pane with its colours (tmux capture-pane -e -J) and
# draws it as SVG (scripts/terminal-svg.py).
#
# The model: SmolLM2-135M served by llama-server, as `make demo` runs it
# (scripts/llm-server.sh: built and fetched on first use, ~7 min; started on
# PICTURE_PORT and left running), at temperature 0. A 135M model answers in
# prose unless its request asks for a call, so scripts/steer-tool-call.py sits
# between the agent and the server and adds `tool_choice: "required"` and the
# `<tool_call>` prefill to the turn's first request; the calls and the answer
# are the model's own. A run whose capture shows no completed call followed
# by an answer is tried again (PICTURE_TRIES), then fails: no picture without
# the agent at work in it.
#
#   AGENT=PATH      the agent binary (default: target/debug/crucible-agent,
#                   built with `cargo build` when missing)
#   OUT=PATH        where the SVG goes (default: assets/demo.svg)
#   PICTURE_PORT    llama-server's port (default 8080, `make demo`'s)
#   LLM_URL         another OpenAI-compatible server (…/v1) instead, and
#   LLM_MODEL       its model (default smollm2-135m); STEER=0 sends the
#                   requests as they are (a model that calls tools by itself)
#   PICTURE_TRIES   runs before giving up (default 3)
#
# Needs tmux and python3. Takes under a minute once the agent and the model
# server are built (more on a busy machine).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
AGENT=${AGENT:-target/debug/crucible-agent}
OUT=${OUT:-assets/demo.svg}
TRIES=${PICTURE_TRIES:-3}

command -v tmux >/dev/null || { echo "demo-picture: tmux is not installed" >&2; exit 1; }
if [ ! -x "$AGENT" ]; then
  ${CARGO:-cargo} build --bin crucible-agent
fi
case "$AGENT" in /*) ;; *) AGENT="$ROOT/$AGENT" ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/crucible-picture.XXXXXX")
SESSION="crucible-picture-$$"
STEER_PID=""
cleanup() {
  tmux kill-session -t "$SESSION" 2>/dev/null || true
  if [ -n "$STEER_PID" ]; then kill "$STEER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# A small project for the session to work in.
mkdir -p "$WORK/project"
printf 'The secret word is crucible.\n' >"$WORK/project/notes.txt"

if [ -z "${LLM_URL:-}" ]; then
  PORT=${PICTURE_PORT:-8080}
  bash scripts/llm-server.sh build
  bash scripts/llm-server.sh start "$PORT"
  LLM_URL="http://127.0.0.1:$PORT/v1"
fi
MODEL=${LLM_MODEL:-smollm2-135m}
if [ "$MODEL" = smollm2-135m ]; then LABEL="SmolLM2-135M on llama-server"; else LABEL=$MODEL; fi
ENDPOINT=$LLM_URL
if [ "${STEER:-1}" != 0 ]; then
  python3 scripts/steer-tool-call.py "$LLM_URL" >"$WORK/steer.out" 2>"$WORK/steer.err" &
  STEER_PID=$!
  for _ in $(seq 100); do grep -q '^PORT' "$WORK/steer.out" 2>/dev/null && break; sleep 0.1; done
  STEER_PORT=$(awk '/^PORT/ {print $2}' "$WORK/steer.out")
  [ -n "$STEER_PORT" ] || { echo "demo-picture: the steering proxy did not start" >&2; cat "$WORK/steer.err" >&2; exit 1; }
  ENDPOINT="http://127.0.0.1:$STEER_PORT/v1"
fi

# Plan mode (read-only tools), short answers, at most 4 requests a turn: the
# settings of the real-model e2e test of the whole tool loop.
cat >"$WORK/config.toml" <<EOF
[chat]
default_provider = "local"

[llm.providers.local]
type = "openai"
endpoint = "$ENDPOINT"
default_model = "$MODEL"
temperature = 0
max_output_tokens = 64

[agent]
default_mode = "plan"
max_turn_requests = 4
EOF

# The command the terminal runs: what `make demo`'s last step runs, with this
# config; the prompt line is shortened to the binary's name.
printf -v CLIENT '%q ' python3 "$ROOT/scripts/acp-demo.py" \
  --prompt "Read the file notes.txt and tell me the secret word." "$AGENT" \
  --config "$WORK/config.toml" --data-dir "$WORK/data"

# shows_the_agent_at_work CAPTURE: a tool call completed, and after the last
# tool call line the model wrote an answer and the turn ended.
shows_the_agent_at_work() {
  grep -q '^  \[tool call .*: completed\]' "$1" || return 1
  awk '/^  \[tool call/ { answer = 0; next }
       /^\[stopReason: end_turn\]/ { ended = 1 }
       /^\[/ || /^agent exited/ || /^ *$/ { next }
       { answer = 1 }
       END { exit !(answer && ended) }' "$1"
}

try=1
while :; do
  rm -rf "$WORK/data" "$WORK/done"
  tmux kill-session -t "$SESSION" 2>/dev/null || true
  tmux new-session -d -s "$SESSION" -x 100 -y 32 -c "$WORK/project" \
    "env RUST_LOG=warn TERM=xterm-256color bash -c '$CLIENT; echo; touch $WORK/done; sleep 600'"
  # acp-demo gives a prompt turn 120 s; a busy machine may need most of it.
  for _ in $(seq 1500); do [ -e "$WORK/done" ] && break; sleep 0.1; done
  [ -e "$WORK/done" ] || { echo "demo-picture: the demo did not finish within 150 s" >&2; exit 1; }
  tmux capture-pane -t "$SESSION" -e -J -p >"$WORK/capture.txt"
  tmux capture-pane -t "$SESSION" -J -p >"$WORK/plain.txt"
  shows_the_agent_at_work "$WORK/plain.txt" && break
  echo "demo-picture: run $try of $TRIES shows no completed tool call followed by an answer:" >&2
  sed 's/^/    /' "$WORK/plain.txt" >&2
  [ "$try" -lt "$TRIES" ] || exit 1
  try=$((try + 1))
done

# Paths of this machine's temp dirs say nothing to a reader.
sed -e "s#$WORK/project#~/project#g" -e "s#$WORK/#/tmp/#g" -e "s#$AGENT#crucible-agent#g" \
  -e "s#python3 [^ ]*acp-demo.py#acp-demo#" "$WORK/capture.txt" >"$WORK/clean.txt"
mkdir -p "$(dirname "$OUT")"
python3 scripts/terminal-svg.py --title "crucible-agent: make demo's client and $LABEL" \
  <"$WORK/clean.txt" >"$OUT"
echo "wrote $OUT"
