"""The start-up floor for any CPython host (run as `python -I -S relay_host.py <origin>`).

Per request it reads runtime.json (in $PEDELEC_HOME, else ~/.pedelec), sends the request
to the Core on a fresh `_socket` connection and answers with the Core's line. Only
built-in modules besides json (`_socket`, `os`, `struct`, `sys`), no threads, no streams,
and nothing checked: what a relay cannot do without.
"""

import _socket
import json
import os
import struct
import sys

stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
home = os.environ.get("PEDELEC_HOME") or os.path.expanduser("~/.pedelec")
while len(prefix := stdin.read(4)) == 4:
    request = json.loads(stdin.read(struct.unpack("<I", prefix)[0]))
    with open(home + "/runtime.json", "rb") as runtime:
        port = json.load(runtime)["port"]
    payload = {k: v for k, v in request.items() if k not in ("requestId", "type")}
    envelope = {"requestId": request["requestId"], "type": request["type"], "payload": payload}
    core = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    core.connect(("127.0.0.1", port))
    core.sendall(json.dumps(envelope).encode() + b"\n")
    line = b""
    while not line.endswith(b"\n") and (chunk := core.recv(65536)):
        line += chunk
    core.close()
    body = json.dumps({"type": "response", **json.loads(line)}).encode()
    stdout.write(struct.pack("<I", len(body)) + body)
    stdout.flush()
