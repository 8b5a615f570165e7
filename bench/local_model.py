#!/usr/bin/env python3
"""`make bench`'s local-model section: what a user waits for with a real model.

crucible-agent (and codex-acp, where it fits) drive a real llama-server
(SmolLM2-135M, a 4,096-token slot) through a small recording proxy that reads
llama-server's own `timings` (prompt tokens read, tokens reused from the
prompt cache, milliseconds) from each streamed answer. Rows:

  fixed prompt tokens      the system prompt and tools, as the server counts them
  TTFT, first prompt       prompt sent -> first update, on a server that never saw
                           the prefix: cold (prewarm = false), and warmed (the session
                           opened 20 s before the prompt)
  TTFT, turns 2-5          and the share of each turn's prompt reused from the cache
  compaction               the automatic compaction's time and tokens, when the
                           window fills

Usage: local_model.py AGENT LLAMA_SERVER_SCRIPT [--codex CODEX] [--out FILE]
Each cold measurement starts a fresh llama-server (its cache empty).
"""
import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from acp_client import Agent  # noqa: E402

PROMPTS = [
    "What does a Makefile do? Answer in one sentence.",
    "Name two uses of git branches.",
    "What is a unit test?",
    "Why keep functions small?",
    "What is a race condition?",
    "What does a linker do?",
    "What is a hash map?",
    "Explain recursion briefly.",
    "What is an API?",
    "What does `ls -la` show?",
    "What is a pointer?",
    "Explain caching in one line.",
]
# A summary request continues the conversation: its last message is the
# instruction (prompts/compact.md), which begins with this.
COMPACTION_MARK = "[Compaction request]"


def is_compaction(messages):
    """Whether a chat request is a compaction's summary request."""
    if not messages or messages[-1].get("role") != "user":
        return False
    content = messages[-1].get("content", "")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return isinstance(content, str) and content.startswith(COMPACTION_MARK)


class Proxy:
    """Forwards to llama-server, recording each chat answer's `timings`."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.calls = []

    async def start(self):
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def serve(self, reader, writer):
        try:
            while not writer.is_closing():
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1)) \
                    if re.search(rb"(?i)content-length:", head) else 0
                body = await reader.readexactly(length) if length else b""
                await self.forward(head, body, writer, reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception as err:  # a bench bug must show, not vanish with the task
            print(f"proxy: {type(err).__name__}: {err}", file=sys.stderr)
        finally:
            writer.close()

    async def forward(self, head, body, writer, reader=None):
        start = time.perf_counter()
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream)
        head = re.sub(rb"(?i)connection:[^\r]*\r\n", b"", head)
        up_w.write(head[:-2] + b"Connection: close\r\n\r\n" + body)
        await up_w.drain()
        data = bytearray()
        first_token = None
        # The agent drops a request it no longer needs (a compaction put off
        # for a prompt): the proxy drops its own, as a direct connection
        # would, so llama-server stops and frees the slot. (Answers carry
        # `Connection: close`: nothing else comes from the agent here.)
        hangup = asyncio.ensure_future(reader.read(1)) if reader else None
        dropped = False
        while True:
            read = asyncio.ensure_future(up_r.read(65536))
            waiting = {read} if hangup is None or hangup.done() else {read, hangup}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                # Hung up before the answer's end: a dropped request.
                # After it (the finish and usage read), the rest is read.
                if b'"finish_reason":"' in data:
                    await asyncio.wait({read})
                else:
                    read.cancel()
                    dropped = True
                    break
            chunk = read.result()
            if not chunk:
                break
            data += chunk
            if first_token is None and re.search(rb'"content":"[^"]', chunk):
                first_token = time.perf_counter() - start
            # The agent may hang up once it has what it needs (the finish
            # and usage): the call is still recorded.
            if not writer.is_closing():
                try:
                    writer.write(chunk)
                    await writer.drain()
                except ConnectionError:
                    writer.close()
        up_w.close()
        if hangup is not None and not hangup.done():
            hangup.cancel()
            # Its read must have ended before the next request is read.
            await asyncio.wait({hangup})
        if not head.startswith(b"POST"):
            return
        request = json.loads(body or b"{}")
        timings, prompt_tokens = None, None
        text = dechunked(bytes(data))
        for line in text.split(b"\n"):
            if line.startswith(b"data: {") and (b'"timings"' in line or b'"usage"' in line):
                try:
                    event = json.loads(line[6:])
                except ValueError:
                    continue
                if event.get("timings"):
                    timings = event["timings"]
                elif event.get("usage") and not timings:
                    # Without timings: the usage says as much (cached = reused).
                    usage = event["usage"]
                    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
                    timings = {"prompt_n": usage.get("prompt_tokens", 0) - cached, "cache_n": cached}
        # A prompt too long for the window: llama-server says how long.
        found = re.search(rb'"n_prompt_tokens":\s*(\d+)', bytes(data))
        if found:
            prompt_tokens = int(found.group(1))
        messages = request.get("messages", [])
        self.calls.append({
            "path": head.split(b" ", 2)[1].decode(),
            "status": int(data[9:12] or 0) if data.startswith(b"HTTP/") else None,
            "warmup": request.get("max_tokens") == 1,
            "compaction": is_compaction(messages),
            "started": start,
            "seconds": time.perf_counter() - start,
            "first_token": first_token,
            "dropped": dropped,
            "id_slot": request.get("id_slot"),
            "timings": timings or {},
            "prompt_tokens": prompt_tokens or (timings or {}).get("prompt_n"),
            "tail": None if timings else text[-400:].decode(errors="replace"),
        })


def dechunked(response):
    """The body of a raw HTTP response, its chunked framing removed (a
    chunk boundary may fall inside an event line)."""
    head, _, body = response.partition(b"\r\n\r\n")
    if b"chunked" not in head.lower():
        return body
    out, rest = bytearray(), body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


class LlamaServer:
    def __init__(self, script, port):
        self.script, self.port = script, port

    def start(self):
        subprocess.run(["bash", self.script, "start", str(self.port)], check=True,
                       stdout=subprocess.DEVNULL)
        return self

    def stop(self):
        subprocess.run(["bash", self.script, "stop", str(self.port)], stdout=subprocess.DEVNULL)


def config(tmp, proxy_port, prewarm):
    path = Path(tmp) / f"config-{prewarm}.toml"
    path.write_text(
        '[chat]\ndefault_provider = "local"\n\n[llm.providers.local]\ntype = "openai"\n'
        f'endpoint = "http://127.0.0.1:{proxy_port}/v1"\ndefault_model = "smollm2-135m"\n'
        f'max_output_tokens = 200\nprewarm = {"true" if prewarm else "false"}\n'
        'timeout_secs = 600\n')
    return path


async def session(agent_bin, tmp, proxy, prewarm):
    cfg = config(tmp, proxy.port, prewarm)
    data = Path(tmp) / f"data-{time.monotonic_ns()}"
    env = dict(os.environ, RUST_LOG="error")
    agent = await Agent("ours", [agent_bin, "--config", str(cfg), "--data-dir", str(data)],
                        env, str(tmp)).start()
    await agent.initialize()
    sid = await agent.new_session()
    return agent, sid


async def ttft(agent, sid, text):
    """Seconds from the prompt to the first update carrying the answer."""
    first = []
    t0 = time.perf_counter()

    def on_update(update, _t):
        if not first and update.get("sessionUpdate") in (
                "agent_message_chunk", "agent_thought_chunk", "tool_call"):
            first.append(time.perf_counter())

    stop, total = await agent.prompt(sid, text, on_update)
    # The proxy records a call when the server closes it, which may come
    # just after the agent has answered.
    await asyncio.sleep(0.3)
    return (first[0] - t0 if first else None), total, stop


def turn_call(calls, before):
    """The first model call of a turn (not a warm-up or compaction)."""
    for call in calls[before:]:
        if not call["warmup"] and not call["compaction"]:
            return call
    return None


def reuse(call):
    t = (call or {}).get("timings", {})
    n, c = t.get("prompt_n"), t.get("cache_n")
    if n is None or c is None or n + c == 0:
        return None
    return c / (n + c)


async def run(args):
    rows = {}
    tmp = tempfile.mkdtemp(prefix="bench-local-")
    port = args.port

    # 1. Cold: a fresh server, no warm-up; the first prompt reads everything.
    server = LlamaServer(args.llama, port).start()
    proxy = await Proxy(port).start()
    agent, sid = await session(args.agent, tmp, proxy, prewarm=False)
    first, _, _ = await ttft(agent, sid, PROMPTS[0])
    call = turn_call(proxy.calls, 0)
    rows["cold"] = {"ttft": first, "prompt_n": call["timings"].get("prompt_n") if call else None}
    await agent.stop()
    server.stop()

    # 2. Warmed: a fresh server; the session opens, the user pauses 20 s.
    server = LlamaServer(args.llama, port).start()
    proxy = await Proxy(port).start()
    agent, sid = await session(args.agent, tmp, proxy, prewarm=True)
    await asyncio.sleep(args.pause)
    warm = [c for c in proxy.calls if c["warmup"]]
    rows["fixed"] = warm[0]["timings"].get("prompt_n") if warm else None
    rows["warmup_seconds"] = warm[0]["seconds"] if warm else None
    before = len(proxy.calls)
    first, _, _ = await ttft(agent, sid, PROMPTS[0])
    call = turn_call(proxy.calls, before)
    rows["warm"] = {"ttft": first, "reuse": reuse(call),
                    "prompt_n": call["timings"].get("prompt_n") if call else None}

    # 3. Turns 2-5, then on until a compaction (or the prompts run out).
    rows["turns"] = []
    rows["compaction"] = None
    for i in range(2, 21):
        text = PROMPTS[(i - 1) % len(PROMPTS)]
        before = len(proxy.calls)
        first, total, stop = await ttft(agent, sid, text)
        call = turn_call(proxy.calls, before)
        compaction = next((c for c in proxy.calls[before:] if c["compaction"]), None)
        if i <= 5:
            rows["turns"].append({"turn": i, "ttft": first, "reuse": reuse(call), "stop": stop,
                                  "calls": len(proxy.calls) - before,
                                  "prompt_n": (call or {}).get("timings", {}).get("prompt_n")})
        if compaction and rows["compaction"] is None:
            rows["compaction"] = {"turn": i, "seconds": compaction["seconds"],
                                  "prompt_n": compaction["timings"].get("prompt_n"),
                                  "predicted_n": compaction["timings"].get("predicted_n"),
                                  "turn_seconds": total, "after_reuse": reuse(call),
                                  "after_prompt_n": (call or {}).get("timings", {}).get("prompt_n")}
        if i >= 5 and rows["compaction"]:
            break
    await agent.stop()
    server.stop()
    rows["unread"] = [c["tail"] for c in proxy.calls if c["tail"]]

    if args.codex:
        rows["codex"] = await codex_first_request(args, tmp)
    return rows


async def codex_first_request(args, tmp):
    """codex-acp's first request to the same server: its prompt tokens, or
    why it did not fit."""
    server = LlamaServer(args.llama, args.port).start()
    proxy = await Proxy(args.port).start()
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "crucible-e2e" / "bench-local-codex-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        'model = "smollm2-135m"\nmodel_provider = "local"\napproval_policy = "never"\n\n'
        '[model_providers.local]\nname = "local"\n'
        f'base_url = "http://127.0.0.1:{proxy.port}/v1"\nwire_api = "responses"\nenv_key = "LOCAL_KEY"\n')
    env = dict(os.environ, CODEX_HOME=str(home), LOCAL_KEY="bench", RUST_LOG="error")
    agent = await Agent("codex", [args.codex], env, tmp).start()
    result = {}
    try:
        await agent.initialize()
        sid = await agent.new_session()
        first, _, stop = await asyncio.wait_for(ttft(agent, sid, PROMPTS[0]), 300)
        result = {"ttft": first, "stop": stop}
    except Exception as err:  # it may not fit the window at all
        result = {"error": str(err)[:160]}
    await agent.stop()
    server.stop()
    posts = [c for c in proxy.calls if c["path"].endswith(("/responses", "/chat/completions"))]
    if posts:
        result["prompt_tokens"] = posts[0]["prompt_tokens"]
        result["status"] = posts[0]["status"]
    return result


def fmt_s(x):
    return "—" if x is None else f"{x:.2f} s"


def fmt_pct(x):
    return "—" if x is None else f"{100 * x:.0f} %"


def report(rows):
    out = ["| measure | crucible-agent | target |", "|---|---|---|"]
    out.append(f"| fixed prompt tokens (system + tools, counted by the server) | {rows.get('fixed')} | ≤ 1,000 |")
    out.append(f"| warm-up (in the background after session/new) | {fmt_s(rows.get('warmup_seconds'))} | — |")
    cold = rows["cold"]
    out.append(f"| TTFT first prompt, cold ({cold['prompt_n']} tokens read) | {fmt_s(cold['ttft'])} | — |")
    warm = rows["warm"]
    out.append(f"| TTFT first prompt, warmed, after a 20 s pause ({warm['prompt_n']} tokens read) "
               f"| {fmt_s(warm['ttft'])} | ≤ 1.5 s |")
    for t in rows["turns"]:
        out.append(f"| TTFT turn {t['turn']} ({t['prompt_n']} tokens read) · reuse | "
                   f"{fmt_s(t['ttft'])} · {fmt_pct(t['reuse'])} | reuse ≥ 90 % |")
    c = rows.get("compaction")
    if c:
        out.append(f"| automatic compaction (turn {c['turn']}): time · tokens read · written | "
                   f"{fmt_s(c['seconds'])} · {c['prompt_n']} · {c['predicted_n']} | — |")
        out.append(f"| … that whole turn · the turn's own call after it: tokens read · reuse | "
                   f"{fmt_s(c['turn_seconds'])} · {c['after_prompt_n']} · {fmt_pct(c['after_reuse'])} | — |")
    else:
        out.append("| automatic compaction | none within the prompts | — |")
    codex = rows.get("codex")
    if codex:
        fits = codex.get("status") == 200
        out.append(f"| codex-acp's first request to the same server: prompt tokens | "
                   f"{codex.get('prompt_tokens')} ({'fits' if fits else 'does not fit the 4,096-token window'}) | — |")
        if fits:
            out.append(f"| … codex-acp TTFT first prompt, cold | {fmt_s(codex.get('ttft'))} | — |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("agent")
    p.add_argument("llama")
    p.add_argument("--codex")
    p.add_argument("--port", type=int, default=8093)
    p.add_argument("--pause", type=float, default=20.0)
    p.add_argument("--out")
    args = p.parse_args()
    args.agent = str(Path(args.agent).resolve())
    args.llama = str(Path(args.llama).resolve())
    rows = asyncio.run(run(args))
    table = report(rows)
    print(table)
    print(json.dumps(rows, indent=1), file=sys.stderr)
    if args.out:
        with open(args.out, "a") as f:
            load = " ".join(open("/proc/loadavg").read().split()[:3])
            f.write(f"\n## Local model (SmolLM2-135M on llama-server, 2 threads, 4,096-token slot)\n\n"
                    f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load} at the end.\n\n"
                    f"{table}\n")


if __name__ == "__main__":
    main()
