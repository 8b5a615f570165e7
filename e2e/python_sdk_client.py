#!/usr/bin/env python3
"""End-to-end: crucible-agent driven by the Python ACP SDK (PyPI
agent-client-protocol, pinned in scripts/e2e.sh) as its client.

Every message the agent sends is checked twice by the SDK's own pydantic
schema: the SDK parses it as it routes it (its errors are logged, and any
logged error fails this run), and an observer validates each one again against
the schema type of its method. Answers to our requests are parsed by the SDK's
request helpers, which raise on anything the schema rejects.

Usage: python_sdk_client.py AGENT_BINARY FAKE_LLM_BASE_URL

The model is e2e/fake_llm.py (scripted: see its docstring).

Steps for agent features still being built elsewhere are gated by
e2e/pending.py (PENDING_FEATURES): listed -> "PENDING: <step>", not listed ->
the step must pass.
"""
import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import acp
from pydantic import TypeAdapter
from acp import schema as S
from acp import spawn_agent_process, text_block
from acp.connection import StreamDirection

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pending import PENDING_FEATURES, pending  # noqa: E402  (the one list of pending features)

AGENT, LLM = sys.argv[1], sys.argv[2].rstrip("/")

# Method -> the SDK's schema type for what the agent sends under it.
AGENT_SENDS = {
    "session/update": S.SessionNotification,
    "session/request_permission": S.RequestPermissionRequest,
    "fs/read_text_file": S.ReadTextFileRequest,
    "fs/write_text_file": S.WriteTextFileRequest,
    "terminal/create": S.CreateTerminalRequest,
    "terminal/output": S.TerminalOutputRequest,
    "terminal/wait_for_exit": S.WaitForTerminalExitRequest,
    "terminal/kill": S.KillTerminalRequest,
    "terminal/release": S.ReleaseTerminalRequest,
    "elicitation/create": TypeAdapter(S.CreateElicitationRequest),
}

FAILURES = []
PASSED = []
PENDING = []
SCHEMA_ERRORS = []
SEEN_MESSAGES = [0]


class FailOnSdkErrors(logging.Handler):
    """The SDK logs (rather than raises) when it cannot parse a notification."""

    def emit(self, record):
        if record.levelno >= logging.ERROR:
            SCHEMA_ERRORS.append(f"SDK logged: {record.getMessage()} {record.exc_text or ''}".strip())


logging.basicConfig(level=logging.WARNING)
logging.getLogger().addHandler(FailOnSdkErrors())


def observer(event):
    if event.direction != StreamDirection.INCOMING:
        return
    msg = event.message
    SEEN_MESSAGES[0] += 1
    method = msg.get("method")
    if method is None:
        return  # an answer to our request: the SDK call that sent it parses it
    model = AGENT_SENDS.get(method)
    if model is None:
        SCHEMA_ERRORS.append(f"agent sent a method the SDK client does not know: {method}")
        return
    try:
        validate = getattr(model, "model_validate", None) or model.validate_python
        validate(msg.get("params"))
    except Exception as exc:  # pydantic.ValidationError
        SCHEMA_ERRORS.append(f"{method}: rejected by the SDK schema: {exc}\n    message: {json.dumps(msg)[:600]}")


class Client:
    """An editor: serves fs/* from an in-memory buffer map, terminal/* by running
    the command itself, and answers permission requests as the test tells it."""

    def __init__(self, workspace: Path):
        self.workspace = workspace
        self.updates = []  # (session_id, update)
        self.buffers = {}  # path -> text the "editor" holds (unsaved buffers)
        self.written = {}
        self.calls = []  # method names the agent called on us
        self.permission_answer = "allow_once"
        self.permission_requests = []
        self.terminals = {}
        self.elicitations = []  # (message, mode)
        self.elicitation_answer = "blue"

    def on_connect(self, conn):
        pass

    async def session_update(self, session_id, update, **kw):
        self.updates.append((session_id, update))

    async def request_permission(self, session_id, tool_call, options, **kw):
        self.calls.append("session/request_permission")
        self.permission_requests.append((tool_call, options))
        for o in options:
            if self.permission_answer in (o.kind, o.option_id):
                return S.RequestPermissionResponse(outcome=S.AllowedOutcome(outcome="selected", option_id=o.option_id))
        raise AssertionError(f"no {self.permission_answer} option among {[o.kind for o in options]}")

    async def read_text_file(self, session_id, path, line=None, limit=None, **kw):
        self.calls.append("fs/read_text_file")
        if path in self.buffers:
            return S.ReadTextFileResponse(content=self.buffers[path])
        if not Path(path).exists():  # what an editor answers for a file that does not exist
            raise acp.RequestError.resource_not_found(path)
        return S.ReadTextFileResponse(content=Path(path).read_text())

    async def create_elicitation(self, message, mode, **kw):
        self.elicitations.append((message, mode))
        return S.AcceptElicitationResponse(action="accept", content={"answer": self.elicitation_answer})

    async def write_text_file(self, session_id, path, content, **kw):
        self.calls.append("fs/write_text_file")
        self.written[path] = content
        return S.WriteTextFileResponse()

    async def create_terminal(self, session_id, command, args=None, env=None, cwd=None, output_byte_limit=None, **kw):
        self.calls.append("terminal/create")
        argv = [command, *(args or [])]
        shell = not args  # a bare command line runs through the shell
        proc = await asyncio.create_subprocess_exec(
            *(["/bin/sh", "-c", command] if shell else argv), cwd=cwd or str(self.workspace),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        tid = f"term-{len(self.terminals) + 1}"
        self.terminals[tid] = {"proc": proc, "out": b"", "reader": asyncio.create_task(proc.stdout.read())}
        return S.CreateTerminalResponse(terminal_id=tid)

    async def _finish(self, tid):
        t = self.terminals[tid]
        if t["reader"] is not None:
            t["out"] = await t["reader"]
            t["reader"] = None
        return await t["proc"].wait()

    async def terminal_output(self, session_id, terminal_id, **kw):
        self.calls.append("terminal/output")
        t = self.terminals[terminal_id]
        code = t["proc"].returncode
        if code is not None:
            await self._finish(terminal_id)
        status = S.TerminalExitStatus(exit_code=code) if code is not None else None
        return S.TerminalOutputResponse(output=t["out"].decode(errors="replace"), truncated=False, exit_status=status)

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kw):
        self.calls.append("terminal/wait_for_exit")
        code = await self._finish(terminal_id)
        return S.WaitForTerminalExitResponse(exit_code=code)

    async def kill_terminal(self, session_id, terminal_id, **kw):
        self.calls.append("terminal/kill")
        p = self.terminals[terminal_id]["proc"]
        if p.returncode is None:
            p.kill()
        return S.KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **kw):
        self.calls.append("terminal/release")
        p = self.terminals[terminal_id]["proc"]
        if p.returncode is None:
            p.kill()
        return S.ReleaseTerminalResponse()

    # helpers for the test
    def texts(self, session_id, kind=S.AgentMessageChunk):
        return [u.content.text for s, u in self.updates if s == session_id and isinstance(u, kind)
                and isinstance(u.content, S.TextContentBlock)]

    def of(self, session_id, kind):
        return [u for s, u in self.updates if s == session_id and isinstance(u, kind)]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def step(name, fn, feature=None):
    if feature is not None and pending(feature, name):
        PENDING.append(name)
        return
    try:
        await asyncio.wait_for(fn(), timeout=60)
    except Exception as exc:
        FAILURES.append(f"{name}: {type(exc).__name__}: {exc}")
        print(f"FAIL: {name}: {type(exc).__name__}: {exc}", flush=True)
        return
    PASSED.append(name)
    print(f"ok: {name}", flush=True)


def fake_requests():
    with urllib.request.urlopen(f"{LLM}/_requests", timeout=5) as r:
        return json.load(r)


async def main():
    tmp = Path(tempfile.mkdtemp(prefix="crucible-e2e-py-"))
    workspace = tmp / "project"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("on disk: stale\n")
    data = tmp / "data"
    config = tmp / "config.toml"
    config.write_text(f"""[chat]
default_provider = "scripted"

[llm.providers.scripted]
type = "openai"
endpoint = "{LLM}/v1"
default_model = "scripted-a"

[prices."scripted-a"]
input = 3.0
output = 15.0

[acp]
unstable = ["providers"]
""")
    args = ["--config", str(config), "--data-dir", str(data)]
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    client = Client(workspace)
    state = {}

    async with spawn_agent_process(client, AGENT, *args, env=env, observers=[observer],
                                   use_unstable_protocol=True) as (conn, proc):
        # `plan` and `auth.terminal` (ACP 1.20, known to this SDK's schema 1.19):
        # the todo list comes as plan_update, the terminal sign-in is offered.
        caps = S.ClientCapabilities(fs=S.FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True,
                                    elicitation=S.ElicitationCapabilities(form=S.ElicitationFormCapabilities()),
                                    plan=S.PlanCapabilities(), auth=S.AuthCapabilities(terminal=True))

        async def initialize():
            r = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=caps,
                                      client_info=S.Implementation(name="e2e-python-sdk", version="0.12.1"))
            check(r.protocol_version == 1, f"protocol version {r.protocol_version}")
            check(r.agent_info is not None and r.agent_info.name, "agentInfo with a name")
            state["init"] = r
        await step("initialize", initialize)

        async def terminal_sign_in():
            methods = [m.root if hasattr(m, "root") else m for m in (state["init"].auth_methods or [])]
            terminal = [m for m in methods if getattr(m, "type", None) == "terminal"]
            check(terminal and terminal[0].id == "setup" and terminal[0].args == ["setup"],
                  f"a terminal method running `setup`: {methods}")
            await conn.authenticate(method_id="setup")
        await step("authMethods: the terminal sign-in, and authenticate with it (a local model needs no key)",
                   terminal_sign_in)

        async def new_session():
            r = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            check(r.session_id, "a session id")
            modes = [m.id for m in r.modes.available_modes] if r.modes else []
            check({"plan", "act", "auto"} <= set(modes), f"modes plan/act/auto offered, got {modes}")
            opts = {o.root.id if hasattr(o, "root") else o.id: (o.root if hasattr(o, "root") else o) for o in (r.config_options or [])}
            check("model" in opts, f"a model config option, got {list(opts)}")
            state["sid"] = r.session_id
        await step("session/new", new_session)
        sid = state.get("sid")
        if sid is None:
            return report()

        async def streamed_prompt():
            r = await conn.prompt(session_id=sid, prompt=[text_block("hello there")])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            chunks = client.texts(sid)
            check(len(chunks) >= 3, f"the answer streamed in several chunks, got {chunks}")
            check("".join(chunks).startswith("Scripted reply to: hello there."), f"answer: {''.join(chunks)!r}")
        await step("prompt streams agent_message_chunks and ends with end_turn", streamed_prompt)

        async def read_through_client():
            path = str(workspace / "notes.txt")
            client.buffers[path] = "unsaved buffer: fresh\n"
            before = len(client.updates)
            r = await conn.prompt(session_id=sid, prompt=[text_block('[[tool:read_file {"path":"notes.txt"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            check("fs/read_text_file" in client.calls, "the agent read the file through fs/read_text_file")
            new = [u for _, u in client.updates[before:]]
            starts = [u for u in new if isinstance(u, S.ToolCallStart)]
            check(starts and starts[0].kind == "read", f"a read tool_call was announced: {starts}")
            done = [u for u in new if isinstance(u, S.ToolCallProgress) and u.status == "completed"]
            check(done, "the read tool call completed")
            text = "".join(u.content.text for u in new if isinstance(u, S.AgentMessageChunk))
            check("unsaved buffer: fresh" in text, f"the model saw the editor's buffer, not the disk: {text!r}")
        await step("tool call: read_file served by the client's fs/read_text_file", read_through_client)

        async def write_with_permission():
            client.permission_answer = "allow_once"
            n = len(client.permission_requests)
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:write_file {"path":"out.txt","content":"written through ACP\\n"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            check(len(client.permission_requests) == n + 1, "the agent asked permission before writing")
            tc, _ = client.permission_requests[-1]
            check(tc.tool_call_id, "the permission request names the tool call")
            check(client.written.get(str(workspace / "out.txt")) == "written through ACP\n",
                  f"the write went through fs/write_text_file: {client.written}")
            check(not (workspace / "out.txt").exists(), "the agent did not write the disk behind the editor's back")
        await step("tool call: write_file asks permission (allowed) and writes through fs/write_text_file", write_with_permission)

        async def write_rejected():
            client.permission_answer = "reject_once"
            client.written.clear()
            before = len(client.updates)
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:write_file {"path":"no.txt","content":"must not be written"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            check(not client.written, f"nothing was written after a rejection: {client.written}")
            failed = [u for _, u in client.updates[before:] if isinstance(u, S.ToolCallProgress) and u.status == "failed"]
            check(failed, "the rejected tool call is reported failed")
            client.permission_answer = "allow_once"
        await step("tool call: a rejected permission writes nothing and the call shows failed", write_rejected)

        async def shell_via_terminal():
            client.permission_answer = "allow_once"
            # The editor's terminal cannot be confined: the agent uses it only
            # with its command sandbox off (the session's `sandbox` option).
            r = await conn.set_config_option(config_id="sandbox", session_id=sid, value="off")
            opts = {(o.root if hasattr(o, "root") else o).id: (o.root if hasattr(o, "root") else o) for o in r.config_options}
            check(opts["sandbox"].current_value == "off", f"the sandbox option reads off: {opts.get('sandbox')}")
            before = len(client.updates)
            calls_before = len(client.calls)
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:shell {"command":"echo shell-says-$((6*7))"}]]')])
            await conn.set_config_option(config_id="sandbox", session_id=sid, value="workspace-write")
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            calls = client.calls[calls_before:]
            check("terminal/create" in calls, f"the shell ran in the client's terminal (terminal/create), calls: {calls}")
            check("terminal/release" in calls, f"the terminal was released, calls: {calls}")
            new = [u for _, u in client.updates[before:]]
            embedded = [c for u in new if isinstance(u, (S.ToolCallStart, S.ToolCallProgress)) for c in (u.content or [])
                        if isinstance(c, S.Terminal)]
            check(embedded, "the tool call embeds the terminal so the editor shows it live")
            text = "".join(u.content.text for u in new if isinstance(u, S.AgentMessageChunk))
            check("shell-says-42" in text, f"the command's output reached the model: {text!r}")
        await step("tool call: shell runs through terminal/* served by the client", shell_via_terminal, feature="terminal")

        async def shell_local():
            # Whatever runs the command, the user sees its output come back.
            r = await conn.prompt(session_id=sid, prompt=[text_block('[[tool:shell {"command":"echo local-$((5*5))"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            text = "".join(client.texts(sid)[-40:])
            check("local-25" in text, f"the command's output reached the model: {text[-300:]!r}")
        await step("tool call: shell (after permission) returns the command's output", shell_local)

        async def delegate():
            before = len(client.updates)
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:delegate {"agent":"explorer","task":"find the notes"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            new = [u for s_, u in client.updates[before:] if s_ == sid]
            starts = [u for u in new if isinstance(u, S.ToolCallStart)]
            check(starts, "the delegate call was announced")
            summaries = ["".join(getattr(getattr(c, "content", None), "text", "") for c in (u.content or []))
                         for u in new if isinstance(u, S.ToolCallProgress)]
            check(any("explorer" in t for t in summaries), f"the child's running summary names its card: {summaries}")
            done = [u for u in new if isinstance(u, S.ToolCallProgress) and u.status == "completed"]
            check(done, "the delegate call completed")
            text = "".join(u.content.text for u in new if isinstance(u, S.AgentMessageChunk))
            check("Scripted reply to: find the notes" in text, f"the parent's model read the child's answer: {text!r}")
            listed = await conn.list_sessions()
            children = [x for x in listed.sessions if (x.field_meta or {}).get("parentSessionId") == sid]
            check(children, f"session/list shows the child under its parent: {[x.field_meta for x in listed.sessions]}")
        await step("delegate: a child session runs, its summary streams to the client, the parent reads its answer", delegate)

        async def cancel():
            task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("[[slow]]")]))
            for _ in range(200):
                if any("slow-start" in t for t in client.texts(sid)):
                    break
                await asyncio.sleep(0.05)
            check(any("slow-start" in t for t in client.texts(sid)), "the slow answer began streaming")
            await conn.cancel(session_id=sid)
            r = await asyncio.wait_for(task, 10)
            check(r.stop_reason == "cancelled", f"stop reason after cancel: {r.stop_reason}")
            # The session still works after a cancel.
            r = await conn.prompt(session_id=sid, prompt=[text_block("after cancel")])
            check(r.stop_reason == "end_turn", "a prompt after the cancel ends normally")
        await step("session/cancel mid-stream answers the prompt 'cancelled'", cancel)

        async def set_mode():
            before = len(client.updates)
            await conn.set_session_mode(session_id=sid, mode_id="plan")
            await asyncio.sleep(0.2)
            modes = [u for _, u in client.updates[before:] if isinstance(u, S.CurrentModeUpdate)]
            check(modes and modes[-1].current_mode_id == "plan", f"current_mode_update to plan: {modes}")
            # In plan mode (read-only) a write is refused without asking.
            n = len(client.permission_requests)
            client.written.clear()
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:write_file {"path":"plan.txt","content":"no"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            check(not client.written and len(client.permission_requests) == n, "plan mode neither wrote nor asked")
            await conn.set_session_mode(session_id=sid, mode_id="act")
        await step("session/set_mode plan: mode update sent, writes refused", set_mode)

        async def markdown_plan():
            await conn.set_session_mode(session_id=sid, mode_id="plan")
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:write_plan {"markdown":"# Plan: fix the bug in parse()"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            plans = [u.plan for u in client.of(sid, S.AgentPlanContentUpdate)
                     if isinstance(u.plan, S.PlanUpdateMarkdown)]
            check(plans and plans[-1].plan_id == "plan", f"a markdown plan_update for the plan `plan`: {plans}")
            check(plans[-1].content == "# Plan: fix the bug in parse()", f"its markdown: {plans[-1]}")
            await conn.set_session_mode(session_id=sid, mode_id="act")
        await step("write_plan in plan mode: a markdown plan_update `plan` (ACP 1.20 plans)", markdown_plan)

        async def set_model():
            r = await conn.set_config_option(config_id="model", session_id=sid, value="scripted-b")
            opts = [o.root if hasattr(o, "root") else o for o in r.config_options]
            model = [o for o in opts if o.id == "model"]
            check(model and model[0].current_value == "scripted-b", f"model option now scripted-b: {model}")
            await conn.prompt(session_id=sid, prompt=[text_block("which model?")])
            last = [q for q in fake_requests() if q["path"].endswith("/chat/completions")][-1]
            check(last["body"].get("model") == "scripted-b", f"the next request used scripted-b: {last['body'].get('model')}")
        await step("session/set_config_option model: the next turn uses the new model", set_model)

        async def ask_user():
            before = len(client.updates)
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:ask_user {"question":"Which colour?","choices":["red","blue"]}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            check(client.elicitations, "the agent asked through elicitation/create")
            message, mode = client.elicitations[-1]
            check(message == "Which colour?", f"the question: {message!r}")
            schema = mode.requested_schema.model_dump(by_alias=True, exclude_none=True)
            check("answer" in json.dumps(schema), f"a form with an answer field: {schema}")
            text = "".join(u.content.text for s, u in client.updates[before:]
                           if s == sid and isinstance(u, S.AgentMessageChunk))
            check("The user answered: blue" in text, f"the model got the answer: {text!r}")
        await step("ask_user: a form question through elicitation/create, the answer reaches the model", ask_user)

        async def todo_plan():
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:todo {"todos":[{"content":"Fix the bug","status":"pending"}]}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            plans = client.of(sid, S.AgentPlanContentUpdate)
            check(plans and plans[-1].plan.plan_id == "todos", f"a plan_update for the plan `todos`: {plans}")
            check(plans[-1].plan.entries[0].content == "Fix the bug", f"its entries: {plans[-1].plan}")
            check(not client.of(sid, S.AgentPlanUpdate), "no old `plan` update for a client declaring `plan`")
        await step("todo: the todo list is plan_update `todos` for a client declaring `plan`", todo_plan)

        state["turns"] = len([1 for _, u in client.updates if isinstance(u, S.AgentMessageChunk)])

    # ---- restart: a new agent process over the same data directory ----
    async with spawn_agent_process(client, AGENT, *args, env=env, observers=[observer],
                                   use_unstable_protocol=True) as (conn, proc):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=caps)
        ac = init.agent_capabilities
        sc = ac.session_capabilities if ac else None
        advertised = {"load": bool(ac and ac.load_session), "list": bool(sc and sc.list is not None),
                      "resume": bool(sc and sc.resume is not None)}
        for feature, on in advertised.items():
            if on and feature in PENDING_FEATURES:
                print(f"NOTE: the agent now advertises '{feature}': take it out of PENDING_FEATURES", flush=True)

        async def load_after_restart():
            check(advertised["load"], "initialize advertises loadSession")
            before = len(client.updates)
            await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
            replay = [u for s, u in client.updates[before:] if s == sid]
            users = [u.content.text for u in replay if isinstance(u, S.UserMessageChunk) and isinstance(u.content, S.TextContentBlock)]
            agents = "".join(u.content.text for u in replay if isinstance(u, S.AgentMessageChunk) and isinstance(u.content, S.TextContentBlock))
            check(any("hello there" in t for t in users), f"the replay holds the first prompt: {users[:3]}")
            check("Scripted reply to: hello there." in agents, "the replay holds the first answer")
            check(any(isinstance(u, S.ToolCallStart) for u in replay), "the replay holds the tool calls")
            r = await conn.prompt(session_id=sid, prompt=[text_block("after restart")])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            text = "".join(client.texts(sid)[-30:])
            # The scripted model counts the user messages it was sent.
            seen = re.search(r"Scripted reply to: after restart\. User messages so far: (\d+)\.", text)
            check(seen is not None and int(seen.group(1)) > 1,
                  f"the model got the earlier conversation: {text[-200:]!r}")
        await step("session/load after restart replays the conversation, then continues it", load_after_restart, feature="load")

        async def list_sessions():
            check(advertised["list"], "initialize advertises sessionCapabilities.list")
            r = await conn.list_sessions(cwd=str(workspace))
            ids = [s.session_id for s in r.sessions]
            check(sid in ids, f"the session is listed: {ids}")
            mine = [s for s in r.sessions if s.session_id == sid][0]
            check(mine.cwd == str(workspace), f"with its cwd: {mine.cwd}")
        await step("session/list after restart lists the stored session", list_sessions, feature="list")

        async def resume():
            check(advertised["resume"], "initialize advertises sessionCapabilities.resume")
            before = len(client.updates)
            await conn.resume_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
            check(not [u for s, u in client.updates[before:] if isinstance(u, S.UserMessageChunk)], "resume does not replay")
            r = await conn.prompt(session_id=sid, prompt=[text_block("after resume")])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
        await step("session/resume after restart continues without replay", resume, feature="resume")

        async def extra_roots():
            extra = tmp / "extra-root"
            extra.mkdir(exist_ok=True)
            shared = extra / "shared.txt"
            shared.write_text("from the extra root\n")
            r = await conn.new_session(cwd=str(workspace), additional_directories=[str(extra)], mcp_servers=[])
            p = await conn.prompt(session_id=r.session_id,
                                  prompt=[text_block('[[tool:read_file {"path":"%s"}]]' % shared)])
            check(p.stop_reason == "end_turn", f"stop reason {p.stop_reason}")
            done = [u for u in client.of(r.session_id, S.ToolCallProgress) if u.status == "completed"]
            check(done, "the read in the extra root completed")
            text = "".join(client.texts(r.session_id))
            check("from the extra root" in text, f"the model read the extra root's file: {text!r}")
        await step("session/new with additionalDirectories: a file in an extra root is read", extra_roots)

        async def priced_usage():
            priced = [u for u in client.of(sid, S.UsageUpdate) if u.cost is not None]
            check(priced, "usage_update carries a cost")
            check(priced[-1].cost.currency == "USD" and priced[-1].cost.amount > 0, f"cost: {priced[-1].cost}")
        await step("usage_update carries the session's cost where the config prices the model", priced_usage)

        async def providers_list():
            raw = await conn._conn.send_request("providers/list", {})
            r = S.ListProvidersResponse.model_validate(raw)
            check([p.provider_id for p in r.providers] == ["scripted"], f"providers: {r.providers}")
            current = r.providers[0].current
            check(current is not None and current.base_url == f"{LLM}/v1", f"current: {current}")
            check(r.providers[0].required, "the default provider is required")
        await step("providers/list (unstable, turned on in the config): validated by the SDK schema", providers_list)

        async def project_rule():
            # "Always allow in this project": a rule in the project's file,
            # obeyed by a new session without asking.
            client.permission_answer = "allow_project"
            asked = len(client.permission_requests)
            r = await conn.prompt(session_id=sid, prompt=[text_block(
                '[[tool:write_file {"path":"ruled.txt","content":"one\\n"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            check(len(client.permission_requests) == asked + 1, "the first write asked")
            rules = workspace / ".crucible" / "permissions.toml"
            text = rules.read_text() if rules.exists() else ""
            check("[[permissions.rules]]" in text and "write_file" in text, f"the project rule was written: {text!r}")
            client.permission_answer = "reject_once"
            other = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            r = await conn.prompt(session_id=other.session_id, prompt=[text_block(
                '[[tool:write_file {"path":"ruled.txt","content":"two\\n"}]]')])
            check(r.stop_reason == "end_turn", f"stop reason {r.stop_reason}")
            check(len(client.permission_requests) == asked + 1, "the new session wrote without asking")
            check(client.written.get(str(workspace / "ruled.txt")) == "two\n", f"written: {client.written}")
            client.permission_answer = "allow_once"
        await step("permissions: 'always allow in this project' writes a project rule a new session obeys", project_rule)

    shutil.rmtree(tmp, ignore_errors=True)
    return report()


def report():
    if SEEN_MESSAGES[0] == 0:
        FAILURES.append("no message from the agent reached the schema check")
    for e in SCHEMA_ERRORS:
        FAILURES.append(f"schema: {e}")
    print(f"python-sdk: {len(PASSED)} passed, {len(FAILURES)} failed, {len(PENDING)} pending;"
          f" {SEEN_MESSAGES[0]} agent messages validated by the SDK schema", flush=True)
    for f in FAILURES:
        print(f"  FAILED {f}", file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
