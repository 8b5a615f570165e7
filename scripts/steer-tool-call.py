#!/usr/bin/env python3
"""A forwarding proxy that steers a tiny model into a tool call. Standard library only.

    python3 scripts/steer-tool-call.py UPSTREAM      # e.g. http://127.0.0.1:8080/v1

Listens on 127.0.0.1 (a free port, printed as `PORT N` on stdout) and forwards
/v1/chat/completions and /v1/models to UPSTREAM, streaming the answers back
as they come. SmolLM2-135M answers in prose even when asked for a tool call
(`tool_choice: "required"` alone does not do it); it makes a real, parsed
call when the request also ends with the assistant prefill `<tool_call>\\n`,
which its chat template continues. So a request that offers tools and whose
last message is the user's gets both; every other request (the one after a
tool result, where the model answers in text) goes as it is. The requests
are steered; every word and call in the answers is the model's own.
`make picture` puts it between the agent and llama-server
(scripts/demo-picture.sh); tests/all/real_llm.rs does the same in Rust.
"""

from __future__ import annotations

import argparse
import http.server
import json
import sys
import urllib.error
import urllib.request

PREFILL = {"role": "assistant", "content": "<tool_call>\n"}
# Headers the proxy's own connection decides.
HOP_BY_HOP = {"connection", "content-length", "host", "transfer-encoding"}


def steer(request: dict) -> dict:
    """The request as it goes upstream: with the prefill and `required` when it asks for a turn's first step."""
    messages = request.get("messages") or []
    if request.get("tools") and messages and messages[-1].get("role") == "user":
        request = dict(request, messages=[*messages, PREFILL], tool_choice="required")
    return request


def handler(upstream: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the answer ends when the connection closes

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
            pass

        def do_GET(self) -> None:
            self.forward(None)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.rstrip("/").endswith("/chat/completions"):
                body = json.dumps(steer(json.loads(body))).encode()
            self.forward(body)

        def forward(self, body: bytes | None) -> None:
            path = self.path.removeprefix("/v1")
            request = urllib.request.Request(upstream + path, data=body, method=self.command)
            for name, value in self.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    request.add_header(name, value)
            try:
                answer = urllib.request.urlopen(request, timeout=600)
            except urllib.error.HTTPError as error:
                answer = error
            except OSError as error:
                self.send_error(502, f"upstream {upstream}: {error}")
                return
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.end_headers()
            while chunk := answer.read1(65536):
                self.wfile.write(chunk)
                self.wfile.flush()

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("upstream", help="the model server's base URL, ending in /v1")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(args.upstream.rstrip("/")))
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
