"""The benchmarks' ACP client: one agent process over stdio, driven by
asyncio. Standard library only."""
import asyncio
import json
import subprocess
import time


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Agent:
    """One agent process over ACP stdio; answers nothing of its own accord
    (permission requests are not expected: no tools are scripted here)."""

    def __init__(self, kind, cmd, env, cwd):
        self.kind, self.cmd, self.env, self.cwd = kind, cmd, env, cwd
        self.next_id = 0
        self.pending = {}
        self.listeners = {}  # session id -> callback(update, t_ns)
        self.timeout = 120  # seconds a request may take (a long local turn may need more)

    async def start(self):
        self.t_spawn = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            *self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=self.env, cwd=self.cwd, limit=1 << 26)
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self):
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                for f in self.pending.values():
                    if not f.done():
                        f.set_exception(RuntimeError(f"{self.kind} closed stdout"))
                return
            t = mono_ns()
            msg = json.loads(line)
            if "method" in msg:
                if msg["method"] == "session/update":
                    cb = self.listeners.get(msg["params"]["sessionId"])
                    if cb:
                        cb(msg["params"]["update"], t)
                elif "id" in msg:  # a request to the client: refuse politely
                    self._write({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "bench client"}})
                continue
            f = self.pending.pop(msg.get("id"), None)
            if f and not f.done():
                f.set_result((msg, time.perf_counter()))

    def _write(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())

    async def request(self, method, params):
        i = self.next_id
        self.next_id += 1
        f = asyncio.get_running_loop().create_future()
        self.pending[i] = f
        self._write({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        msg, t = await asyncio.wait_for(f, self.timeout)
        if "error" in msg:
            raise RuntimeError(f"{self.kind} {method}: {msg['error']}")
        return msg["result"], t

    def notify(self, method, params):
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self):
        _, t = await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {},
                                                 "clientInfo": {"name": "bench", "version": "1"}})
        return t - self.t_spawn

    async def new_session(self):
        r, _ = await self.request("session/new", {"cwd": self.cwd, "mcpServers": []})
        return r["sessionId"]

    async def prompt(self, sid, text, on_update=None):
        self.listeners[sid] = on_update or (lambda u, t: None)
        t0 = time.perf_counter()
        r, t1 = await self.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        return r["stopReason"], t1 - t0

    async def stop(self):
        try:
            self.proc.stdin.close()
        except Exception:
            pass
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.reader.cancel()
