#!/usr/bin/env python3
"""`make bench-long` (and the last section of `make bench`): a 30-turn session
on the real local model, as a person would hold it.

One crucible-agent session talks to a real llama-server (SmolLM2-135M,
`-c 8192 -np 2`: two slots of 4,096 tokens) through the recording proxy of
`local_model.py`, which reads llama-server's own `timings` from every
answer. 30 prompts of about 130 tokens each go one after another, with a
pause between them (`--pause`, 10 s by default: a person reading the
answer). For every model request the table shows what it was (the turn's
own call, a warm-up, a compaction), the server slot it asked for
(`id_slot`, `—` when none), the prompt tokens the server processed, the
tokens it reused from its cache, and the time; for every turn the time to
first token the client saw (prompt sent -> first `agent_message_chunk`).

Summary: median and max TTFT, the lowest reuse of a turn's prompt, the
share of each compaction's prompt that was not cached, and what each turn
made the server read, against issues 41 and 47's goals (reuse >= 90 %, no
TTFT over 2x the median, compaction uncached <= 15 %, every prompt
processing only its own new message: here, no turn after the first reading
more than twice the median turn).

Usage: long_session.py AGENT LLAMA_SERVER_SCRIPT [--label TEXT] [--pause S]
       [--turns N] [--out FILE]
With --out, the section "## Long session …" of FILE gets a subsection named
by --label (replaced when one of that label is there).
"""
import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from acp_client import Agent  # noqa: E402
from local_model import COMPACTION_MARK, LlamaServer, Proxy  # noqa: E402

SECTION = "## Long session: 30 turns on the local model"
# An answer's cap (`--max-output`): two short sentences; SmolLM2 often
# rambles on to it (a `max_tokens` stop), which keeps every turn alike.
MAX_OUTPUT = 48

TOPICS = [
    "Makefiles", "git branches", "unit tests", "small functions", "race conditions",
    "linkers", "hash maps", "recursion", "APIs", "file permissions", "pointers",
    "caching", "logging", "code review", "dependency injection", "garbage collection",
    "regular expressions", "database indexes", "HTTP status codes", "TCP handshakes",
    "JSON schemas", "continuous integration", "feature flags", "profiling",
    "memory leaks", "thread pools", "binary search", "semantic versioning",
    "error handling", "documentation",
]
SENTENCES = [
    "Our team maintains a medium-sized service written in Rust with a small Python toolchain around it.",
    "Last week a colleague changed the build so that every pull request runs the full test suite twice.",
    "The service reads its configuration from a TOML file and talks to a local model server over HTTP.",
    "Some of the older modules have long functions that mix input parsing, business rules and output.",
    "We want new engineers to understand the reasons behind our conventions, not only the rules themselves.",
    "The deployment runs on two small machines that are shared with other jobs, so builds are often slow.",
    "A few incidents last month were traced back to assumptions nobody had written down anywhere.",
    "I am preparing a short internal guide and would like plain explanations with one concrete example each.",
]


def prompts(count):
    """`count` prompts of about 130 tokens each (as SmolLM2's tokenizer
    counts them), each on its own topic so no two are alike."""
    out = []
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        context = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(5))
        out.append(f"Question {i + 1}. {context} With that in mind: what should a new engineer "
                   f"know about {topic}? Answer in two short sentences.")
    return out


def config(tmp, proxy_port):
    path = Path(tmp) / "config-long.toml"
    path.write_text(
        '[chat]\ndefault_provider = "local"\n\n[llm.providers.local]\ntype = "openai"\n'
        f'endpoint = "http://127.0.0.1:{proxy_port}/v1"\ndefault_model = "smollm2-135m"\n'
        f'max_output_tokens = {MAX_OUTPUT}\ntimeout_secs = 600\n')
    return path


def kind(call):
    """What a request was: a warm-up (one token), a compaction (the
    summary prompt, or an answer longer than a turn may write), or a turn's
    own call."""
    if call.get("warmup"):
        return "warm-up"
    if call.get("compaction") or COMPACTION_MARK in json.dumps(call.get("last_message", "")):
        return "compaction"
    max_tokens = call.get("max_tokens")
    if max_tokens is not None and max_tokens not in (1, MAX_OUTPUT):
        return "compaction"
    return "turn"


class RecordingProxy(Proxy):
    """The proxy, keeping also what tells the request's kind apart."""

    async def forward(self, head, body, writer, reader=None):
        await super().forward(head, body, writer, reader)
        if not head.startswith(b"POST") or not self.calls:
            return
        request = json.loads(body or b"{}")
        messages = request.get("messages") or [{}]
        self.calls[-1]["max_tokens"] = request.get("max_tokens")
        self.calls[-1]["last_message"] = messages[-1].get("content", "")


async def run(args):
    tmp = tempfile.mkdtemp(prefix="bench-long-")
    server = LlamaServer(args.llama, args.port).start()
    proxy = await RecordingProxy(args.port).start()
    data = Path(tmp) / "data"
    env = dict(os.environ, RUST_LOG="error")
    agent = await Agent("ours", [args.agent, "--config", str(config(tmp, proxy.port)),
                                 "--data-dir", str(data)], env, tmp).start()
    agent.timeout = 900
    turns = []
    try:
        await agent.initialize()
        sids = [await agent.new_session() for _ in range(args.sessions)]
        # The session opens; the user takes a moment before the first prompt.
        await asyncio.sleep(args.pause)
        for number, text in enumerate(prompts(args.turns), start=1):
            # With more than one session, they take turns (A, B, A, B, …).
            session = (number - 1) % len(sids)
            sid = sids[session]
            first = []
            t0 = time.perf_counter()

            def on_update(update, _t, first=first):
                if not first and update.get("sessionUpdate") == "agent_message_chunk":
                    first.append(time.perf_counter())

            stop, total = await agent.prompt(sid, text, on_update)
            turns.append({"turn": number, "session": "ABCDEFGH"[session % 8], "sent": t0,
                          "ttft": first[0] - t0 if first else None, "seconds": total, "stop": stop})
            print(f"turn {number}: {stop}, ttft {turns[-1]['ttft']}", file=sys.stderr)
            await asyncio.sleep(args.pause)
    finally:
        await agent.stop()
        server.stop()
    return {"turns": turns, "calls": proxy.calls}


def attribute(result):
    """Each request with the turn it belongs to: the turn it went out
    during, or `after N` for one between turn N and the next."""
    turns = result["turns"]
    rows = []
    for call in sorted(result["calls"], key=lambda c: c["started"]):
        if not call["path"].endswith("/chat/completions"):
            continue
        during, after = None, 0
        for turn in turns:
            if call["started"] >= turn["sent"]:
                after = turn["turn"]
                if call["started"] <= turn["sent"] + turn["seconds"]:
                    during = turn["turn"]
        t = call["timings"]
        rows.append({
            "turn": during, "after": after, "slot": call.get("id_slot"),
            "kind": kind(call) + (" (dropped)" if call.get("dropped") else ""),
            "prompt_n": t.get("prompt_n"), "cache_n": t.get("cache_n"),
            "seconds": call["seconds"], "first_token": call.get("first_token"),
        })
    return rows


def pct(part, whole):
    return None if not whole else 100 * part / whole


def fmt(x, unit="", digits=2):
    return "—" if x is None else f"{x:.{digits}f}{unit}"


def report(result, rows):
    turns = {t["turn"]: t for t in result["turns"]}
    out = ["| turn | request | slot | prompt tokens processed | reused from cache | reuse | "
           "request time | TTFT (client) |",
           "|---|---|---|---|---|---|---|---|"]
    seen_turn = set()
    for row in rows:
        n, c = row["prompt_n"], row["cache_n"]
        reuse = pct(c, (n or 0) + (c or 0)) if n is not None and c is not None else None
        where = str(row["turn"]) if row["turn"] else f"after {row['after']}"
        if row["turn"] and len({t.get("session") for t in turns.values()}) > 1:
            where += f" ({turns[row['turn']].get('session')})"
        ttft = ""
        if row["kind"] == "turn" and row["turn"] and row["turn"] not in seen_turn:
            seen_turn.add(row["turn"])
            ttft = fmt(turns[row["turn"]]["ttft"], " s")
        slot = "—" if row["slot"] is None else str(row["slot"])
        out.append(f"| {where} | {row['kind']} | {slot} | {n if n is not None else '—'} | "
                   f"{c if c is not None else '—'} | {fmt(reuse, ' %', 0)} | "
                   f"{fmt(row['seconds'], ' s')} | {ttft} |")
    ttfts = [t["ttft"] for t in result["turns"] if t["ttft"] is not None]
    first_calls = {}
    for row in rows:
        if row["kind"] == "turn" and row["turn"] and row["turn"] not in first_calls:
            first_calls[row["turn"]] = row
    reuses = [(turn, pct(r["cache_n"], r["prompt_n"] + r["cache_n"]))
              for turn, r in first_calls.items()
              if r["prompt_n"] is not None and r["cache_n"] is not None and r["prompt_n"] + r["cache_n"]]
    compactions = [pct(r["prompt_n"], r["prompt_n"] + r["cache_n"]) for r in rows
                   if r["kind"] == "compaction" and r["prompt_n"] is not None and r["cache_n"] is not None
                   and r["prompt_n"] + r["cache_n"]]
    # What each turn's first request made the server read: its own new
    # message only (about 150 tokens here), unless it had to read a prefix
    # again (a compacted one not warmed, a cache lost).
    processed = [(turn, r["prompt_n"]) for turn, r in first_calls.items() if r["prompt_n"] is not None]
    later = [p for p in processed if p[0] > 1]
    most = max(later, key=lambda x: x[1]) if later else None
    median_processed = statistics.median([p[1] for p in later]) if later else None
    compaction_times = [r["seconds"] for r in rows if r["kind"] == "compaction" and r["seconds"] is not None]
    median = statistics.median(ttfts) if ttfts else None
    worst = max(ttfts) if ttfts else None
    low = min(reuses, key=lambda x: x[1]) if reuses else None
    counts = {}
    for t in result["turns"]:
        counts[t["stop"]] = counts.get(t["stop"], 0) + 1
    stops = [f"{stop} ×{n}" for stop, n in sorted(counts.items())]
    slots = sorted({"none sent" if r["slot"] is None else str(r["slot"]) for r in rows})
    summary = [
        "| measure | value | goal (issues 41, 47) | |",
        "|---|---|---|---|",
        f"| turns · stop reasons | {len(result['turns'])} · {', '.join(stops)} | — | |",
        f"| median TTFT | {fmt(median, ' s')} | — | |",
        f"| max TTFT (turn) | {fmt(worst, ' s')} ({max(result['turns'], key=lambda t: t['ttft'] or 0)['turn'] if ttfts else '—'}) | "
        f"≤ 2 × median = {fmt(2 * median if median else None, ' s')} | "
        f"{'met' if median and worst <= 2 * median else 'MISSED'} |",
        f"| min reuse of a turn's prompt (turn) | {fmt(low[1] if low else None, ' %', 0)} ({low[0] if low else '—'}) | ≥ 90 % | "
        f"{'met' if low and low[1] >= 90 else 'MISSED'} |",
        f"| compactions · uncached share of each | {len(compactions)} · "
        f"{', '.join(fmt(c, ' %', 0) for c in compactions) or '—'} | ≤ 15 % | "
        f"{'met' if compactions and max(compactions) <= 15 else ('—' if not compactions else 'MISSED')} |",
        f"| prompt tokens a turn's first request processed (turns 2–): median · max (turn) | "
        f"{fmt(median_processed, '', 0)} · {most[1] if most else '—'} ({most[0] if most else '—'}) | "
        f"its own message only | {'met' if most and most[1] <= 2 * median_processed else ('—' if not most else 'MISSED')} |",
        f"| compaction request times | {', '.join(fmt(c, ' s', 1) for c in compaction_times) or '—'} | — | |",
        f"| warm-ups | {sum(r['kind'] == 'warm-up' for r in rows)} | — | |",
        f"| server slots asked for (`id_slot`) | {', '.join(slots)} | one per session | |",
    ]
    return "\n".join(summary), "\n".join(out)


def write_section(path, label, body):
    """Put `### label` (with `body`) into the long-session section of
    `path`: replaced when there, else added at the section's end."""
    text = Path(path).read_text() if Path(path).exists() else ""
    head = f"### {label}\n"
    if SECTION not in text:
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n" \
            "Produced by `make bench-long` (bench/long_session.py): one session, 30 prompts of about " \
            "130 tokens, a pause between them, SmolLM2-135M on llama-server with two 4,096-token slots.\n"
    start = text.index(SECTION)
    nxt = text.find("\n## ", start + len(SECTION))
    end = len(text) if nxt == -1 else nxt + 1
    section = text[start:end]
    at = section.find(head)
    if at != -1:
        later = section.find("\n### ", at + len(head))
        stop = len(section) if later == -1 else later + 1
        section = section[:at] + head + "\n" + body + "\n" + section[stop:]
    else:
        section = section.rstrip("\n") + "\n\n" + head + "\n" + body + "\n"
    if not section.endswith("\n"):
        section += "\n"
    Path(path).write_text(text[:start] + section + text[end:])


def main():
    global MAX_OUTPUT
    p = argparse.ArgumentParser()
    p.add_argument("agent")
    p.add_argument("llama")
    p.add_argument("--label", default="latest")
    p.add_argument("--port", type=int, default=8094)
    p.add_argument("--pause", type=float, default=10.0)
    p.add_argument("--turns", type=int, default=30)
    p.add_argument("--max-output", type=int, default=MAX_OUTPUT)
    p.add_argument("--sessions", type=int, default=1,
                   help="sessions in one agent, prompted in turn (A, B, A, …)")
    p.add_argument("--out")
    p.add_argument("--raw", help="also write every recorded call and turn as JSON here")
    args = p.parse_args()
    MAX_OUTPUT = args.max_output
    args.agent = str(Path(args.agent).resolve())
    args.llama = str(Path(args.llama).resolve())
    load_start = " ".join(open("/proc/loadavg").read().split()[:3])
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result = asyncio.run(run(args))
    rows = attribute(result)
    summary, table = report(result, rows)
    load_end = " ".join(open("/proc/loadavg").read().split()[:3])
    body = (f"Run {started}, agent `{args.agent}`, pause {args.pause:g} s, {args.turns} turns"
            f"{f' over {args.sessions} sessions taking turns' if args.sessions > 1 else ''}, "
            f"answers capped at {MAX_OUTPUT} tokens, llama-server on "
            f"{os.environ.get('LLM_SERVER_THREADS', '2')} thread(s); "
            f"load average {load_start} at the start and {load_end} at the end "
            f"(2 cores, shared with other builds).\n\n{summary}\n\n<details><summary>Every request"
            f"</summary>\n\n{table}\n\n</details>\n")
    print(body)
    if args.raw:
        Path(args.raw).write_text(json.dumps({"turns": result["turns"], "rows": rows}, indent=1))
    if args.out:
        write_section(args.out, args.label, body)


if __name__ == "__main__":
    main()
