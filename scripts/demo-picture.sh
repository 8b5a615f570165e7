#!/usr/bin/env bash
# Remakes the README's picture, assets/demo.svg: the agent at work in a real
# terminal, as `make demo` shows it. In a tmux window of 100×24 it runs the
# demo's ACP client (scripts/acp-demo.py, playing the editor) against the
# agent, which answers two prompts from a model server; then it captures the
# pane with its colours (tmux capture-pane -e -J) and draws it as SVG
# (scripts/terminal-svg.py).
#
# The model: e2e/fake_llm.py, the scripted server of the e2e tests, so the
# picture needs no model download or llama.cpp build and comes out the same
# each time (its first prompt asks for a `read_file` call, which the agent
# runs; its answers say they are scripted). To show a real model instead,
# start one first (`bash scripts/llm-server.sh start 8080`, as `make demo`
# does) and run with LLM_URL=http://127.0.0.1:8080/v1 LLM_MODEL=smollm2-135m.
#
#   AGENT=PATH    the agent binary (default: target/debug/crucible-agent,
#                 built with `cargo build` when missing)
#   OUT=PATH      where the SVG goes (default: assets/demo.svg)
#
# Needs tmux and python3. Takes a few seconds once the agent is built.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
AGENT=${AGENT:-target/debug/crucible-agent}
OUT=${OUT:-assets/demo.svg}

command -v tmux >/dev/null || { echo "demo-picture: tmux is not installed" >&2; exit 1; }
if [ ! -x "$AGENT" ]; then
  ${CARGO:-cargo} build --bin crucible-agent
fi
case "$AGENT" in /*) ;; *) AGENT="$ROOT/$AGENT" ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/crucible-picture.XXXXXX")
SESSION="crucible-picture-$$"
LLM_PID=""
cleanup() {
  tmux kill-session -t "$SESSION" 2>/dev/null || true
  if [ -n "$LLM_PID" ]; then kill "$LLM_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# A small project for the session to work in.
mkdir -p "$WORK/project"
printf 'Greetings from the project: crucible-agent reads files through its tools.\n' >"$WORK/project/notes.txt"

if [ -n "${LLM_URL:-}" ]; then
  ENDPOINT=$LLM_URL
  MODEL=${LLM_MODEL:-smollm2-135m}
  PROMPTS=(--prompt "Read notes.txt and tell me what it says." --prompt "Now say it in five words.")
else
  python3 e2e/fake_llm.py --port 0 >"$WORK/llm.out" 2>"$WORK/llm.err" &
  LLM_PID=$!
  for _ in $(seq 50); do grep -q '^PORT' "$WORK/llm.out" 2>/dev/null && break; sleep 0.1; done
  PORT=$(awk '/^PORT/ {print $2}' "$WORK/llm.out")
  [ -n "$PORT" ] || { echo "demo-picture: the scripted model server did not start" >&2; cat "$WORK/llm.err" >&2; exit 1; }
  ENDPOINT="http://127.0.0.1:$PORT/v1"
  MODEL=scripted-a
  PROMPTS=(--prompt 'Read notes.txt, please. [[tool:read_file {"path": "notes.txt"}]]' --prompt "Thanks. Now say it in five words.")
fi

cat >"$WORK/config.toml" <<EOF
[chat]
default_provider = "local"

[llm.providers.local]
type = "openai"
endpoint = "$ENDPOINT"
default_model = "$MODEL"
EOF

# The command the terminal runs: what `make demo`'s last step runs, with this
# config; the prompt line is shortened to the binary's name.
printf -v CLIENT '%q ' python3 "$ROOT/scripts/acp-demo.py" "${PROMPTS[@]}" "$AGENT" \
  --config "$WORK/config.toml" --data-dir "$WORK/data"
tmux new-session -d -s "$SESSION" -x 100 -y 24 -c "$WORK/project" \
  "env RUST_LOG=warn TERM=xterm-256color bash -c '$CLIENT; echo; touch $WORK/done; sleep 60'"
for _ in $(seq 300); do [ -e "$WORK/done" ] && break; sleep 0.1; done
[ -e "$WORK/done" ] || { echo "demo-picture: the demo did not finish within 30 s" >&2; exit 1; }
tmux capture-pane -t "$SESSION" -e -J -p >"$WORK/capture.txt"

# Paths of this machine's temp dirs say nothing to a reader.
sed -e "s#$WORK/project#~/project#g" -e "s#$WORK/#/tmp/#g" -e "s#$AGENT#crucible-agent#g" \
  -e "s#python3 [^ ]*acp-demo.py#acp-demo#" "$WORK/capture.txt" >"$WORK/clean.txt"
mkdir -p "$(dirname "$OUT")"
python3 scripts/terminal-svg.py --title "crucible-agent: make demo's client, a scripted model" <"$WORK/clean.txt" >"$OUT"
echo "wrote $OUT"
