// End-to-end: crucible-agent driven by the TypeScript ACP SDK
// (npm @agentclientprotocol/sdk, pinned in scripts/e2e.sh), the SDK Zed-side
// tooling uses. Every line the agent writes is validated against the SDK's own
// zod schema (by method for requests/notifications, by the method of our
// request for answers); the SDK itself parses the notifications it routes.
//
// Usage: node ts_sdk_client.mjs SDK_DIR AGENT_BINARY FAKE_LLM_BASE_URL
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkDir, agentBin, llmArg] = process.argv.slice(2);
const llm = llmArg.replace(/\/$/, "");
const acp = await import(pathToFileURL(join(sdkDir, "dist/v1/stable/acp.js")).href);
const z = await import(pathToFileURL(join(sdkDir, "dist/v1/schema/zod.gen.js")).href);

const agentSends = {
  "session/update": z.zSessionNotification,
  "session/request_permission": z.zRequestPermissionRequest,
  "fs/read_text_file": z.zReadTextFileRequest,
  "fs/write_text_file": z.zWriteTextFileRequest,
};
const answers = {
  initialize: z.zInitializeResponse,
  authenticate: z.zAuthenticateResponse,
  "session/new": z.zNewSessionResponse,
  "session/prompt": z.zPromptResponse,
};

const tmp = mkdtempSync(join(tmpdir(), "crucible-e2e-ts-"));
const config = join(tmp, "config.toml");
writeFileSync(config, `[chat]
default_provider = "scripted"

[llm.providers.scripted]
type = "openai"
endpoint = "${llm}/v1"
default_model = "scripted-a"
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

// Tap both directions: record the methods we send, validate everything the agent sends.
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
  let schema;
  let what;
  if (msg.method) {
    schema = agentSends[msg.method];
    what = msg.method;
    if (!schema) return schemaErrors.push(`agent sent a method this client does not serve: ${msg.method}`);
    const r = schema.safeParse(msg.params);
    if (!r.success) schemaErrors.push(`${what}: rejected by the SDK schema: ${r.error.message}\n  ${line.slice(0, 500)}`);
    return;
  }
  const method = sentMethods.get(msg.id);
  if (msg.error) return; // error answers are checked by the step that expects them
  schema = answers[method];
  if (schema) {
    const r = schema.safeParse(msg.result);
    if (!r.success) schemaErrors.push(`answer to ${method}: rejected by the SDK schema: ${r.error.message}\n  ${line.slice(0, 500)}`);
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

const updates = [];
const permissions = [];
const written = {};
const app = acp
  .client({ name: "e2e-typescript-sdk" })
  .onNotification(acp.methods.client.session.update, async (ctx) => {
    updates.push(ctx.params);
  })
  .onRequest(acp.methods.client.session.requestPermission, async (ctx) => {
    permissions.push(ctx.params);
    const allow = ctx.params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async (ctx) => {
    written[ctx.params.path] = ctx.params.content;
    return {};
  })
  .onRequest(acp.methods.client.fs.readTextFile, async (ctx) => {
    return { content: `ts buffer of ${ctx.params.path}\n` };
  });

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
const textOf = (sid, from = 0) =>
  updates
    .slice(from)
    .filter((u) => u.sessionId === sid && u.update.sessionUpdate === "agent_message_chunk")
    .map((u) => u.update.content.text ?? "");

const timer = setTimeout(() => {
  console.error("ts-sdk: timed out after 120 s");
  child.kill();
  process.exit(1);
}, 120_000);

await app.connectWith(stream, async (agent) => {
  let sid;
  await step("initialize", async () => {
    const r = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      // `auth.terminal`: this client could run a terminal sign-in; no `plan`,
      // so the todo list comes as the old `plan` update.
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false, auth: { terminal: true } },
      clientInfo: { name: "e2e-typescript-sdk", version: "2.4.0" },
    });
    check(r.protocolVersion === 1, `protocol version ${r.protocolVersion}`);
    check(r.agentInfo?.name === "crucible-agent", `agentInfo ${JSON.stringify(r.agentInfo)}`);
    const terminal = (r.authMethods ?? []).find((m) => m.type === "terminal");
    check(terminal?.id === "setup" && terminal.args?.[0] === "setup", `a terminal sign-in: ${JSON.stringify(r.authMethods)}`);
  });
  await step("authenticate with the terminal method (a local model needs no key)", async () => {
    const r = await agent.request(acp.methods.agent.authenticate, { methodId: "setup" });
    check(r && typeof r === "object", `answer ${JSON.stringify(r)}`);
  });
  await step("session/new", async () => {
    const r = await agent.request(acp.methods.agent.session.new, { cwd: tmp, mcpServers: [] });
    check(typeof r.sessionId === "string" && r.sessionId, "a session id");
    check(r.configOptions?.some((o) => o.id === "model"), "a model config option");
    sid = r.sessionId;
  });
  await step("session/prompt streams chunks and ends with end_turn", async () => {
    const r = await agent.request(acp.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "hello from typescript" }],
    });
    check(r.stopReason === "end_turn", `stop reason ${r.stopReason}`);
    const chunks = textOf(sid);
    check(chunks.length >= 3, `streamed in several chunks: ${JSON.stringify(chunks)}`);
    check(chunks.join("") === "Scripted reply to: hello from typescript. User messages so far: 1.", chunks.join(""));
  });
  await step("session/prompt with a permitted write through fs/write_text_file", async () => {
    const from = updates.length;
    const r = await agent.request(acp.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: '[[tool:write_file {"path":"ts.txt","content":"from ts"}]]' }],
    });
    check(r.stopReason === "end_turn", `stop reason ${r.stopReason}`);
    check(permissions.length === 1, "one permission request");
    check(written[join(tmp, "ts.txt")] === "from ts", `written: ${JSON.stringify(written)}`);
    check(textOf(sid, from).join("").includes("Tool write_file returned:"), "the tool result reached the model");
  });
  await step("the todo list is the old plan update for a client without `plan`", async () => {
    const from = updates.length;
    const r = await agent.request(acp.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: '[[tool:todo {"todos":[{"content":"Fix the bug","status":"pending"}]}]]' }],
    });
    check(r.stopReason === "end_turn", `stop reason ${r.stopReason}`);
    const kinds = updates.slice(from).map((u) => u.update.sessionUpdate);
    check(kinds.includes("plan") && !kinds.includes("plan_update"), `updates: ${kinds.join(", ")}`);
  });
});
clearTimeout(timer);
child.stdin.end();
await new Promise((res) => child.once("exit", res));
rmSync(tmp, { recursive: true, force: true });

if (validated === 0) failures.push("no message from the agent reached the schema check");
for (const e of schemaErrors) failures.push(`schema: ${e}`);
console.log(`ts-sdk: ${passed.length} passed, ${failures.length} failed; ${validated} agent messages validated by the SDK's zod schema`);
for (const f of failures) console.error(`  FAILED ${f}`);
process.exit(failures.length ? 1 : 0);
