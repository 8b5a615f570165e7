// `make bench`'s remote section: `crucible-agent serve` beside stdio, in one
// run against the scripted model (e2e/fake_llm.py): a 200-chunk turn over
// stdio, WebSocket and Streamable HTTP; `initialize` over HTTP; 1,000 idle
// WebSocket connections each with a session (RSS); the same turn with 100
// clients at once. Replaces its section of bench/results.md.
//
// Usage: node bench/remote.mjs AGENT FAKE_URL WS_DIR [--quick] [--out bench/results.md]
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";

const args = process.argv.slice(2);
const [agentBin, fakeUrl, wsDir] = args;
const quick = args.includes("--quick");
const outAt = args.indexOf("--out");
const out = outAt >= 0 ? args[outAt + 1] : null;
const { WebSocket } = await import(pathToFileURL(join(wsDir, "index.js")).href).then((m) => m.default ?? m);

const TURNS = quick ? 10 : 30;
const WARMUP = 3;
const IDLE = quick ? 300 : 1000;
const CONCURRENT = 100;
const CHUNKS = "[[chunks:200]]";

const tmp = mkdtempSync(join(tmpdir(), "crucible-bench-remote-"));
const work = join(tmp, "work");
mkdirSync(work);
const config = join(tmp, "config.toml");
writeFileSync(config, `[chat]
default_provider = "scripted"
[llm.providers.scripted]
type = "openai"
endpoint = "${fakeUrl.replace(/\/$/, "")}/v1"
default_model = "scripted-a"
context_window = 400000
prewarm = false
[serve]
max_connections = ${IDLE + 200}
`);
const token = "bench-" + Math.random().toString(16).slice(2);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p95 = (xs) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];
const ms = (x) => `${x.toFixed(2)} ms`;
const rssKb = (pid) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]);
};

// A JSON-RPC peer over any carrier: `send` a message, answers by id,
// notifications counted; agent requests (none here) are ignored.
class Peer {
  constructor(send) {
    this.sendRaw = send;
    this.waiting = new Map();
    this.nextId = 1;
    this.updates = 0;
  }
  receive(message) {
    if (message.method === "session/update") {
      this.updates++;
      return;
    }
    if (message.id !== undefined && !message.method) {
      const done = this.waiting.get(message.id);
      if (done) {
        this.waiting.delete(message.id);
        done(message);
      }
    }
  }
  async request(method, params, headers) {
    const id = this.nextId++;
    const answer = new Promise((resolve) => this.waiting.set(id, resolve));
    await this.sendRaw({ jsonrpc: "2.0", id, method, params }, headers);
    const message = await answer;
    if (message.error) throw new Error(`${method}: ${JSON.stringify(message.error)}`);
    return message.result;
  }
}

const INIT = { protocolVersion: 1, clientCapabilities: {} };

async function turns(peer, session, headers) {
  const times = [];
  for (let i = 0; i < WARMUP + TURNS; i++) {
    const start = performance.now();
    const r = await peer.request("session/prompt", { sessionId: session, prompt: [{ type: "text", text: CHUNKS }] }, headers);
    if (r.stopReason !== "end_turn") throw new Error(`stop ${r.stopReason}`);
    if (i >= WARMUP) times.push(performance.now() - start);
  }
  return times;
}

async function stdioTurns() {
  const child = spawn(agentBin, ["--config", config, "--data-dir", join(tmp, "data-stdio")], {
    cwd: work,
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, RUST_LOG: "error" },
  });
  const peer = new Peer(async (m) => void child.stdin.write(JSON.stringify(m) + "\n"));
  createInterface({ input: child.stdout }).on("line", (line) => peer.receive(JSON.parse(line)));
  await peer.request("initialize", INIT);
  const { sessionId } = await peer.request("session/new", { cwd: work, mcpServers: [] });
  const times = await turns(peer, sessionId);
  child.stdin.end();
  await new Promise((r) => child.once("exit", r));
  return times;
}

async function startServer() {
  const child = spawn(agentBin, ["--config", config, "--data-dir", join(tmp, "data-serve"), "serve", "--listen", "127.0.0.1:0"], {
    cwd: work,
    stdio: ["ignore", "inherit", "pipe"],
    env: { ...process.env, CRUCIBLE_AGENT_TOKEN: token, RUST_LOG: "error" },
  });
  const url = await new Promise((resolve, reject) => {
    let seen = "";
    child.stderr.on("data", (chunk) => {
      seen += chunk.toString();
      const found = seen.match(/listening on (http:\/\/\S+)/);
      if (found) resolve(found[1]);
    });
    child.once("exit", (code) => reject(new Error(`serve exited ${code}`)));
  });
  return { child, url, ws: url.replace("http://", "ws://") };
}

async function wsPeer(server) {
  const socket = new WebSocket(server.ws, { headers: { Authorization: `Bearer ${token}` } });
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("unexpected-response", (_, response) => {
      let body = "";
      response.on("data", (d) => (body += d));
      response.on("end", () => reject(new Error(`WebSocket upgrade: ${response.statusCode} ${body}`)));
    });
    socket.once("error", reject);
  });
  const peer = new Peer(async (m) => socket.send(JSON.stringify(m)));
  socket.on("message", (data) => peer.receive(JSON.parse(data.toString())));
  peer.socket = socket;
  await peer.request("initialize", INIT);
  return peer;
}

// Streamable HTTP: POSTs, answers and updates from the SSE streams.
async function httpPeer(server) {
  const auth = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
  const init = await fetch(server.url, { method: "POST", headers: auth, body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: INIT }) });
  const connection = init.headers.get("acp-connection-id");
  await init.json();
  const peer = new Peer(async (m, extra = {}) => {
    const r = await fetch(server.url, { method: "POST", headers: { ...auth, "Acp-Connection-Id": connection, ...extra }, body: JSON.stringify(m) });
    if (r.status !== 202) throw new Error(`POST ${r.status}`);
    await r.arrayBuffer();
  });
  peer.listen = async (session) => {
    const headers = { Authorization: `Bearer ${token}`, Accept: "text/event-stream", "Acp-Connection-Id": connection };
    if (session) headers["Acp-Session-Id"] = session;
    const r = await fetch(server.url, { headers });
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    (async () => {
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (data) peer.receive(JSON.parse(data));
        }
      }
    })();
  };
  await peer.listen(null);
  return peer;
}

const results = [];
const row = (metric, value, target = "") => {
  results.push([metric, value, target]);
  console.error(`bench remote: ${metric}: ${value}`);
};

const stdio = await stdioTurns();
row(`1. 200-chunk turn over stdio (${TURNS} turns)`, `${ms(median(stdio))} / ${ms(p95(stdio))}`, "(baseline)");

const server = await startServer();
const rssStart = rssKb(server.child.pid);
{
  const peer = await wsPeer(server);
  const { sessionId } = await peer.request("session/new", { cwd: work, mcpServers: [] });
  const times = await turns(peer, sessionId);
  row("2. … over WebSocket", `${ms(median(times))} / ${ms(p95(times))}`, `within 1 ms of stdio: ${(median(times) - median(stdio)).toFixed(2)} ms`);
  peer.socket.close();
}
{
  const peer = await httpPeer(server);
  const { sessionId } = await peer.request("session/new", { cwd: work, mcpServers: [] });
  await peer.listen(sessionId);
  const headers = { "Acp-Session-Id": sessionId };
  const times = await turns(peer, sessionId, headers);
  row("3. … over Streamable HTTP (SSE)", `${ms(median(times))} / ${ms(p95(times))}`, `within 1 ms of stdio: ${(median(times) - median(stdio)).toFixed(2)} ms`);
}
{
  const times = [];
  for (let i = 0; i < (quick ? 20 : 50); i++) {
    const start = performance.now();
    const r = await fetch(server.url, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: INIT }),
    });
    await r.json();
    times.push(performance.now() - start);
    await fetch(server.url, { method: "DELETE", headers: { Authorization: `Bearer ${token}`, "Acp-Connection-Id": r.headers.get("acp-connection-id") } });
  }
  row("4. initialize over HTTP: POST → 200 with the answer", `${ms(median(times))} / ${ms(p95(times))}`);
}
{
  const before = rssKb(server.child.pid);
  const peers = [];
  for (let i = 0; i < IDLE; i++) {
    const peer = await wsPeer(server);
    await peer.request("session/new", { cwd: work, mcpServers: [] });
    peers.push(peer);
  }
  // Let the sessions' background start-up settle.
  await new Promise((r) => setTimeout(r, 2000));
  const after = rssKb(server.child.pid);
  const each = (after - before) / IDLE;
  row(`5a. ${IDLE} idle WebSocket connections, a session each: RSS`, `${(after / 1024).toFixed(1)} MB`, "under 100 MB");
  row("5b. … per connection and session", `${each.toFixed(0)} KB`, "under 60 KB");
  for (const peer of peers) peer.socket.close();
}
{
  const peers = [];
  for (let i = 0; i < CONCURRENT; i++) {
    const peer = await wsPeer(server);
    const { sessionId } = await peer.request("session/new", { cwd: work, mcpServers: [] });
    peers.push([peer, sessionId]);
  }
  const start = performance.now();
  const times = await Promise.all(
    peers.map(async ([peer, sessionId]) => {
      const t = performance.now();
      await peer.request("session/prompt", { sessionId, prompt: [{ type: "text", text: CHUNKS }] });
      return performance.now() - t;
    }),
  );
  const total = performance.now() - start;
  row(`6. ${CONCURRENT} clients at once, a 200-chunk turn each (WebSocket): all done`, ms(total));
  row("6'. … one turn, median / p95", `${ms(median(times))} / ${ms(p95(times))}`);
  for (const [peer] of peers) peer.socket.close();
}
row("7. serve's RSS when it started listening", `${(rssStart / 1024).toFixed(1)} MB`);

server.child.kill("SIGTERM");
await new Promise((r) => server.child.once("exit", r));
rmSync(tmp, { recursive: true, force: true });

const when = new Date().toISOString().slice(0, 16).replace("T", " ");
const load = loadavg().map((x) => x.toFixed(2)).join(" ");
let section = `## Remote: serve over WebSocket and Streamable HTTP, beside stdio\n\n`;
section += `Run ${when} UTC, ${cpus().length} cores, load average ${load} at the end; ${agentBin}; the scripted model (e2e/fake_llm.py); ${TURNS} turns after ${WARMUP} warm-up${quick ? "; QUICK run" : ""}.\n\n`;
section += "| metric | crucible-agent (median / p95) | target |\n|---|---|---|\n";
for (const [metric, value, target] of results) section += `| ${metric} | ${value} | ${target} |\n`;
console.log(section);
if (out) {
  const text = existsSync(out) ? readFileSync(out, "utf8") : "";
  const start = text.indexOf("## Remote: serve");
  let rest = "";
  if (start >= 0) {
    const next = text.indexOf("\n## ", start + 5);
    rest = next >= 0 ? text.slice(next + 1) : "";
  }
  const before = start >= 0 ? text.slice(0, start) : text.endsWith("\n") ? text + "\n" : text + "\n\n";
  writeFileSync(out, before + section + (rest ? "\n" + rest : ""));
}
