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

# The MCP client against real MCP servers from npm (pinned), installed once
# into a cache and reused while the pinned versions are there.
MCP_VERSION=2026.8.31
MCP_NPM="${XDG_CACHE_HOME:-$HOME/.cache}/crucible-e2e/npm"
MCP_MODULES="$MCP_NPM/node_modules/@modelcontextprotocol"
mcp_installed() {
  for server in server-everything server-filesystem; do
    grep -q "\"version\": \"$MCP_VERSION\"" "$MCP_MODULES/$server/package.json" 2>/dev/null || return 1
  done
}
if ! mcp_installed; then
  mkdir -p "$MCP_NPM"
  npm install --prefix "$MCP_NPM" --no-audit --no-fund \
    "@modelcontextprotocol/server-everything@$MCP_VERSION" \
    "@modelcontextprotocol/server-filesystem@$MCP_VERSION"
  mcp_installed || { echo "npm did not install the MCP servers $MCP_VERSION" >&2; exit 1; }
fi
export CRUCIBLE_E2E_MCP_EVERYTHING="$MCP_MODULES/server-everything/dist/index.js"
export CRUCIBLE_E2E_MCP_FILESYSTEM="$MCP_MODULES/server-filesystem/dist/index.js"
"$CARGO" test --test mcp -- --ignored
