// The npm launcher passes arguments, stdin/stdout, the exit code and signals
// through to the agent binary. Run: node --test scripts/dist/npm/
// (Unix: the stand-in agent is a Node script run through its #! line.)
"use strict";

const assert = require("node:assert");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const test = require("node:test");

const LAUNCHER = path.join(__dirname, "crucible-agent.js");

// A stand-in agent: prints its arguments and the stdin line as JSON, then
// does what its first argument says.
const STAND_IN = `#!${process.execPath}
const args = process.argv.slice(2);
process.on("SIGTERM", () => { process.stdout.write("got SIGTERM\\n"); process.exit(42); });
if (args[0] === "echo") {
  let input = "";
  process.stdin.on("data", (d) => (input += d));
  process.stdin.on("end", () => { process.stdout.write(JSON.stringify({ args, input }) + "\\n"); process.exit(Number(args[1])); });
} else if (args[0] === "wait") {
  process.stdout.write("ready\\n");
  setInterval(() => {}, 1 << 30);
} else if (args[0] === "die") {
  process.kill(process.pid, "SIGKILL");
}
`;

function standIn() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "launcher-test-"));
  const file = path.join(dir, "crucible-agent");
  fs.writeFileSync(file, STAND_IN, { mode: 0o755 });
  return file;
}

function launch(args) {
  const child = spawn(process.execPath, [LAUNCHER, ...args], {
    env: { ...process.env, CRUCIBLE_AGENT_BINARY: standIn() },
    stdio: ["pipe", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const exited = new Promise((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, out })),
  );
  return { child, exited, output: () => out };
}

test("arguments, stdin and stdout pass through, and the exit code comes back", async () => {
  const { child, exited } = launch(["echo", "3", "--config", "a b.toml", ""]);
  child.stdin.end('{"jsonrpc":"2.0"}\n');
  const { code, out } = await exited;
  assert.deepStrictEqual(JSON.parse(out), {
    args: ["echo", "3", "--config", "a b.toml", ""],
    input: '{"jsonrpc":"2.0"}\n',
  });
  assert.strictEqual(code, 3);
});

test("SIGTERM reaches the agent, and the launcher exits with the agent's code", async () => {
  const { child, exited, output } = launch(["wait"]);
  await new Promise((resolve) => child.stdout.on("data", () => output().includes("ready\n") && resolve()));
  child.kill("SIGTERM");
  const { code, signal, out } = await exited;
  assert.strictEqual(out, "ready\ngot SIGTERM\n");
  assert.deepStrictEqual({ code, signal }, { code: 42, signal: null });
});

test("an agent killed by a signal kills the launcher with the same signal", async () => {
  const { child, exited } = launch(["die"]);
  child.stdin.end();
  const { code, signal } = await exited;
  assert.deepStrictEqual({ code, signal }, { code: null, signal: "SIGKILL" });
});

test("a missing binary is an error naming it, exit 1", async () => {
  const child = spawn(process.execPath, [LAUNCHER], {
    env: { ...process.env, CRUCIBLE_AGENT_BINARY: path.join(os.tmpdir(), "no-such-crucible-agent") },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const code = await new Promise((resolve) => child.on("close", resolve));
  assert.strictEqual(code, 1);
  assert.match(err, /cannot run .*no-such-crucible-agent/);
});
