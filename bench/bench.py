#!/usr/bin/env python3
"""`make bench`: crucible-agent side by side with codex-acp (the fastest ACP
agent measured here) against one scripted local streaming server
(e2e/fake_llm.py, a separate process), so the figures measure the agents, not
a model. Standard library only; one asyncio client drives both agents the same
way, so the client's own overhead is the same for both.

Usage: bench.py OUR_BINARY CODEX_ACP_BINARY [--quick] [--out bench/results.md]

Timestamps: time.perf_counter() for intervals inside this process; for the
first-chunk latency the server writes CLOCK_MONOTONIC (system-wide) into the
first chunk's text ("t=<ns>") just before it writes it to the socket, and the
client subtracts it from CLOCK_MONOTONIC when it reads the matching
agent_message_chunk.
"""
import asyncio
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from acp_client import Agent, mono_ns  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUICK = "--quick" in sys.argv
args = [a for a in sys.argv[1:] if not a.startswith("--")]
OURS, CODEX = os.path.abspath(args[0]), os.path.abspath(args[1])
OUT = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else HERE / "results.md"
if "--out" in sys.argv:
    args.remove(str(OUT))

N_START = 8 if QUICK else 20
N_TURN = 10 if QUICK else 40
N_CANCEL = 5 if QUICK else 15
N_CONC = 100
N_IDLE = 200 if QUICK else 1000
N_LONG = 100 if QUICK else 500


def pct(xs, p):
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def rss_kb(pid):
    """Resident memory of pid and its descendants, in KiB."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for t in os.listdir(f"/proc/{p}/task"):
                kids = open(f"/proc/{p}/task/{t}/children").read().split()
                todo.extend(int(k) for k in kids)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def hwm_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


class Bench:
    def __init__(self, fake_url, tmp):
        self.fake = fake_url
        self.tmp = Path(tmp)
        self.work = self.tmp / "project"
        self.work.mkdir(exist_ok=True)
        cfg = self.tmp / "ours.toml"
        cfg.write_text(f'[chat]\ndefault_provider = "scripted"\n\n[llm.providers.scripted]\ntype = "openai"\n'
                       f'endpoint = "{fake_url}/v1"\ndefault_model = "scripted-a"\n'
                       # The window codex assumes for its model: without it the
                       # scripted model gets the 8k fallback and long runs
                       # measure our automatic compaction instead of a turn.
                       'context_window = 400000\n'
                       # A scripted server has no prompt cache to warm.
                       'prewarm = false\n')
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "crucible-e2e"
        self.codex_home = cache / "bench-codex-home"  # codex refuses helper binaries under /tmp
        self.codex_home.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(
            'model = "scripted-a"\nmodel_provider = "fake"\napproval_policy = "never"\n\n'
            '[model_providers.fake]\nname = "fake"\n'
            f'base_url = "{fake_url}/v1"\nwire_api = "responses"\nenv_key = "FAKE_KEY"\n')
        self.specs = {
            "ours": ([OURS, "--config", str(cfg), "--data-dir", str(self.tmp / "data")],
                     dict(os.environ, RUST_LOG="error")),
            "codex": ([CODEX], dict(os.environ, CODEX_HOME=str(self.codex_home), FAKE_KEY="bench", RUST_LOG="error")),
            "replay": ([sys.executable, str(HERE / "replay_agent.py")], dict(os.environ)),
        }

    async def agent(self, kind):
        cmd, env = self.specs[kind]
        return await Agent(kind, cmd, env, str(self.work)).start()


# ---------------------------------------------------------------------------
# The server alone: replay the agent's own request straight to the server.

async def fetch_json(url):
    host, port, path = split_url(url)
    r, w = await asyncio.open_connection(host, port)
    w.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    data = await r.read()
    w.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def split_url(url):
    m = re.match(r"http://([^:/]+):(\d+)(/.*)?", url)
    return m.group(1), int(m.group(2)), m.group(3) or "/"


async def server_alone(fake, path, body, n):
    host, port, _ = split_url(fake)
    r, w = await asyncio.open_connection(host, port, limit=1 << 24)
    data = json.dumps(body).encode()
    req = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(data)}\r\n\r\n").encode() + data
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        w.write(req)
        await r.readuntil(b"\r\n\r\n")
        await r.readuntil(b"\r\n0\r\n\r\n")  # end of the chunked stream
        times.append(time.perf_counter() - t0)
    w.close()
    return times


# ---------------------------------------------------------------------------

N_EXEC = 31
FLOOR_CMD = ["/bin/sh", "-c", 'read line; echo \'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}\'']


def exec_to_first_line(cmd, env, cwd):
    """Spawn → the answer to `initialize` read, with blocking pipes and no
    event loop, so the client's own cost is as small as it can be."""
    init = (json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                        "params": {"protocolVersion": 1, "clientCapabilities": {},
                                   "clientInfo": {"name": "bench", "version": "1"}}}) + "\n").encode()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env, cwd=cwd, close_fds=True)
    p.stdin.write(init)
    p.stdin.flush()
    line = p.stdout.readline()
    t = time.perf_counter() - t0
    p.stdin.close()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if b'"result"' not in line:
        raise RuntimeError(f"{cmd[0]} did not answer initialize: {line[:200]!r}")
    return t


def m_exec_floor(b):
    """Ours and the exec floor (a `sh` that reads one line and prints one),
    alternating so both see the same machine."""
    cmd, env = b.specs["ours"]
    ours, floor = [], []
    for _ in range(3):  # warm the page cache
        exec_to_first_line(cmd, env, str(b.work))
        exec_to_first_line(FLOOR_CMD, env, str(b.work))
    for _ in range(N_EXEC):
        ours.append(exec_to_first_line(cmd, env, str(b.work)))
        floor.append(exec_to_first_line(FLOOR_CMD, env, str(b.work)))
    return ours, floor


async def m_startup(b, kind):
    starts, rss_init, rss_sess = [], [], []
    for _ in range(N_START):
        a = await b.agent(kind)
        starts.append(await a.initialize())
        await asyncio.sleep(0.3)
        rss_init.append(rss_kb(a.proc.pid))
        await a.new_session()
        await asyncio.sleep(0.5)
        rss_sess.append(rss_kb(a.proc.pid))
        await a.stop()
    return starts, rss_init, rss_sess


async def m_turn(b, kind):
    a = await b.agent(kind)
    await a.initialize()
    sid = await a.new_session()
    turns, firsts = [], []
    for i in range(N_TURN + 3):
        first = []

        def on(u, t, first=first):
            if not first and u.get("sessionUpdate") == "agent_message_chunk":
                m = re.match(r"t=(\d+) ", u["content"].get("text", ""))
                if m:
                    first.append((t - int(m.group(1))) / 1e9)

        reason, dt = await a.prompt(sid, "[[chunks:200]]", on)
        assert reason == "end_turn", f"{kind}: turn ended {reason}"
        if i >= 3:  # warm-up: connection pool, lazy initialisation
            turns.append(dt)
            if first:
                firsts.append(first[0])
    await a.stop()
    return turns, firsts


async def m_cancel(b, kind):
    a = await b.agent(kind)
    await a.initialize()
    times = []
    for _ in range(N_CANCEL + 1):
        sid = await a.new_session()
        started = asyncio.Event()
        a_loop = asyncio.get_running_loop()

        def on(u, t):
            if u.get("sessionUpdate") == "agent_message_chunk" and "slow-start" in u["content"].get("text", ""):
                a_loop.call_soon(started.set)

        task = asyncio.create_task(a.prompt(sid, "[[slow]]", on))
        await asyncio.wait_for(started.wait(), 30)
        await asyncio.sleep(0.12)
        t0 = time.perf_counter()
        a.notify("session/cancel", {"sessionId": sid})
        reason, _ = await task
        dt = time.perf_counter() - t0
        assert reason == "cancelled", f"{kind}: cancel answered {reason}"
        times.append(dt)
    await a.stop()
    return times[1:]


async def m_concurrent(b, kind):
    a = await b.agent(kind)
    await a.initialize()
    await asyncio.sleep(0.3)
    base = rss_kb(a.proc.pid)
    sids = []
    for i in range(0, N_CONC, 20):
        sids += await asyncio.gather(*(a.new_session() for _ in range(20)))
    await asyncio.sleep(1.0)
    idle = rss_kb(a.proc.pid)
    t0 = time.perf_counter()
    res = await asyncio.gather(*(a.prompt(s, "[[chunks:200]]") for s in sids))
    total = time.perf_counter() - t0
    assert all(r == "end_turn" for r, _ in res), f"{kind}: {set(r for r, _ in res)}"
    peak = hwm_kb(a.proc.pid)
    await a.stop()
    return total, peak, (idle - base) / N_CONC


async def m_idle(b, kind, n, budget_s=180):
    a = await b.agent(kind)
    await a.initialize()
    await asyncio.sleep(0.3)
    base = rss_kb(a.proc.pid)
    made = 0
    t0 = time.perf_counter()
    while made < n and time.perf_counter() - t0 < budget_s:
        await asyncio.gather(*(a.new_session() for _ in range(min(50, n - made))))
        made += min(50, n - made)
    await asyncio.sleep(1.0)
    rss = rss_kb(a.proc.pid)
    await a.stop()
    return made, rss, (rss - base) / made, time.perf_counter() - t0


async def m_long(b, kind):
    """Turn times along one growing session, and at three points the server
    alone answering the agent's own request of that turn (the floor grows with
    the context too: it parses a longer request)."""
    a = await b.agent(kind)
    await a.initialize()
    sid = await a.new_session()
    times, floors = [], {}
    marks = {0, N_LONG // 2, N_LONG - 1}
    for i in range(N_LONG):
        reason, dt = await a.prompt(sid, f"turn {i}")
        assert reason == "end_turn"
        times.append(dt)
        if i in marks:
            reqs = await fetch_json(f"{b.fake}/_requests")
            last = [q for q in reqs if q["body"].get("stream")][-1]
            floors[i] = statistics.median(await server_alone(b.fake, last["path"], last["body"], 10))
    await a.stop()
    return times, floors


def fmt_ms(x):
    return f"{x * 1000:.2f} ms"


def fmt_mb(kb):
    return f"{kb / 1024:.1f} MB"


async def main():
    fake = await asyncio.create_subprocess_exec(sys.executable, "-u", str(ROOT / "e2e" / "fake_llm.py"), "--port", "0",
                                                stdout=subprocess.PIPE)
    line = (await fake.stdout.readline()).decode()
    fake_url = f"http://127.0.0.1:{line.split()[1]}"
    tmp = tempfile.mkdtemp(prefix="crucible-bench-")
    b = Bench(fake_url, tmp)
    R = {"load_start": open("/proc/loadavg").read().split()[:3]}
    try:
        print("[client floor] the bench client reading 200 ready-made updates…", flush=True)
        a = await b.agent("replay")
        await a.initialize()
        rsid = await a.new_session()
        R["client_floor"] = [(await a.prompt(rsid, "x"))[1] for _ in range(N_TURN + 3)][3:]
        await a.stop()
        # Metric by metric, both agents back to back, so that both see the same
        # machine (a shared machine's load changes within minutes).
        print(f"[ours] start-up against the exec floor ({N_EXEC} runs each)…", flush=True)
        R["exec"], R["exec_floor"] = m_exec_floor(b)
        kinds = ("ours", "codex")
        for kind in kinds:
            print(f"[{kind}] start-up and memory ({N_START} runs)…", flush=True)
            R[kind, "start"], R[kind, "rss_init"], R[kind, "rss_sess"] = await m_startup(b, kind)
        for kind in kinds:
            print(f"[{kind}] 200-chunk turns ({N_TURN})…", flush=True)
            R[kind, "turn"], R[kind, "first"] = await m_turn(b, kind)
            reqs = await fetch_json(f"{fake_url}/_requests")
            last = [q for q in reqs if q["body"].get("stream")][-1]
            R[kind, "floor"] = await server_alone(fake_url, last["path"], last["body"], N_TURN)
        for kind in kinds:
            print(f"[{kind}] cancel ({N_CANCEL})…", flush=True)
            R[kind, "cancel"] = await m_cancel(b, kind)
        for kind in kinds:
            print(f"[{kind}] {N_CONC} concurrent sessions…", flush=True)
            R[kind, "conc"] = await m_concurrent(b, kind)
        for kind in kinds:
            print(f"[{kind}] {N_IDLE} idle sessions…", flush=True)
            R[kind, "idle"] = await m_idle(b, kind, N_IDLE)
        for kind in kinds:
            print(f"[{kind}] long session ({N_LONG} turns)…", flush=True)
            R[kind, "long"] = await m_long(b, kind)
        R["load"] = open("/proc/loadavg").read().split()[:3]
    finally:
        fake.kill()
        await fake.wait()
        subprocess.run(["rm", "-rf", tmp])
    report(R)


def report(R):
    rows = []

    def mm(xs, f=fmt_ms):
        return f"{f(statistics.median(xs))} / {f(pct(xs, 95))}"

    def ratio(a, b):
        return f"{a / b:.2f}×" if b else "n/a"

    def row(metric, ours, codex, r, target, met):
        rows.append((metric, ours, codex, r, target, "met" if met else "MISSED"))

    eo, ef = statistics.median(R["exec"]), statistics.median(R["exec_floor"])
    row(f"0. spawn → initialize answered, blocking client ({N_EXEC} runs)", mm(R["exec"]), "—", "", "", True)
    row("0'. … a `sh` reading one line and printing one (exec floor)", mm(R["exec_floor"]), "—", "", "(floor)", True)
    row("0''. … start-up over the exec floor", f"{eo / ef:.2f}×", "—", "", "≤ 1.5×", eo <= 1.5 * ef)
    so, sc = statistics.median(R["ours", "start"]), statistics.median(R["codex", "start"])
    row("1. spawn → initialize answered", mm(R["ours", "start"]), mm(R["codex", "start"]), ratio(so, sc), "≤ 0.15×", so <= 0.15 * sc)
    mo, mc = statistics.median(R["ours", "rss_init"]), statistics.median(R["codex", "rss_init"])
    row("2a. RSS after initialize", fmt_mb(mo), fmt_mb(mc), ratio(mo, mc), "≤ 0.25×", mo <= 0.25 * mc)
    mo2, mc2 = statistics.median(R["ours", "rss_sess"]), statistics.median(R["codex", "rss_sess"])
    row("2b. RSS with one idle session", fmt_mb(mo2), fmt_mb(mc2), ratio(mo2, mc2), "≤ 0.25×", mo2 <= 0.25 * mc2)
    to, tc = statistics.median(R["ours", "turn"]), statistics.median(R["codex", "turn"])
    fo, fc = statistics.median(R["ours", "floor"]), statistics.median(R["codex", "floor"])
    row("3. 200-chunk turn, prompt → end_turn", mm(R["ours", "turn"]), mm(R["codex", "turn"]), ratio(to, tc), "—", True)
    row("3'. the server alone, same stream", mm(R["ours", "floor"]), mm(R["codex", "floor"]), "", "(floor)", True)
    cf = statistics.median(R["client_floor"])
    row("3''. turn overhead above the server", fmt_ms(to - fo), fmt_ms(tc - fc), ratio(to - fo, tc - fc),
        "≤ 2 ms", to - fo <= 0.002)
    row("3'''. … of which the bench client reading 200 updates", fmt_ms(cf), fmt_ms(cf), "", "(client floor)", True)
    row("3''''. turn overhead net of the client", fmt_ms(to - fo - cf), fmt_ms(tc - fc - cf),
        ratio(to - fo - cf, tc - fc - cf), "≤ 2 ms", to - fo - cf <= 0.002)
    if R["ours", "first"] and R["codex", "first"]:
        f1, f2 = statistics.median(R["ours", "first"]), statistics.median(R["codex", "first"])
        row("4. first chunk: server sends → client reads", mm(R["ours", "first"]), mm(R["codex", "first"]),
            ratio(f1, f2), "< 1 ms", f1 < 0.001)
    c1, c2 = statistics.median(R["ours", "cancel"]), statistics.median(R["codex", "cancel"])
    row("5. session/cancel → prompt answered cancelled", mm(R["ours", "cancel"]), mm(R["codex", "cancel"]),
        ratio(c1, c2), "< 20 ms", c1 < 0.020)
    (t1, p1, s1), (t2, p2, s2) = R["ours", "conc"], R["codex", "conc"]
    row(f"6a. {N_CONC} concurrent 200-chunk turns: total", fmt_ms(t1), fmt_ms(t2), ratio(t1, t2), "—", True)
    row(f"6b. … peak RSS", fmt_mb(p1), fmt_mb(p2), ratio(p1, p2), "—", True)
    row(f"6c. … RSS per idle session ({N_CONC})", f"{s1:.0f} KB", f"{s2:.0f} KB", ratio(s1, s2), "< 200 KB", s1 < 200)
    (n1, r1, k1, d1), (n2, r2, k2, d2) = R["ours", "idle"], R["codex", "idle"]
    row(f"6d. idle sessions: RSS (count)", f"{fmt_mb(r1)} ({n1})", f"{fmt_mb(r2)} ({n2})", ratio(r1, r2), "—", True)
    row(f"6e. … RSS per idle session", f"{k1:.0f} KB", f"{k2:.0f} KB", ratio(k1, k2), "< 200 KB", k1 < 200)

    for kind in ("ours", "codex"):
        xs, floors = R[kind, "long"]
        n = len(xs)
        w = max(5, n // 20)
        # turn time around each mark (median of w turns) and the server alone at that mark
        segs = []
        for mark in sorted(floors):
            lo_, hi_ = max(0, mark - w // 2), min(n, mark + w // 2 + 1)
            segs.append((statistics.median(xs[lo_:hi_]), floors[mark]))
        R[kind, "long_seg"] = segs
    lo, lc = R["ours", "long_seg"], R["codex", "long_seg"]
    marks = f"1 / {N_LONG // 2} / {N_LONG}"
    row(f"7a. long session: turn time at turns {marks}", " / ".join(fmt_ms(t) for t, _ in lo),
        " / ".join(fmt_ms(t) for t, _ in lc), ratio(lo[-1][0], lc[-1][0]), "—", True)
    row(f"7b. … the server alone at turns {marks}", " / ".join(fmt_ms(f) for _, f in lo),
        " / ".join(fmt_ms(f) for _, f in lc), "", "(floor)", True)
    oo = [t - f for t, f in lo]
    oc = [t - f for t, f in lc]
    row(f"7c. … overhead above the server at turns {marks}", " / ".join(fmt_ms(x) for x in oo),
        " / ".join(fmt_ms(x) for x in oc), ratio(oo[-1], oc[-1]) if oc[-1] > 0 else "n/a",
        "flat (last - first ≤ 1 ms)", oo[-1] - oo[0] <= 0.001)

    head = ("metric", "crucible-agent (median / p95)", "codex-acp (median / p95)", "ratio", "target", "")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(6)]
    lines = ["| " + " | ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)) + " |" for r in [head]]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)) + " |" for r in rows]
    table = "\n".join(lines)
    print()
    print(table)
    load = open("/proc/loadavg").read().split()[:3]
    codex_version = "0.16.0"
    try:
        codex_version = json.load(open(Path(CODEX).parent.parent / "package.json"))["version"]
    except Exception:
        pass
    env = (f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()}, "
           f"{os.cpu_count()} cores, load average {' '.join(R['load_start'])} at the start and {' '.join(load)} at the end "
           "(other engineers' builds share the machine); "
           f"crucible-agent {OURS}; codex-acp {codex_version} (npm @zed-industries/codex-acp-linux-x64). "
           f"Runs: start-up {N_START}, turns {N_TURN} (after 3 warm-up), cancels {N_CANCEL}, "
           f"{N_CONC} concurrent sessions, {N_IDLE} idle sessions, a {N_LONG}-turn session."
           + (" QUICK run." if QUICK else ""))
    OUT.write_text("# Benchmarks: crucible-agent vs codex-acp\n\n"
                   "Produced by `make bench` (bench/bench.py); see bench/README.md for what each row measures.\n\n"
                   + env + "\n\n" + table + "\n")
    print(f"\nwritten to {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
