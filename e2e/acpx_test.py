#!/usr/bin/env python3
"""End-to-end: crucible-agent driven by acpx (npm, pinned in scripts/e2e.sh),
a headless ACP client we did not write. Asserts on its `--format json` output
(the JSON-RPC transcript, one message per line) and on what a user sees
(files written, answers that remember the conversation).

Usage: acpx_test.py ACPX_BIN AGENT_BINARY FAKE_LLM_BASE_URL

acpx keeps its session records under $HOME/.acpx: this test gives it a
throw-away HOME. Steps for features still being built are gated by
e2e/pending.py.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pending import pending  # noqa: E402

ACPX, AGENT, LLM = sys.argv[1], sys.argv[2], sys.argv[3].rstrip("/")
TMP = Path(tempfile.mkdtemp(prefix="crucible-e2e-acpx-"))
PROJECT = TMP / "project"
PROJECT.mkdir()
HOME = TMP / "home"
HOME.mkdir()
CONFIG = TMP / "config.toml"
CONFIG.write_text(f"""[chat]
default_provider = "scripted"

[llm.providers.scripted]
type = "openai"
endpoint = "{LLM}/v1"
default_model = "scripted-a"
""")
AGENT_CMD = f"{AGENT} --config {CONFIG} --data-dir {TMP / 'data'}"
PASSED, FAILED, PENDING = [], [], []


def acpx(*args, home=HOME, ttl=None, check_exit=True, agent=AGENT_CMD):
    cmd = [ACPX, "--agent", agent, "--format", "json"]
    if ttl is not None:
        cmd += ["--ttl", str(ttl)]
    cmd += list(args)
    env = dict(os.environ, HOME=str(home), RUST_LOG="warn")
    p = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=120)
    if check_exit and p.returncode != 0:
        raise AssertionError(f"acpx {' '.join(args)} exited {p.returncode}\nstdout: {p.stdout[-1500:]}\nstderr: {p.stderr[-1500:]}")
    return p


def transcript(out):
    """Every stdout line of `--format json` must be JSON."""
    msgs = []
    for line in out.splitlines():
        if not line.strip():
            continue
        try:
            msgs.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise AssertionError(f"a line of acpx's JSON output is not JSON ({exc}): {line[:300]}")
    return msgs


def answer_text(msgs):
    return "".join(m["params"]["update"]["content"].get("text", "") for m in msgs
                   if m.get("method") == "session/update"
                   and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk")


def result_of(msgs, method):
    ids = [m["id"] for m in msgs if m.get("method") == method and "id" in m]
    res = [m for m in msgs if "id" in m and "method" not in m and m["id"] in ids]
    if not res:
        raise AssertionError(f"no answer to {method} in the transcript")
    if "error" in res[-1]:
        raise AssertionError(f"{method} answered an error: {res[-1]['error']}")
    return res[-1]["result"]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def step(name, fn, feature=None):
    if feature and pending(feature, name):
        PENDING.append(name)
        return
    try:
        fn()
    except Exception as exc:
        FAILED.append(f"{name}: {exc}")
        print(f"FAIL: {name}: {exc}", flush=True)
        return
    PASSED.append(name)
    print(f"ok: {name}", flush=True)


def exec_plain():
    msgs = transcript(acpx("--approve-all", "exec", "say hi").stdout)
    init = result_of(msgs, "initialize")
    check(init["agentInfo"]["name"] == "crucible-agent", f"agentInfo: {init.get('agentInfo')}")
    check(init["protocolVersion"] == 1, "protocol version 1")
    check(result_of(msgs, "session/prompt")["stopReason"] == "end_turn", "the turn ends with end_turn")
    chunks = [m for m in msgs if m.get("method") == "session/update"
              and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    check(len(chunks) >= 3, "the answer streamed in several chunks")
    check(answer_text(msgs) == "Scripted reply to: say hi. User messages so far: 1.", f"answer: {answer_text(msgs)!r}")


def exec_write_allowed():
    msgs = transcript(acpx("--approve-all", "exec",
                           '[[tool:write_file {"path":"from-acpx.txt","content":"written by acpx fs\\n"}]]').stdout)
    check(any(m.get("method") == "session/request_permission" for m in msgs), "the agent asked permission")
    check(any(m.get("method") == "fs/write_text_file" for m in msgs), "the write went through acpx's fs/write_text_file")
    check((PROJECT / "from-acpx.txt").read_text() == "written by acpx fs\n", "the file holds what the model wrote")
    check(result_of(msgs, "session/prompt")["stopReason"] == "end_turn", "the turn ends with end_turn")
    check("Tool write_file returned:" in answer_text(msgs), f"the tool result reached the model: {answer_text(msgs)!r}")


def exec_write_denied():
    msgs = transcript(acpx("--deny-all", "exec",
                           '[[tool:write_file {"path":"denied.txt","content":"no"}]]', check_exit=False).stdout)
    check(any(m.get("method") == "session/request_permission" for m in msgs), "the agent asked permission")
    check(not (PROJECT / "denied.txt").exists(), "a denied write writes nothing")
    updates = [m["params"]["update"] for m in msgs if m.get("method") == "session/update"]
    check(any(u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "failed" for u in updates),
          "the denied tool call is shown failed")


def exec_read():
    (PROJECT / "readme.txt").write_text("acpx read me\n")
    msgs = transcript(acpx("--approve-reads", "exec", '[[tool:read_file {"path":"readme.txt"}]]').stdout)
    check("acpx read me" in answer_text(msgs), f"the file's text reached the model: {answer_text(msgs)!r}")


STATE = {}


def restored_ids(msgs):
    """Sessions a new agent process was asked to bring back (acpx resumes
    when the agent offers session/resume, else loads)."""
    return [m["params"]["sessionId"] for m in msgs
            if m.get("method") in ("session/load", "session/resume")]


def multi_turn():
    created = [m for m in transcript(acpx("sessions", "new", ttl=60).stdout) if "acpxSessionId" in m]
    check(created, "acpx sessions new reports the session it created")
    STATE["sid"] = created[0]["acpxSessionId"]
    first = transcript(acpx("--approve-all", "prompt", "first message", ttl=60).stdout)
    prompted = [m["params"]["sessionId"] for m in first if m.get("method") == "session/prompt"]
    check(prompted == [STATE["sid"]], f"the prompt went to the session acpx created: {prompted}")
    check("User messages so far: 1." in answer_text(first), answer_text(first))
    second = transcript(acpx("--approve-all", "prompt", "second message", ttl=60).stdout)
    check("Scripted reply to: second message. User messages so far: 2." in answer_text(second),
          f"the second turn continues the first: {answer_text(second)!r}")
    listed = json.loads(acpx("sessions", "list", "--local").stdout)
    check(any(r.get("acpSessionId") == STATE["sid"] for r in listed), "acpx lists the session")
    rec = [r for r in listed if r.get("acpSessionId") == STATE["sid"]][0]
    texts = json.dumps(rec.get("messages"))
    check("first message" in texts and "second message" in texts, "acpx's record holds both turns")


def stop_owners():
    """acpx keeps the agent alive in a queue-owner process (pid in its session
    record); those are ours (this HOME is throw-away): stop them by pid."""
    d = HOME / ".acpx" / "sessions"
    for rec in d.glob("*.json") if d.exists() else []:
        try:
            pid = json.loads(rec.read_text()).get("pid")
            if pid:
                os.kill(int(pid), signal.SIGTERM)
        except (ValueError, OSError, json.JSONDecodeError):
            pass
    time.sleep(1)


def load_after_idle():
    # With the agent process gone, the next prompt starts a new one that must
    # load the stored session and continue it.
    stop_owners()
    third = transcript(acpx("--approve-all", "prompt", "third message", ttl=60).stdout)
    restored = restored_ids(third)
    check(restored == [STATE["sid"]], f"the new agent process restored the stored session: {restored}")
    check("User messages so far: 3." in answer_text(third), f"the loaded session remembers: {answer_text(third)!r}")


def list_from_agent():
    fresh = TMP / "fresh-home"
    fresh.mkdir(exist_ok=True)
    out = acpx("sessions", "list", home=fresh).stdout
    check(STATE["sid"] in out, f"the agent's session/list shows the stored session: {out[-500:]}")


def rewind_with_files():
    # acpx writes on disk what the agent asks it to; a rewind puts it back.
    path = PROJECT / "rewound.txt"
    transcript(acpx("--approve-all", "prompt",
                    '[[tool:write_file {"path":"rewound.txt","content":"kept by rewind\\n"}]]', ttl=60).stdout)
    check(path.exists() and path.read_text() == "kept by rewind\n", "the agent wrote rewound.txt")
    dry = answer_text(transcript(acpx("--approve-all", "prompt", "/rewind --dry-run", ttl=60).stdout))
    check("rewound.txt" in dry and path.exists(), f"the dry run lists the file and changes nothing: {dry!r}")
    done = answer_text(transcript(acpx("--approve-all", "prompt", "/rewind", ttl=60).stdout))
    check(not path.exists(), f"the rewind removed the file the agent created: {done!r}")
    undone = answer_text(transcript(acpx("--approve-all", "prompt", "/rewind undo", ttl=60).stdout))
    check(path.exists() and path.read_text() == "kept by rewind\n", f"/rewind undo brought it back: {undone!r}")


def budget_crossed():
    transcript(acpx("--approve-all", "prompt", "/budget turn_tokens 1", ttl=60).stdout)
    over = transcript(acpx("--approve-all", "prompt", "hello again", ttl=60, check_exit=False).stdout)
    stop = result_of(over, "session/prompt").get("stopReason")
    check(stop == "max_tokens", f"the turn past its token budget ends max_tokens, not {stop}")
    transcript(acpx("--approve-all", "prompt", "/budget turn_tokens off", ttl=60).stdout)
    again = transcript(acpx("--approve-all", "prompt", "and again", ttl=60).stdout)
    stop = result_of(again, "session/prompt").get("stopReason")
    check(stop == "end_turn", f"with the budget lifted the next turn ends end_turn, not {stop}")


def skill_command():
    # A project skill is a slash command; its instructions reach the model.
    skill = PROJECT / ".crucible" / "skills" / "haiku-writer"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text("---\nname: haiku-writer\ndescription: Writes haiku about code\n---\n"
                                    "Answer in three lines of five, seven and five syllables.\n")
    msgs = transcript(acpx("--approve-all", "exec", "/haiku-writer about Rust").stdout)
    text = answer_text(msgs)
    # (The scripted model echoes the start of what it was sent.)
    check("Use the skill `haiku-writer`" in text and '<skill name="haiku-writer">\nAnswer in' in text,
          f"the skill's instructions reached the model: {text!r}")


def fallback_provider():
    # The default provider is down; the turn goes on with the next of its chain.
    dead = TMP / "fallback.toml"
    dead.write_text(f"""[chat]
default_provider = "down"

[llm.providers.down]
type = "openai"
endpoint = "http://127.0.0.1:9/v1"
default_model = "gone"
max_retries = 0
fallback = ["scripted"]

[llm.providers.scripted]
type = "openai"
endpoint = "{LLM}/v1"
default_model = "scripted-a"
""")
    msgs = transcript(acpx("--approve-all", "exec", "still there?",
                           agent=f"{AGENT} --config {dead} --data-dir {TMP / 'data-fallback'}").stdout)
    check(result_of(msgs, "session/prompt").get("stopReason") == "end_turn", "the turn ended normally")
    check("Scripted reply to: still there?" in answer_text(msgs), f"the fallback answered: {answer_text(msgs)!r}")
    said = json.dumps([m for m in msgs if m.get("method") == "session/update"])
    check("scripted" in said and "down" in said, "the switch to the fallback was told")


def rate_limit_waited():
    # A 429 with Retry-After: 2 is waited out (and said), then the turn goes
    # on. (A wait past a minute is said as "rate limited until HH:MM".)
    msgs = transcript(acpx("--approve-all", "exec", "[[ratelimit:2]] are you there?").stdout)
    check(result_of(msgs, "session/prompt").get("stopReason") == "end_turn", "the turn ended normally")
    check("Scripted reply to: [[ratelimit:2]] are you there?" in answer_text(msgs), f"answer: {answer_text(msgs)!r}")
    said = json.dumps([m for m in msgs if m.get("method") == "session/update"])
    check("retrying in 2 s" in said or "rate limited until" in said, f"the wait was told: {said[-600:]}")


def close_owner():
    acpx("sessions", "close", check_exit=False)
    stop_owners()


step("acpx exec: one-shot turn streams and ends with end_turn", exec_plain)
step("acpx exec: write_file asks, is approved, writes through acpx's fs", exec_write_allowed)
step("acpx exec: a denied write writes nothing and shows failed", exec_write_denied)
step("acpx exec: read_file result reaches the model", exec_read)
step("acpx session: two prompts in one session, the second remembers the first", multi_turn)
step("acpx session: prompt after the agent process exited restores the stored session", load_after_idle, feature="resume")
step("acpx sessions list: the agent's session/list", list_from_agent, feature="list")
step("acpx session: /rewind removes the file a turn wrote, /rewind undo brings it back", rewind_with_files)
step("acpx session: /budget turn_tokens 1 ends the next turn max_tokens; off lifts it", budget_crossed)
step("acpx exec: a project skill runs as a slash command", skill_command)
step("acpx exec: with the default provider down, its fallback answers and the switch is told", fallback_provider)
step("acpx exec: a 429 with Retry-After is waited out, said, and the turn goes on", rate_limit_waited)
close_owner()
shutil.rmtree(TMP, ignore_errors=True)
print(f"acpx: {len(PASSED)} passed, {len(FAILED)} failed, {len(PENDING)} pending", flush=True)
for f in FAILED:
    print(f"  FAILED {f}", file=sys.stderr)
sys.exit(1 if FAILED else 0)
