"""The floor for any CPython host (run as `python -I -S echo_host.py <origin>`).

It relays each request to the Core named by runtime.json (in $PEDELEC_HOME, else
~/.pedelec) on a fresh connection and answers with the Core's result; a
`subscribe_thread` keeps its connection and forwards every later line as a frame (json
decode + encode). No validation, limits, policy or logs: only the bytes' path.
"""

import _thread
import json
import os
import socket
import struct
import sys

stdin, stdout, lock = sys.stdin.buffer, sys.stdout.buffer, _thread.allocate_lock()
home = os.environ.get("PEDELEC_HOME") or os.path.expanduser("~/.pedelec")
with open(home + "/runtime.json", "rb") as runtime:
    port = json.load(runtime)["port"]


def send(message):
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    with lock:
        stdout.write(struct.pack("<I", len(body)) + body)
        stdout.flush()


def pump(lines):
    for line in lines:
        send(json.loads(line))


while len(prefix := stdin.read(4)) == 4:
    request = json.loads(stdin.read(struct.unpack("<I", prefix)[0]))
    payload = {k: v for k, v in request.items() if k not in ("requestId", "type")}
    envelope = {"requestId": request["requestId"], "type": request["type"], "payload": payload}
    core = socket.create_connection(("127.0.0.1", port))
    core.sendall(json.dumps(envelope).encode() + b"\n")
    lines = core.makefile("rb")
    reply = json.loads(lines.readline())
    send({"type": "response", "requestId": request["requestId"], **reply})
    if request["type"] == "subscribe_thread":
        _thread.start_new_thread(pump, (lines,))
    else:
        core.close()
