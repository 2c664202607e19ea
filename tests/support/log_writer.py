"""A host's log writer in a process of its own, for the tests of the log's rotation across
processes (Linux and the Windows lane run it alike).

    python log_writer.py LOG_DIR [PADDING] TAG

Sets the log up as the host does and prints `ready`; then for each line `N` read from
stdin writes the next N lines `line TAG <n> <padding>` (PADDING characters, default 150)
through `native_host.logs` and prints `ok`; at EOF closes the log and prints `done`. The
process stays alive (as a host does) between batches, so the test decides whether hosts
write at once or in turns.
"""

from __future__ import annotations

import sys

from native_host import logs

PADDING = "x" * 150
"""Makes a line about 220 bytes: a few thousand lines pass the 1 MiB rotation size."""


def main() -> int:
    directory, tag = sys.argv[1], sys.argv[-1]
    padding = "x" * int(sys.argv[2]) if len(sys.argv) > 3 else PADDING
    if logs.setup("info", {"PEDELEC_NATIVE_HOST_LOG_DIR": directory}) is None:
        print("no log", flush=True)
        return 1
    log = logs.get("native_host.test")
    print("ready", flush=True)
    number = 0
    for request in sys.stdin:
        for _ in range(int(request)):
            log.info("line %s %d %s", tag, number, padding)
            number += 1
        print("ok", flush=True)
    logs.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
