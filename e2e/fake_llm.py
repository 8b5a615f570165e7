#!/usr/bin/env python3
"""A scripted, deterministic model server for the end-to-end tier and the
benchmarks. Standard library only.

It speaks:
  GET  /v1/models                 two models, scripted-a and scripted-b (meta.n_ctx 32768)
  POST /v1/chat/completions       OpenAI chat completions, SSE (what crucible-agent's openai provider uses)
  POST /v1/responses              OpenAI Responses API, SSE (what codex-acp speaks)
  GET  /_requests                 the request bodies received so far (JSON list), for assertions
  (anything else: 404)

What it answers is decided by the text of the last user message (or, after a
tool result, by that result), so a test scripts the model from its prompt:
  [[tool:NAME {json args}]]   first request: one streamed tool call NAME(args);
                              after the tool result: "Tool NAME returned: <first 200 chars>"
  [[chunks:N]]                N text chunks "w0 w1 ... w(N-1) " (one word each); the first
                              chunk is "t=<CLOCK_MONOTONIC ns when it was written> "
  [[ratelimit:N]]             the first request with this text is answered 429 with
                              Retry-After: N (a usage limit); later ones as usual
  [[slow]]                    a text chunk every 50 ms for 30 s (for cancel tests);
                              the first chunk is "slow-start " so a client knows it began
  otherwise                   "Scripted reply to: <text>. User messages so far: <n>." in
                              small chunks, where n counts the user messages in the request

Run: fake_llm.py [--port 0] ; prints "PORT <n>" on stdout once it listens.
"""
import asyncio
import json
import re
import sys
import time

MODELS = {"object": "list", "data": [
    {"id": "scripted-a", "object": "model", "owned_by": "e2e", "meta": {"n_ctx": 32768, "n_ctx_train": 32768}},
    {"id": "scripted-b", "object": "model", "owned_by": "e2e", "meta": {"n_ctx": 32768, "n_ctx_train": 32768}},
]}

REQUESTS = []  # bodies seen (for /_requests); capped so a benchmark does not grow it forever
KEEP_REQUESTS = 200


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(part.get("text") or part.get("content") or "")
            elif isinstance(part, str):
                out.append(part)
        return "".join(x if isinstance(x, str) else json.dumps(x) for x in out)
    return "" if content is None else json.dumps(content)


def plan_chat(body):
    """Decide the script from a chat-completions request: ("tool", name, args) | ("text", chunks) | ("slow",)."""
    msgs = body.get("messages") or []
    last = msgs[-1] if msgs else {}
    users = [m for m in msgs if m.get("role") == "user"]
    if last.get("role") == "tool":
        # Name of the tool whose result this is.
        name = "tool"
        call_id = last.get("tool_call_id")
        for m in msgs:
            for c in m.get("tool_calls") or []:
                if c.get("id") == call_id:
                    name = c["function"]["name"]
        return ("text", split_words(f"Tool {name} returned: {text_of(last.get('content'))[:200]}"))
    return plan_from_text(text_of(users[-1].get("content")) if users else "", len(users))


def plan_from_text(text, n_users):
    m = re.search(r"\[\[tool:(\w+) (\{.*?\})\]\]", text, re.S)
    if m:
        return ("tool", m.group(1), m.group(2))
    m = re.search(r"\[\[chunks:(\d+)\]\]", text)
    if m:
        return ("chunks", int(m.group(1)))
    if "[[slow]]" in text:
        return ("slow",)
    return ("text", split_words(f"Scripted reply to: {text.strip()[:200]}. User messages so far: {n_users}."))


def split_words(s):
    parts = re.findall(r"\S+\s*", s)
    return parts or [s]


class Conn:
    def __init__(self, writer, chunked):
        self.w = writer
        self.chunked = chunked

    async def send(self, data: bytes):
        if self.chunked:
            self.w.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            self.w.write(data)
        await self.w.drain()

    async def end(self):
        if self.chunked:
            self.w.write(b"0\r\n\r\n")
            await self.w.drain()


def sse_headers():
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")


async def stream_text_chunks(plan, emit):
    """Yield text deltas per plan through emit(text) (awaitable)."""
    kind = plan[0]
    if kind == "text":
        for part in plan[1]:
            await emit(part)
    elif kind == "chunks":
        n = plan[1]
        for i in range(n):
            if i == 0:
                await emit(f"t={now_ns()} ")
            else:
                await emit(f"w{i} ")
    elif kind == "slow":
        await emit("slow-start ")
        for i in range(600):
            await asyncio.sleep(0.05)
            await emit(f"s{i} ")


async def serve_chat(conn, body):
    plan = plan_chat(body)
    model = body.get("model", "scripted-a")
    cid = "chatcmpl-e2e"

    def chunk(delta, finish=None):
        return {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    async def emit_obj(obj):
        await conn.send(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

    await emit_obj(chunk({"role": "assistant", "content": ""}))
    if plan[0] == "tool":
        _, name, args = plan
        await emit_obj(chunk({"tool_calls": [{"index": 0, "id": "call_e2e_1", "type": "function",
                                              "function": {"name": name, "arguments": ""}}]}))
        half = len(args) // 2
        for piece in (args[:half], args[half:]):
            await emit_obj(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        await emit_obj(chunk({}, "tool_calls"))
    else:
        await stream_text_chunks(plan, lambda t: emit_obj(chunk({"content": t})))
        await emit_obj(chunk({}, "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        await emit_obj({"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                        "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    await conn.send(b"data: [DONE]\n\n")


def plan_responses(body):
    items = body.get("input") or []
    if isinstance(items, str):
        return plan_from_text(items, 1)
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    if not users:
        return ("text", ["ok"])
    return plan_from_text(text_of(users[-1].get("content")), len(users))


async def serve_responses(conn, body):
    plan = plan_responses(body)
    if plan[0] == "tool":  # codex is only ever given text scripts here
        plan = ("text", ["ok"])
    seq = 0

    async def ev(kind, obj):
        nonlocal seq
        obj = {"type": kind, "sequence_number": seq, **obj}
        seq += 1
        await conn.send(b"event: " + kind.encode() + b"\ndata: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

    rid = "resp_e2e"
    mid = "msg_e2e"
    resp = {"id": rid, "object": "response", "status": "in_progress", "model": body.get("model", "scripted-a"), "output": []}
    await ev("response.created", {"response": resp})
    await ev("response.output_item.added", {"output_index": 0, "item": {"type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": []}})
    await ev("response.content_part.added", {"item_id": mid, "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
    full = []

    async def emit(t):
        full.append(t)
        await ev("response.output_text.delta", {"item_id": mid, "output_index": 0, "content_index": 0, "delta": t})

    await stream_text_chunks(plan, emit)
    text = "".join(full)
    await ev("response.output_text.done", {"item_id": mid, "output_index": 0, "content_index": 0, "text": text})
    item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
    await ev("response.output_item.done", {"output_index": 0, "item": item})
    done = dict(resp, status="completed", output=[item],
                usage={"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                       "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15})
    await ev("response.completed", {"response": done})


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += data[:-2]
    return method, path.split("?")[0], headers, body


async def send_json(writer, status, obj):
    data = json.dumps(obj).encode()
    writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (status, len(data), data))
    await writer.drain()


RATE_LIMITED = set()  # texts already answered 429 once


async def rate_limited(writer, body):
    """`[[ratelimit:N]]` in the last user message: 429 the first time."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    text = text_of(users[-1].get("content")) if users else ""
    m = re.search(r"\[\[ratelimit:(\d+)\]\]", text)
    if not m or text in RATE_LIMITED:
        return False
    RATE_LIMITED.add(text)
    data = json.dumps({"error": {"message": "Rate limit reached for requests", "type": "rate_limit_exceeded"}}).encode()
    writer.write(b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: %s\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (m.group(1).encode(), len(data), data))
    await writer.drain()
    return True


async def handle(reader, writer):
    try:
        while True:
            try:
                method, path, headers, raw = await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if headers.get("connection", "").lower() == "close":
                if method == "GET" and path == "/_requests":
                    await send_json(writer, 200, REQUESTS)
                elif method == "GET" and path.endswith("/models"):
                    await send_json(writer, 200, MODELS)
                else:
                    await send_json(writer, 400, {"error": {"message": "fake_llm: streams need a kept-alive connection"}})
                return
            if method == "GET" and path.endswith("/models"):
                await send_json(writer, 200, MODELS)
                continue
            if method == "GET" and path == "/_requests":
                await send_json(writer, 200, REQUESTS)
                continue
            if method == "POST" and path.endswith(("/chat/completions", "/responses")):
                body = json.loads(raw or b"{}")
                REQUESTS.append({"path": path, "body": body})
                del REQUESTS[:-KEEP_REQUESTS]
                if not body.get("stream"):
                    await send_json(writer, 400, {"error": {"message": "fake_llm only streams"}})
                    continue
                if await rate_limited(writer, body):
                    continue
                writer.write(sse_headers())
                conn = Conn(writer, True)
                if path.endswith("/chat/completions"):
                    await serve_chat(conn, body)
                else:
                    await serve_responses(conn, body)
                await conn.end()
                continue
            await send_json(writer, 404, {"error": {"message": f"fake_llm: no route {method} {path}"}})
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main():
    port = 0
    if "--port" in sys.argv:
        port = int(sys.argv[sys.argv.index("--port") + 1])
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
