// End-to-end: `crucible-agent serve` driven by the TypeScript ACP SDK's own
// remote clients (npm @agentclientprotocol/sdk, pinned in scripts/e2e.sh):
// `experimental/http-client` (Streamable HTTP) and `experimental/ws-client`
// (WebSocket, with the `ws` package on Node 20). Over each: a whole session
// with a tool call that asks permission, then a new connection that loads
// the session and finds the turn.
//
// Usage: node ts_sdk_remote_client.mjs SDK_DIR WS_DIR AGENT_BINARY FAKE_LLM_BASE_URL
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, wsDir, agentBin, llmArg] = process.argv.slice(2);
const llm = llmArg.replace(/\/$/, "");
const load = (relative) => import(pathToFileURL(join(sdkDir, relative)).href);
const acp = await load("dist/v1/stable/acp.js");
const { createHttpStream } = await load("dist/transports/http-stream.js");
const { createWebSocketStream } = await load("dist/transports/ws-stream.js");
const { WebSocket } = await import(pathToFileURL(join(wsDir, "index.js")).href).then((m) => m.default ?? m);

const tmp = mkdtempSync(join(tmpdir(), "crucible-e2e-remote-"));
const work = join(tmp, "work");
mkdirSync(work);
const config = join(tmp, "config.toml");
writeFileSync(config, `[chat]
default_provider = "scripted"

[llm.providers.scripted]
type = "openai"
endpoint = "${llm}/v1"
default_model = "scripted-a"
`);
const token = "e2e-remote-token-" + Math.random().toString(16).slice(2);
const headers = { Authorization: `Bearer ${token}` };

const failures = [];
const passed = [];
function check(cond, what) {
  if (!cond) throw new Error(what);
}
async function step(name, fn) {
  try {
    await fn();
    passed.push(name);
    console.log(`ok: ${name}`);
  } catch (e) {
    failures.push(`${name}: ${e.message}`);
    console.log(`FAIL: ${name}: ${e.message}`);
  }
}

const timer = setTimeout(() => {
  console.error("ts-sdk-remote: timed out after 120 s");
  server.kill();
  process.exit(1);
}, 120_000);

// The server, on a free port it prints on stderr.
const server = spawn(agentBin, ["--config", config, "--data-dir", join(tmp, "data"), "serve", "--listen", "127.0.0.1:0"], {
  cwd: work,
  stdio: ["ignore", "inherit", "pipe"],
  env: { ...process.env, CRUCIBLE_AGENT_TOKEN: token, RUST_LOG: process.env.RUST_LOG ?? "warn" },
});
const httpUrl = await new Promise((resolve, reject) => {
  let seen = "";
  server.stderr.on("data", (chunk) => {
    process.stderr.write(chunk);
    seen += chunk.toString();
    const found = seen.match(/listening on (http:\/\/\S+)/);
    if (found) resolve(found[1]);
  });
  server.once("exit", (code) => reject(new Error(`serve exited (${code}) before listening`)));
});
const wsUrl = httpUrl.replace("http://", "ws://");

function client(updates, permissions) {
  return acp
    .client({ name: "e2e-typescript-sdk-remote" })
    .onNotification(acp.methods.client.session.update, async (ctx) => {
      updates.push(ctx.params);
    })
    .onRequest(acp.methods.client.session.requestPermission, async (ctx) => {
      permissions.push(ctx.params);
      const allow = ctx.params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    });
}

const streams = {
  "Streamable HTTP": () => createHttpStream(httpUrl, { headers }),
  WebSocket: () => createWebSocketStream(wsUrl, { headers, WebSocket }),
};

async function initialize(agent) {
  const r = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: "e2e-typescript-sdk-remote", version: "2.4.0" },
  });
  check(r.protocolVersion === 1, `protocol version ${r.protocolVersion}`);
  check(r.agentCapabilities?.loadSession === true, "loadSession");
}

for (const [carrier, open] of Object.entries(streams)) {
  const file = `remote-${carrier === "WebSocket" ? "ws" : "http"}.txt`;
  let sid;
  const updates = [];
  const permissions = [];
  await client(updates, permissions).connectWith(open(), async (agent) => {
    await step(`${carrier}: initialize and session/new`, async () => {
      await initialize(agent);
      const r = await agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
      check(typeof r.sessionId === "string" && r.sessionId, "a session id");
      sid = r.sessionId;
    });
    await step(`${carrier}: a prompt with a write that asks permission`, async () => {
      const r = await agent.request(acp.methods.agent.session.prompt, {
        sessionId: sid,
        prompt: [{ type: "text", text: `[[tool:write_file {"path":"${file}","content":"over ${carrier}"}]]` }],
      });
      check(r.stopReason === "end_turn", `stop reason ${r.stopReason}`);
      check(permissions.length === 1, `permission requests: ${permissions.length}`);
      check(existsSync(join(work, file)) && readFileSync(join(work, file), "utf8") === `over ${carrier}`, "the file is written");
      const kinds = updates.filter((u) => u.sessionId === sid).map((u) => u.update.sessionUpdate);
      check(kinds.includes("tool_call") && kinds.includes("agent_message_chunk"), `updates: ${kinds.join(", ")}`);
    });
  });
  // A new connection (as after a dropped one) loads the session and finds the turn.
  const replayed = [];
  await client(replayed, []).connectWith(open(), async (agent) => {
    await step(`${carrier}: a new connection loads the session and finds the turn`, async () => {
      await initialize(agent);
      await agent.request(acp.methods.agent.session.load, { sessionId: sid, cwd: work, mcpServers: [] });
      const mine = replayed.filter((u) => u.sessionId === sid);
      const user = mine.filter((u) => u.update.sessionUpdate === "user_message_chunk").map((u) => u.update.content.text).join("");
      check(user.includes(file), `the user's message again: ${user}`);
      check(mine.some((u) => u.update.sessionUpdate === "tool_call"), "the tool call again");
      const text = mine.filter((u) => u.update.sessionUpdate === "agent_message_chunk").map((u) => u.update.content.text).join("");
      check(text.includes("Tool write_file returned:"), `the answer again: ${text.slice(0, 200)}`);
    });
  });
}

clearTimeout(timer);
server.kill("SIGTERM");
await new Promise((res) => server.once("exit", res));
rmSync(tmp, { recursive: true, force: true });
console.log(`ts-sdk-remote: ${passed.length} passed, ${failures.length} failed`);
for (const f of failures) console.error(`  FAILED ${f}`);
process.exit(failures.length ? 1 : 0);
