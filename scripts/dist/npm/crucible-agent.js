#!/usr/bin/env node
// The `crucible-agent` npm package's command: runs the agent binary from the
// package for this platform (an optional dependency, crucible-agent-OS-CPU),
// with this process's stdin, stdout and stderr, its arguments, and the
// signals it receives; exits as the agent does. CRUCIBLE_AGENT_BINARY names
// another binary to run instead.
"use strict";

const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");

const PLATFORMS = {
  "darwin-arm64": "crucible-agent-darwin-arm64",
  "darwin-x64": "crucible-agent-darwin-x64",
  "linux-arm64": "crucible-agent-linux-arm64",
  "linux-x64": "crucible-agent-linux-x64",
  "win32-arm64": "crucible-agent-win32-arm64",
  "win32-x64": "crucible-agent-win32-x64",
};

function binaryPath() {
  if (process.env.CRUCIBLE_AGENT_BINARY) return process.env.CRUCIBLE_AGENT_BINARY;
  const platform = `${process.platform}-${process.arch}`;
  const pkg = PLATFORMS[platform];
  if (!pkg) {
    fail(`crucible-agent has no build for ${platform}; see https://github.com/Mootikins/crucible-agent#install`);
  }
  const exe = process.platform === "win32" ? "crucible-agent.exe" : "crucible-agent";
  let path;
  try {
    path = require.resolve(`${pkg}/bin/${exe}`);
  } catch {
    fail(
      `crucible-agent: the package ${pkg} is not installed (npm leaves optional dependencies out with ` +
        `--omit=optional or --no-optional); install it: npm install ${pkg}`,
    );
  }
  // Some package managers drop the executable bit when they unpack.
  if (process.platform !== "win32") {
    try {
      fs.accessSync(path, fs.constants.X_OK);
    } catch {
      try {
        fs.chmodSync(path, 0o755);
      } catch {
        // Then spawn says why it cannot run it.
      }
    }
  }
  return path;
}

function fail(message) {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

const child = spawn(binaryPath(), process.argv.slice(2), { stdio: "inherit", windowsHide: true });

// What would end this process goes to the agent, which ends itself (and its
// commands) its own way; this process then exits as it did.
const FORWARDED = ["SIGTERM", "SIGINT", "SIGHUP"];
for (const signal of FORWARDED) {
  process.on(signal, () => {
    try {
      child.kill(signal);
    } catch {
      // The agent is gone already; its exit ends this process.
    }
  });
}

child.on("error", (err) => fail(`crucible-agent: cannot run ${child.spawnfile}: ${err.message}`));

child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so the parent sees what the agent saw.
    for (const forwarded of FORWARDED) process.removeAllListeners(forwarded);
    process.kill(process.pid, signal);
    // A signal whose default is not to end a process: exit as a shell reports it.
    setImmediate(() => process.exit(128 + (os.constants.signals[signal] || 0)));
    return;
  }
  process.exit(code === null ? 1 : code);
});
