"""Start a native messaging host the way Chrome on Windows does; runs on the lane's
Windows Python (tests/support/wine.py starts it under Wine).

    chrome_start.py (--registry NAME | --manifest PATH | --command LINE)
                    [--extension-id ID | --host-args JSON] [--no-stderr] [--timing]
                    [--env NAME=VALUE ...]

--registry: the manifest named by HKCU (then HKLM) Software\\Google\\Chrome\\
NativeMessagingHosts\\NAME, as Chrome looks it up: in each hive the 32-bit registry view,
then the 64-bit one, and HKLM alone when the machine's (else the user's) Chrome policy
sets NativeMessagingUserLevelHosts to 0 (Chromium's launch_context_win.cc, FindManifest
and GetManifestPath; its Windows policy loader reads SOFTWARE\\Policies\\Google\\Chrome,
HKLM before HKCU). --manifest: that manifest file.
Either way the command line is `cmd.exe /d /s /c ""<host path>" chrome-extension://<id>/
--parent-window=0"`, passed to CreateProcess verbatim, with pipes for stdin and stdout and
the host's folder as the current directory. --command: that exact command line instead
(Chrome's NativeHostsExecutablesLaunchDirectly starts an .exe host without cmd.exe).
--host-args: these arguments (a JSON list) after the host's path instead of Chrome's two
(tests of argument handling). --no-stderr: the host gets no valid stderr handle.
--timing: write `chrome_start: first bytes after <ms> ms` to stderr, the time from just
before CreateProcess to the host's first bytes on stdout (bench/windows.py).
--env: set in the host's environment (Wine passes no Unix HOME to Windows programs; a
user's Windows session may have one). This process's stdin is copied to the host's stdin
and the host's stdout to this process's stdout; when this stdout is closed, the host's
stdout pipe is closed too, as Chrome closes a port's; it exits with the host's status.
Standard library only: it runs on the bare embeddable interpreter.
"""

from __future__ import annotations

import _winapi
import argparse
import functools
import json
import msvcrt
import ntpath
import os
import subprocess
import sys
import threading
import time
import winreg
from collections.abc import Callable

CHROME_HOSTS_KEY = "Software\\Google\\Chrome\\NativeMessagingHosts\\"
POLICY_KEY = "SOFTWARE\\Policies\\Google\\Chrome"
USER_LEVEL_HOSTS = "NativeMessagingUserLevelHosts"
VIEWS = (winreg.KEY_WOW64_32KEY, winreg.KEY_WOW64_64KEY)
"""Chromium's GetManifestPath: "First check 32-bit registry and then try 64-bit"."""


def user_level_hosts_allowed() -> bool:
    """False when a Chrome policy (the machine's first) sets NativeMessagingUserLevelHosts
    to 0; Chrome reads a policy only where it is set, so unset means allowed."""
    for root in (winreg.HKEY_LOCAL_MACHINE, winreg.HKEY_CURRENT_USER):
        try:
            with winreg.OpenKey(root, POLICY_KEY) as key:
                value, kind = winreg.QueryValueEx(key, USER_LEVEL_HOSTS)
        except OSError:
            continue
        if kind == winreg.REG_DWORD:
            return value != 0
    return True


def manifest_from_registry(name: str) -> str:
    roots = [winreg.HKEY_LOCAL_MACHINE]
    if user_level_hosts_allowed():
        roots.insert(0, winreg.HKEY_CURRENT_USER)
    for root in roots:
        for view in VIEWS:
            try:
                access = winreg.KEY_QUERY_VALUE | view
                with winreg.OpenKey(root, CHROME_HOSTS_KEY + name, 0, access) as key:
                    value, _kind = winreg.QueryValueEx(key, "")
            except OSError:
                continue
            if not ntpath.isabs(value):  # Chrome's own words
                raise SystemExit("Path to native messaging host manifest must be absolute.")
            return str(value)
    raise SystemExit(f"Native messaging host {name} is not registered.")


def host_path(manifest: str) -> tuple[str, str]:
    """The host's path from the manifest (relative to the manifest's folder, as Chrome
    resolves it) and the first allowed origin's extension id."""
    with open(manifest, encoding="utf-8") as file:
        document = json.load(file)
    path = document["path"]
    if not ntpath.isabs(path):
        path = ntpath.join(ntpath.dirname(manifest), path)
    origin = document["allowed_origins"][0]
    return path, origin.removeprefix("chrome-extension://").rstrip("/")


def _inheritable(handle: int) -> int:
    current = _winapi.GetCurrentProcess()
    return _winapi.DuplicateHandle(current, handle, current, 0, True, _winapi.DUPLICATE_SAME_ACCESS)


ERROR_INTERNAL_ERROR = 1359
CREATE_ATTEMPTS = 3
"""Wine's CreateProcess of cmd.exe once failed with ERROR_INTERNAL_ERROR, before any host
code ran (1 start in some 250 of one .ci/run): Wine's, not the host's, so it is tried
again, at most this many times in all; any other failure is reported at once."""


def launch(command: str, cwd: str | None, stderr: bool) -> tuple[int, int, int]:
    """CreateProcess(`command`) with pipes for stdin and stdout; the process handle and
    this side's ends of the pipes (as C runtime fds)."""
    in_read, in_write = _winapi.CreatePipe(None, 0)
    out_read, out_write = _winapi.CreatePipe(None, 0)
    child_in, child_out = _inheritable(in_read), _inheritable(out_write)
    _winapi.CloseHandle(in_read)
    _winapi.CloseHandle(out_write)
    info = subprocess.STARTUPINFO()
    info.dwFlags = _winapi.STARTF_USESTDHANDLES
    info.hStdInput = child_in
    info.hStdOutput = child_out
    error = _inheritable(msvcrt.get_osfhandle(2)) if stderr else 0
    info.hStdError = error
    for attempt in range(CREATE_ATTEMPTS):
        try:
            process, thread, _pid, _tid = _winapi.CreateProcess(
                None, command, None, None, True, 0, None, cwd, info
            )
            break
        except OSError as exc:
            if (
                getattr(exc, "winerror", 0) != ERROR_INTERNAL_ERROR
                or attempt == CREATE_ATTEMPTS - 1
            ):
                raise
            time.sleep(0.2)
    _winapi.CloseHandle(thread)
    for handle in (child_in, child_out, *([error] if error else [])):
        _winapi.CloseHandle(handle)
    return (
        process,
        msvcrt.open_osfhandle(in_write, os.O_WRONLY | os.O_BINARY),
        msvcrt.open_osfhandle(out_read, os.O_RDONLY | os.O_BINARY),
    )


class Port:
    """This side's ends of the host's stdin and stdout: Chrome closes both when the
    extension's port goes away, and the host then reads EOF."""

    def __init__(self, to_host: int, from_host: int) -> None:
        self.to_host = to_host
        self.from_host = from_host
        self._lock = threading.Lock()
        self._closed: set[int] = set()

    def close(self, *fds: int) -> None:
        with self._lock:
            for fd in fds:
                if fd not in self._closed:
                    self._closed.add(fd)
                    os.close(fd)


def copy(
    source: int, target: int, on_eof: Callable[[], None], on_broken: Callable[[], None],
    started: float | None = None,
) -> None:  # fmt: skip
    """Copy until EOF (then `on_eof`) or until `target` breaks (then `on_broken`);
    `started` (a perf_counter): report when the first bytes came."""
    while True:
        try:
            data = os.read(source, 65536)
        except OSError:
            data = b""
        if not data:
            on_eof()
            return
        if started is not None:
            elapsed = (time.perf_counter() - started) * 1000
            sys.stderr.write(f"chrome_start: first bytes after {elapsed:.2f} ms\n")
            sys.stderr.flush()
            started = None
        try:
            while data:
                data = data[os.write(target, data) :]
        except OSError:
            on_broken()
            return


def quoted(args: list[str]) -> str:
    """Arguments on a command line as the C runtime splits it."""
    return subprocess.list2cmdline(args)


def main() -> int:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--registry")
    where.add_argument("--manifest")
    where.add_argument("--command")
    parser.add_argument("--extension-id")
    parser.add_argument("--host-args")
    parser.add_argument("--no-stderr", action="store_true")
    parser.add_argument("--timing", action="store_true")
    parser.add_argument("--env", action="append", default=[])
    options = parser.parse_args()
    for setting in options.env:
        name, _, value = setting.partition("=")
        os.environ[name] = value
    msvcrt.setmode(0, os.O_BINARY)
    msvcrt.setmode(1, os.O_BINARY)
    if options.command:
        command, cwd = options.command, None
    else:
        manifest = options.manifest or manifest_from_registry(options.registry)
        path, extension_id = host_path(manifest)
        extension_id = options.extension_id or extension_id
        args = f"chrome-extension://{extension_id}/ --parent-window=0"
        if options.host_args is not None:
            args = quoted(json.loads(options.host_args))
        tail = f" {args}" if args else ""
        command = f'cmd.exe /d /s /c ""{path}"{tail}"'
        cwd = ntpath.dirname(path)
    started = time.perf_counter()
    process, to_host, from_host = launch(command, cwd, stderr=not options.no_stderr)
    port = Port(to_host, from_host)
    disconnect = functools.partial(port.close, to_host, from_host)
    to = threading.Thread(
        target=copy, args=(0, to_host, functools.partial(port.close, to_host), lambda: None),
        daemon=True,
    )  # fmt: skip
    to.start()
    copy(from_host, 1, lambda: None, disconnect, started if options.timing else None)
    _winapi.WaitForSingleObject(process, _winapi.INFINITE)
    return _winapi.GetExitCodeProcess(process)


if __name__ == "__main__":
    sys.exit(main())
