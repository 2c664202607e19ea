"""The dev provider: a deterministic stand-in for an agent CLI (spec 9.8 item 5).

Commands (the first word of the message):
- plain text `T`          → reply `echo: T`
- `/tool NAME {json}`     → call NAME through the thread's tool bridge, reply
                            `echo: tool NAME returned <compact json>` (or `… failed: CODE`)
- `/fail`                 → the provider fails: `error` event, status `error`
- `/stream N [T]`         → the reply `echo: T` in N chunks
- `/sleep MS [T]`         → wait MS ms, then reply `echo: T` (`echo: slept MS ms` without T)

A turn runs on its own thread: `send_text` answers once the "process" has started.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from native_host.devcore.threads import DevThread
from native_host.devcore.wire import CoreError, dumps

PROGRAM = "pedelec-dev-provider"
MAX_STREAM_CHUNKS = 10_000


class _Cancelled(Exception):
    """The thread was ended (or the Core stopped) while the turn ran."""


def word_count(text: str) -> int:
    return len(text.split())


def split_chunks(text: str, count: int) -> list[str]:
    """`count` consecutive pieces of `text` (some empty when `count` exceeds its length)."""
    size = len(text)
    return [text[i * size // count : (i + 1) * size // count] for i in range(count)]


def provider_error(thread: DevThread) -> dict[str, Any]:
    """What a failed provider process reports (spec 3.9 example)."""
    return {
        "code": "PROVIDER_COMMAND_FAILED",
        "message": "provider command failed",
        "details": {"threadId": thread.thread_id, "processId": os.getpid(), "exitCode": 1},
    }


class Turn:
    """One user turn of the dev provider on one thread."""

    def __init__(self, thread: DevThread, text: str, op: str | None, stop: threading.Event):
        self.thread = thread
        self.text = text
        self.op = op
        self.stop = stop
        self.gen = thread.turn_gen

    def start(self) -> None:
        threading.Thread(
            target=self._run, name=f"devcore-turn-{self.thread.thread_id}", daemon=True
        ).start()

    def _check(self) -> None:
        """Call with the lock held: raise when the turn may no longer emit."""
        if self.thread.turn_gen != self.gen or self.stop.is_set():
            raise _Cancelled

    def _run(self) -> None:
        try:
            self._dispatch()
        except _Cancelled:
            return

    def _dispatch(self) -> None:
        thread = self.thread
        if not thread.current:
            with thread.lock:
                self._check()
                cwd = thread.workspace.path if thread.workspace else thread.assets_dir.parent
                thread.emit(
                    "provider_command_started",
                    processId=os.getpid(),
                    program=PROGRAM,
                    args=["--thread", thread.thread_id],
                    cwd=str(cwd),
                    prompt=self.text,
                )
        word, _, rest = self.text.strip().partition(" ")
        rest = rest.strip()
        if word == "/fail":
            self._fail()
        elif word == "/sleep":
            ms_text, _, tail = rest.partition(" ")
            ms = int(ms_text) if ms_text.isdigit() else 0
            if self.stop.wait(ms / 1000):
                raise _Cancelled
            self._reply(f"echo: {tail.strip()}" if tail.strip() else f"echo: slept {ms} ms")
        elif word == "/stream":
            count_text, _, tail = rest.partition(" ")
            count = int(count_text) if count_text.isdigit() else 1
            self._reply(f"echo: {tail.strip()}", max(1, min(count, MAX_STREAM_CHUNKS)))
        elif word == "/tool":
            name, _, raw_args = rest.partition(" ")
            self._reply(self._tool(name, raw_args.strip() or "{}"))
        else:
            self._reply(f"echo: {self.text}")

    def _tool(self, name: str, raw_args: str) -> str:
        """Call the tool like `pedelec-cli tool_call` would; failures become reply text."""
        try:
            args = json.loads(raw_args)
        except ValueError:
            args = None
        try:
            if not isinstance(args, dict):
                raise CoreError("TOOL_ARGS_INVALID", "tool args must be a JSON object")
            result = self.thread.call_tool(name, args, self.stop)
        except CoreError as exc:
            with self.thread.lock:
                self._check()
            return f"echo: tool {name} failed: {exc.code}"
        return f"echo: tool {name} returned {dumps(result).decode()}"

    def _reply(self, text: str, chunks: int = 1) -> None:
        thread = self.thread
        with thread.lock:
            self._check()
            pieces = split_chunks(text, chunks)
            if thread.current:
                for piece in pieces:
                    thread.emit("assistant_delta", self.op, text=piece)
                thread.emit("assistant_message", self.op, text=text)
                used = word_count(self.text) + word_count(text)
                thread.total_tokens = (thread.total_tokens or 0) + used
                thread.emit("usage_updated", totalTokens=thread.total_tokens)
            else:
                for piece in pieces:
                    thread.emit("assistant_message", text=piece)
            thread.prepared = True
            thread.set_status("idle", self.op)
            thread.complete_operation(True)

    def _fail(self) -> None:
        thread = self.thread
        error = provider_error(thread)
        with thread.lock:
            self._check()
            if thread.current:
                thread.emit(
                    "error", self.op, source="provider", provider=thread.provider, error=error
                )
                thread.set_status("error", self.op)
                thread.complete_operation(False, error)
            else:
                thread.set_status("error")
                thread.emit("error", source="provider", provider=thread.provider, error=error)


def prepare(thread: DevThread, op: str | None) -> bool:
    """prepare_thread's events, emitted at once; returns `alreadyPrepared`."""
    with thread.lock:
        already = thread.prepared
        thread.begin_operation("prepare", op)
        if not already:
            thread.set_status("running", op)
            thread.emit(
                "provider_session_id_updated", op, providerSessionId=f"dev-{thread.thread_id}"
            )
        if not already or thread.status != "idle":
            thread.set_status("idle", op)
        thread.prepared = True
        thread.complete_operation(True)
        return already
