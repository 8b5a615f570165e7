#!/usr/bin/env python3
"""A stand-in "agent" for the benchmark's client floor: answers initialize and
session/new, and answers every session/prompt with 200 ready-made
agent_message_chunk notifications and end_turn in one write. Timing a turn
against it measures the bench client itself (reading and parsing 200 updates
from a pipe), which is part of every agent's row 3 figure."""
import json
import sys

out = sys.stdout.buffer
sid = "replay-session"


def line(obj):
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


chunks = b"".join(
    line({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"w{i} "}}}})
    for i in range(200))

for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
    elif method == "session/new":
        result = {"sessionId": sid}
    elif method == "session/prompt":
        out.write(chunks + line({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}}))
        out.flush()
        continue
    else:
        result = {}
    out.write(line({"jsonrpc": "2.0", "id": mid, "result": result}))
    out.flush()
