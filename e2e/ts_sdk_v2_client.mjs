// End-to-end, ACP v2: crucible-agent driven by the TypeScript ACP SDK's v2
// client (npm @agentclientprotocol/sdk, `experimental/v2`, pinned in
// scripts/e2e.sh), against the real model make e2e serves (llama-server).
// The SDK's v2 connection checks the initialize exchange itself (it refuses
// an answer that is not version 2) and routes the session's updates; every
// line the agent writes is also validated against the SDK's v2 zod schema.
//
// Usage: node ts_sdk_v2_client.mjs SDK_DIR AGENT_BINARY LLM_BASE_URL MODEL
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkDir, agentBin, llmArg, model] = process.argv.slice(2);
const llm = llmArg.replace(/\/$/, "");
const acp = await import(pathToFileURL(join(sdkDir, "dist/v2/stable/acp.js")).href);
const z = await import(pathToFileURL(join(sdkDir, "dist/v2/schema/zod.gen.js")).href);

const agentSends = {
  "session/update": z.zUpdateSessionNotification,
  "session/request_permission": z.zRequestPermissionRequest,
};
const answers = {
  initialize: z.zInitializeResponse,
  "session/new": z.zNewSessionResponse,
  "session/resume": z.zResumeSessionResponse,
  "session/prompt": z.zPromptResponse,
};

const tmp = mkdtempSync(join(tmpdir(), "crucible-e2e-ts-v2-"));
const config = join(tmp, "config.toml");
// Plan mode: a tiny model that reaches for a write cannot leave the turn
// waiting on a permission question.
writeFileSync(config, `[chat]
default_provider = "real"

[llm.providers.real]
type = "openai"
endpoint = "${llm}/v1"
default_model = "${model}"
max_output_tokens = 48

[agent]
default_mode = "plan"
`);

const failures = [];
const passed = [];
const schemaErrors = [];
let validated = 0;
const sentMethods = new Map(); // our request id -> method

const child = spawn(agentBin, ["--config", config, "--data-dir", join(tmp, "data")], {
  stdio: ["pipe", "pipe", "inherit"],
  env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn" },
});

function tapLines(onLine) {
  let buf = "";
  const dec = new TextDecoder();
  return new TransformStream({
    transform(chunk, ctl) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) onLine(line);
      }
      ctl.enqueue(chunk);
    },
  });
}
function checkIncoming(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (e) {
    schemaErrors.push(`agent wrote a line that is not JSON: ${line.slice(0, 200)}`);
    return;
  }
  validated++;
  if (msg.method) {
    const schema = agentSends[msg.method];
    if (!schema) return schemaErrors.push(`agent sent a method a v2 client does not serve: ${msg.method}`);
    const r = schema.safeParse(msg.params);
    if (!r.success) schemaErrors.push(`${msg.method}: rejected by the SDK's v2 schema: ${r.error.message}\n  ${line.slice(0, 500)}`);
    return;
  }
  if (msg.error) return;
  const method = sentMethods.get(msg.id);
  const schema = answers[method];
  if (schema) {
    const r = schema.safeParse(msg.result);
    if (!r.success) schemaErrors.push(`answer to ${method}: rejected by the SDK's v2 schema: ${r.error.message}\n  ${line.slice(0, 500)}`);
  }
}
function recordOutgoing(line) {
  const msg = JSON.parse(line);
  if (msg.method && msg.id !== undefined) sentMethods.set(msg.id, msg.method);
}

const toAgent = tapLines(recordOutgoing);
void toAgent.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
const fromAgent = Readable.toWeb(child.stdout).pipeThrough(tapLines(checkIncoming));
const stream = acp.ndJsonStream(toAgent.writable, fromAgent);

const app = acp.client({ name: "e2e-typescript-sdk-v2" }).onRequest(
  acp.methods.client.session.requestPermission,
  async () => ({ outcome: { outcome: "cancelled" } }),
);

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

// A 135M model on 2 cores reads the agent's prompt in several seconds.
const timer = setTimeout(() => {
  console.error("ts-sdk-v2: timed out after 300 s");
  child.kill();
  process.exit(1);
}, 300_000);

// The SDK's v2 connection fails as a whole on an answer it refuses (say, a
// v1 initialize answer): that is one failure, not a crash before the summary.
try {
await app.connectWith(stream, async (agent) => {
  let session;
  await step("initialize with protocolVersion 2", async () => {
    const r = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: 2,
      info: { name: "e2e-typescript-sdk-v2", version: "2.4.0" },
      capabilities: {},
    });
    check(r.protocolVersion === 2, `protocol version ${r.protocolVersion}`);
    check(r.info?.name === "crucible-agent", `info ${JSON.stringify(r.info)}`);
    check(r.capabilities?.session != null, `capabilities ${JSON.stringify(r.capabilities)}`);
  });
  if (failures.length) return;
  await step("session/new", async () => {
    session = await agent.buildSession(tmp).start();
    check(typeof session.sessionId === "string" && session.sessionId, "a session id");
  });
  await step("a prompt is acknowledged with its messageId, then runs to idle with the model's stop reason", async () => {
    const ack = await session.prompt("Say hello in one short sentence.");
    check(typeof ack.messageId === "string" && ack.messageId, `answer ${JSON.stringify(ack)}`);
    const seen = [];
    let stop;
    for (;;) {
      const message = await session.nextUpdate();
      if (message.kind === "stop") {
        // An idle snapshot without a stop reason is not the turn's end.
        if (message.stopReason === undefined || message.stopReason === null) continue;
        stop = message;
        break;
      }
      seen.push(message.update);
    }
    // The real model sometimes talks past max_output_tokens: `max_tokens` is
    // then the right ending, and the lifecycle under test is the same.
    check(["end_turn", "max_tokens"].includes(stop.stopReason), `stop reason ${JSON.stringify(stop.stopReason)}`);
    const kinds = seen.map((u) => u.sessionUpdate);
    check(kinds.includes("state_update"), `a running state: ${kinds.join(", ")}`);
    const user = seen.find((u) => u.sessionUpdate.startsWith("user_message") && u.messageId === ack.messageId);
    check(user, `the user's message with the acknowledged id: ${kinds.join(", ")}`);
    const agentText = seen.filter((u) => u.sessionUpdate === "agent_message_chunk" || u.sessionUpdate === "agent_message");
    check(agentText.length > 0, `the model's answer: ${kinds.join(", ")}`);
    check(agentText.every((u) => typeof u.messageId === "string" && u.messageId), "every message update has a messageId");
  });
});
} catch (e) {
  failures.push(`the SDK's v2 connection failed: ${e.message.split("\n")[0]}`);
}
clearTimeout(timer);
child.stdin.end();
await new Promise((res) => child.once("exit", res));
rmSync(tmp, { recursive: true, force: true });

if (validated === 0) failures.push("no message from the agent reached the schema check");
for (const e of schemaErrors) failures.push(`schema: ${e}`);
console.log(`ts-sdk-v2: ${passed.length} passed, ${failures.length} failed; ${validated} agent messages validated by the SDK's v2 zod schema`);
for (const f of failures) console.error(`  FAILED ${f}`);
process.exit(failures.length ? 1 : 0);
