#!/usr/bin/env bash
# End-to-end tier: the agent against a real llama-server (SmolLM2-135M) through
# its OpenAI-compatible and Anthropic-style APIs. Builds and caches the server
# on first use (~7 minutes on 2 cores), starts it on its own port, runs the
# tests marked as needing it, and stops it. Nothing is skipped: if the server
# cannot be built or started, this fails and says why.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${E2E_LLM_PORT:-8091}
CARGO=${CARGO:-cargo}

bash scripts/llm-server.sh build
bash scripts/llm-server.sh start "$PORT"
trap 'bash scripts/llm-server.sh stop "$PORT" >/dev/null 2>&1 || true' EXIT

CRUCIBLE_E2E_LLM_URL="http://127.0.0.1:$PORT" \
  "$CARGO" test --test real_llm -- --ignored --test-threads 1
