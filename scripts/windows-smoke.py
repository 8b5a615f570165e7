#!/usr/bin/env python3
"""The Windows smoke: the Windows .exe under Wine, driven as an ACP client
drives it, against the scripted model (e2e/fake_llm.py). Standard library only.

Usage: windows-smoke.py RUN_WINDOWS EXE LLM_BASE_URL
  RUN_WINDOWS  the command that runs a Windows .exe under Wine
               (e.g. "bash /work/shared/tools/cross-check.sh run-windows")
  EXE          the crucible-agent .exe
  LLM_BASE_URL where fake_llm.py listens (Wine's programs reach 127.0.0.1)

Steps (each must pass):
  1. initialize, session/new with a Windows cwd (Z:\\...; Wine maps Z: to /);
  2. a prompt whose model calls write_file: the file appears on disk;
  3. a prompt whose model calls shell: the command's output reaches the model;
  4. a long command, cancelled: the turn ends (cancelled) within 2 s of the
     cancel and the command's process is gone;
  5. the agent exits when stdin closes; a new one loads the session again.
Prints "windows smoke: N passed, M failed" last; exits 1 on any failure.
"""
import json
import os
import queue
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

RUN_WINDOWS, EXE, LLM = shlex.split(sys.argv[1]), sys.argv[2], sys.argv[3].rstrip("/")
# A command that runs for a long time and shows up in `ps` by its arguments.
LONG_COUNT = 97
LONG_COMMAND = f"ping -n {LONG_COUNT} 127.0.0.1"
PASSED, FAILED = [], []


def win(path):
    """A Linux path as Wine's programs see it (drive Z: is /)."""
    return "Z:" + str(path).replace("/", "\\")


class Agent:
    """One agent process under Wine and the JSON-RPC spoken with it."""

    def __init__(self, args, log):
        self.proc = subprocess.Popen(RUN_WINDOWS + [EXE] + args, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log)
        self.next_id = 0
        self.messages = queue.Queue()
        self.updates = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                self.messages.put(json.loads(line))
            except ValueError:
                self.messages.put({"unparsable": line.decode(errors="replace")})
        self.messages.put(None)

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params, timeout=120.0, on_update=None):
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.wait_for(rid, timeout, on_update)

    def wait_for(self, rid, timeout, on_update=None):
        """The answer to request `rid`; answers the agent's own requests on the way."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no answer to request {rid} within {timeout} s")
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise AssertionError(f"the agent closed stdout before answering request {rid}")
            if "unparsable" in message:
                raise AssertionError(f"not JSON on stdout: {message['unparsable'][:200]}")
            if message.get("id") == rid and "method" not in message:
                if "error" in message:
                    raise AssertionError(f"request {rid} failed: {message['error']}")
                return message["result"]
            if message.get("method") == "session/update":
                self.updates.append(message["params"]["update"])
                if on_update:
                    on_update(message["params"]["update"])
            elif message.get("method") == "session/request_permission":
                options = message["params"]["options"]
                allow = next((o for o in options if o["kind"] == "allow_once"), options[0])
                self.send({"jsonrpc": "2.0", "id": message["id"],
                           "result": {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}})
            elif "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"],
                           "error": {"code": -32601, "message": "not offered by this client"}})

    def close(self, timeout=30):
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the agent did not exit within {timeout} s of stdin closing")


def step(name, run):
    try:
        run()
        PASSED.append(name)
        print(f"ok    {name}", flush=True)
    except Exception as err:  # noqa: BLE001 (every failure is reported, the run goes on)
        FAILED.append(name)
        print(f"FAIL  {name}: {err}", flush=True)


def check(ok, what):
    if not ok:
        raise AssertionError(what)


def agent_text(updates):
    return "".join(u.get("content", {}).get("text", "") for u in updates
                   if u.get("sessionUpdate") == "agent_message_chunk")


def long_command_running():
    """Whether the long command's process exists (Wine's processes are Linux
    processes; this one is known by its arguments)."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return any("ping" in line and f"-n {LONG_COUNT}" in line for line in out.splitlines())


def main():
    tmp = Path(tempfile.mkdtemp(prefix="crucible-windows-smoke-"))
    project, data, config = tmp / "project", tmp / "data", tmp / "config.toml"
    project.mkdir()
    config.write_text(f"""[chat]
default_provider = "scripted"

[llm.providers.scripted]
type = "openai"
endpoint = "{LLM}/v1"
default_model = "scripted-a"
""")
    args = ["--config", win(config), "--data-dir", win(data)]
    log = open(tmp / "agent-stderr.log", "wb")
    state = {}
    agent = Agent(args, log)

    def new_session():
        init = agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}}, timeout=180)
        check(init.get("protocolVersion") == 1, f"initialize: {init}")
        new = agent.request("session/new", {"cwd": win(project), "mcpServers": []})
        state["session"] = new["sessionId"]
    step("initialize and session/new with a Windows cwd", new_session)
    if "session" not in state:
        return finish(agent, tmp)
    sid = state["session"]

    def prompt(text, **kw):
        return agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, **kw)

    def write_file():
        args = json.dumps({"path": "hello.txt", "content": "written under Wine\n"})
        result = prompt(f"[[tool:write_file {args}]]")
        check(result["stopReason"] == "end_turn", f"stop reason: {result}")
        written = project / "hello.txt"
        check(written.exists(), f"{written} was not written")
        check(written.read_text() == "written under Wine\n", f"content: {written.read_text()!r}")
    step("write_file writes the file", write_file)

    def shell():
        start = len(agent.updates)
        result = prompt('[[tool:shell {"command": "echo smoke-shell-ok"}]]')
        check(result["stopReason"] == "end_turn", f"stop reason: {result}")
        said = agent_text(agent.updates[start:])
        check("Tool shell returned:" in said and "smoke-shell-ok" in said, f"the model got: {said!r}")
        with urllib.request.urlopen(f"{LLM}/_requests") as answer:
            seen = json.load(answer)  # [{"path": ..., "body": the request}, ...]
        results = [m for r in seen for m in r["body"].get("messages", []) if m.get("role") == "tool"]
        check(any("smoke-shell-ok" in json.dumps(m) for m in results), "no tool result with the output reached the model")
    step("shell output reaches the model", shell)

    def cancel():
        args = json.dumps({"command": LONG_COMMAND, "timeout_secs": 600})
        agent.next_id += 1
        rid = agent.next_id
        agent.send({"jsonrpc": "2.0", "id": rid, "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": f"[[tool:shell {args}]]"}]}})
        deadline = time.monotonic() + 60
        while not long_command_running():
            check(time.monotonic() < deadline, "the long command never started")
            try:  # answers permission requests meanwhile
                agent.wait_for(rid, 0.2)
                raise AssertionError("the turn ended before the cancel")
            except AssertionError as err:
                if "within" not in str(err):
                    raise
        agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        cancelled_at = time.monotonic()
        result = agent.wait_for(rid, 30)
        took = time.monotonic() - cancelled_at
        check(result["stopReason"] == "cancelled", f"stop reason: {result}")
        check(took < 2.0, f"the turn ended {took:.1f} s after the cancel")
        gone_by = time.monotonic() + 5
        while long_command_running():
            check(time.monotonic() < gone_by, "the cancelled command's process is still running")
            time.sleep(0.1)
        state["cancel_took"] = took
    step("a cancelled long command ends the turn within 2 s and its process", cancel)

    def restart_and_load():
        code = agent.close()
        check(code == 0, f"the agent exited with {code}")
        again = Agent(args, log)
        state["agent"] = again
        again.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, timeout=180)
        again.request("session/load", {"sessionId": sid, "cwd": win(project), "mcpServers": []})
        replayed = agent_text(again.updates)
        check("smoke-shell-ok" in replayed, f"the replay lacks the earlier turns: {replayed[:300]!r}")
    step("the session loads again after the agent exits", restart_and_load)
    return finish(state.get("agent", agent), tmp)


def finish(agent, tmp):
    try:
        agent.close()
    except Exception:  # noqa: BLE001 (already reported, or the step that exits failed)
        pass
    print(f"windows smoke: {len(PASSED)} passed, {len(FAILED)} failed")
    if FAILED:
        print(f"agent stderr: {tmp / 'agent-stderr.log'}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
