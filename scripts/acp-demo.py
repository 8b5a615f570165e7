#!/usr/bin/env python3
"""A tiny Agent Client Protocol (ACP) client for `make demo`. Standard library only.

Spawns an ACP agent, talks newline-delimited JSON-RPC 2.0 to it over its
stdin/stdout, and prints the conversation as it streams:

    python3 scripts/acp-demo.py target/release/crucible-agent --config demo.toml
    python3 scripts/acp-demo.py --prompt "Hello" --prompt "Again" AGENT [AGENT ARGS...]

Options of this script (--prompt, --timeout, --raw) may appear anywhere; every
other argument after the agent's path is passed to the agent, and so is
everything after a `--`. The agent's stderr goes straight to this terminal.

Exit status: 0 when every prompt turn completed and the agent exited cleanly,
1 otherwise (error response, agent crash, timeout), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

PROTOCOL_VERSION = 1
DEFAULT_PROMPTS = [
    "In one sentence, what is a context window?",
    "Now say it in five words.",
]
METHOD_NOT_FOUND = -32601

_EOF = object()  # queued by the reader thread when the agent's stdout closes


class DemoError(Exception):
    """Ends the demo with a message and exit status 1."""


class Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)


class Output:
    """Keeps track of whether the cursor is mid-line, so that status lines always start on a fresh line."""

    def __init__(self, style: Style) -> None:
        self.style = style
        self.mid_line = False
        self.in_thought = False

    def stream(self, text: str) -> None:
        if not text:
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        self.mid_line = not text.endswith("\n")

    def break_line(self) -> None:
        """Ends the current line, if the cursor is mid-line."""
        if self.mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False

    def line(self, text: str = "") -> None:
        self.end_thought()
        self.break_line()
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def message_chunk(self, text: str) -> None:
        self.end_thought()
        self.stream(text)

    def thought_chunk(self, text: str) -> None:
        if not self.in_thought:
            self.break_line()  # a thought starts on its own line
            self.stream(self.style.dim("(thinking) "))
            self.in_thought = True
        self.stream(self.style.dim(text))

    def end_thought(self) -> None:
        if self.in_thought:
            self.in_thought = False
            self.break_line()


class Agent:
    """The agent process, a reader thread for its stdout, and JSON-RPC plumbing."""

    def __init__(self, argv: list[str], out: Output, raw: bool) -> None:
        self.out = out
        self.raw = raw
        self.next_id = 1
        self.messages: queue.Queue[object] = queue.Queue()
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,  # the agent's logs go straight to the terminal
                bufsize=0,
            )
        except FileNotFoundError:
            raise DemoError(
                f"agent not found: {argv[0]}\n"
                "    build it first (cargo build --release, or make build) and pass its path"
            ) from None
        except PermissionError:
            raise DemoError(f"agent is not executable: {argv[0]}") from None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw_line in self.proc.stdout:
            line = raw_line.decode("utf-8", "replace").strip()
            if line:
                self.messages.put(line)
        self.messages.put(_EOF)

    # -- sending ---------------------------------------------------------

    def _write(self, message: dict) -> None:
        line = json.dumps(message, ensure_ascii=False)
        if self.raw:
            self.out.line(self.out.style.dim(f"  raw » {line}"))
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            # The agent is gone; the reader thread will report it when it sees EOF.
            pass

    def request(self, method: str, params: dict) -> int:
        request_id = self.next_id
        self.next_id += 1
        self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def notify(self, method: str, params: dict) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def reply_error(self, request_id: object, code: int, message: str) -> None:
        self._write({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    # -- receiving -------------------------------------------------------

    def wait_for(self, request_id: int, method: str, timeout: float, on_update) -> dict:
        """Handles incoming messages until the response to `request_id`; returns its `result`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            try:
                item = self.messages.get(timeout=remaining)
            except queue.Empty:
                raise TimeoutError from None
            if item is _EOF:
                self._exited_early(method)
            assert isinstance(item, str)
            if self.raw:
                self.out.line(self.out.style.dim(f"  raw « {item}"))
            try:
                message = json.loads(item)
            except json.JSONDecodeError:
                self.out.line(self.out.style.red(f"! agent wrote a line that is not JSON to stdout: {item[:200]}"))
                continue
            if not isinstance(message, dict):
                self.out.line(self.out.style.red(f"! agent sent a JSON value that is not an object: {item[:200]}"))
                continue

            if "method" in message and "id" in message:
                # A request from the agent: this demo client implements no client methods.
                self.out.line(
                    self.out.style.dim(
                        f"  (agent asked for {message['method']}; this demo client offers no client "
                        f"methods, answered {METHOD_NOT_FOUND})"
                    )
                )
                self.reply_error(message["id"], METHOD_NOT_FOUND, f"Method not found: {message['method']}")
            elif "method" in message:
                if message["method"] == "session/update":
                    on_update(message.get("params") or {})
                # other notifications: nothing to show
            elif message.get("id") == request_id:
                if "error" in message:
                    self._error_response(method, message["error"])
                return message.get("result") or {}
            else:
                self.out.line(self.out.style.dim(f"  (ignored a response to unknown id {message.get('id')!r})"))

    def _error_response(self, method: str, error: object) -> None:
        if isinstance(error, dict):
            text = f"{error.get('message', '(no message)')} (code {error.get('code')})"
            if error.get("data") is not None:
                text += f"\n    data: {json.dumps(error['data'], ensure_ascii=False)}"
        else:
            text = json.dumps(error)
        raise DemoError(f"the agent answered {method} with an error: {text}")

    def _exited_early(self, method: str) -> None:
        code = self.proc.wait()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise DemoError(
            f"the agent {how} while we waited for the answer to {method}\n"
            "    look at the agent's stderr above for the reason"
        )

    # -- shutting down ---------------------------------------------------

    def close(self, timeout: float = 10.0) -> int | None:
        """Closes stdin (EOF tells the agent to exit) and waits; returns its exit code, None if it hung."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._release()
        return code

    def _release(self) -> None:
        self.reader.join(timeout=2)
        if self.proc.stdout is not None and not self.reader.is_alive():
            self.proc.stdout.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        self._release()


class Session:
    """Renders session/update notifications for one prompt turn."""

    def __init__(self, out: Output) -> None:
        self.out = out
        self.usage: dict | None = None

    def on_update(self, params: dict) -> None:
        update = params.get("update") or {}
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self.out.message_chunk(content_text(update.get("content")))
        elif kind == "agent_thought_chunk":
            self.out.thought_chunk(content_text(update.get("content")))
        elif kind == "usage_update":
            self.usage = update
        elif kind == "tool_call":
            status = update.get("status") or "pending"
            self.out.line(self.out.style.cyan(f"  [tool call: {update.get('title') or update.get('toolCallId')} ({status})]"))
        elif kind == "tool_call_update":
            if update.get("status") in ("completed", "failed"):
                self.out.line(self.out.style.cyan(f"  [tool call {update.get('toolCallId')}: {update['status']}]"))
        elif kind == "plan":
            entries = update.get("entries") or []
            self.out.line(self.out.style.cyan(f"  [plan: {len(entries)} step(s)]"))
        # user_message_chunk, available_commands_update, current_mode_update,
        # config_option_update, session_info_update: nothing to show in this demo

    def usage_note(self) -> str | None:
        if not self.usage:
            return None
        used, size = self.usage.get("used"), self.usage.get("size")
        note = f"[context: {used} of {size} tokens]"
        cost = self.usage.get("cost")
        if isinstance(cost, dict) and cost.get("amount") is not None:
            note = note[:-1] + f", cost {cost['amount']} {cost.get('currency', '')}".rstrip() + "]"
        self.usage = None
        return note


def content_text(content: object) -> str:
    if not isinstance(content, dict):
        return ""
    if content.get("type") == "text":
        return str(content.get("text", ""))
    return f"[{content.get('type', 'unknown')} content]"


def model_of(result: dict) -> str | None:
    for option in result.get("configOptions") or []:
        if isinstance(option, dict) and option.get("category") == "model":
            return option.get("currentValue")
    return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    if "--" in argv:
        split = argv.index("--")
        ours, passthrough = argv[:split], argv[split + 1 :]
    else:
        ours, passthrough = argv, []
    parser = argparse.ArgumentParser(
        prog="acp-demo.py",
        description="Drive an ACP agent over stdio and print the conversation.",
        epilog="Any other argument after AGENT, and everything after --, is passed to the agent.",
        allow_abbrev=False,
    )
    parser.add_argument("agent", metavar="AGENT", help="path of the agent binary")
    parser.add_argument(
        "--prompt",
        action="append",
        metavar="TEXT",
        help="a prompt to send (repeatable; default: two short questions)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per request (default 120)")
    parser.add_argument("--raw", action="store_true", help="also print every JSON-RPC line sent and received")
    args, extra = parser.parse_known_args(ours)
    args.agent_args = extra + passthrough
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    return args


def run(args: argparse.Namespace, out: Output) -> int:
    style = out.style
    prompts = args.prompt or DEFAULT_PROMPTS
    argv = [args.agent, *args.agent_args]
    out.line(style.dim("$ " + " ".join(argv)))
    agent = Agent(argv, out, args.raw)
    try:
        out.line(style.bold("→ initialize"))
        rid = agent.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
                "clientInfo": {"name": "acp-demo", "version": "0.1"},
            },
        )
        result = wait(agent, rid, "initialize", args.timeout, lambda _p: None)
        info = result.get("agentInfo") or {}
        name = info.get("name") or info.get("title") or "(unnamed agent)"
        version = result.get("protocolVersion")
        out.line(f"← agent {name} {info.get('version', '')}".rstrip() + f", protocol {version}")
        if version != PROTOCOL_VERSION:
            raise DemoError(f"the agent speaks protocol version {version}; this demo speaks {PROTOCOL_VERSION}")

        out.line(style.bold("→ session/new"))
        rid = agent.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        session = Session(out)
        result = wait(agent, rid, "session/new", args.timeout, session.on_update)
        session_id = result.get("sessionId")
        if not session_id:
            raise DemoError(f"session/new answered without a sessionId: {json.dumps(result)}")
        model = model_of(result)
        out.line(f"← session {session_id}" + (f" (model: {model})" if model else ""))

        for text in prompts:
            out.line()
            out.line(style.bold("you> ") + text)
            rid = agent.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
            try:
                result = agent.wait_for(rid, "session/prompt", args.timeout, session.on_update)
            except TimeoutError:
                out.line(style.red(f"! no answer to session/prompt within {args.timeout:g} s; sending session/cancel"))
                agent.notify("session/cancel", {"sessionId": session_id})
                try:
                    result = agent.wait_for(rid, "session/prompt", 5.0, session.on_update)
                    out.line(f"[stopReason: {result.get('stopReason')}]")
                except TimeoutError:
                    pass
                raise DemoError(
                    f"the prompt turn timed out after {args.timeout:g} s (raise it with --timeout SECONDS)"
                ) from None
            note = session.usage_note()
            if note:
                out.line(style.dim(note))
            out.line(style.dim(f"[stopReason: {result.get('stopReason')}]"))
    except BaseException:
        agent.kill()
        raise

    out.line()
    code = agent.close()
    if code is None:
        agent.kill()
        raise DemoError("the agent did not exit within 10 s after its stdin was closed (it should exit on EOF)")
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise DemoError(f"the agent {how} after stdin was closed; look at its stderr above")
    out.line(style.dim("agent exited cleanly (code 0)"))
    return 0


def wait(agent: Agent, rid: int, method: str, timeout: float, on_update) -> dict:
    try:
        return agent.wait_for(rid, method, timeout, on_update)
    except TimeoutError:
        raise DemoError(f"no answer to {method} within {timeout:g} s (raise it with --timeout SECONDS)") from None


def main() -> int:
    args = parse_args(sys.argv[1:])
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
    style = Style(sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    out = Output(style)
    try:
        return run(args, out)
    except DemoError as err:
        out.end_thought()
        out.break_line()
        message = f"acp-demo: error: {err}"
        print(Style(sys.stderr.isatty() and not os.environ.get("NO_COLOR")).red(message), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        out.end_thought()
        out.break_line()
        print("acp-demo: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
