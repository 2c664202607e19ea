"""`workspace_run` runs a real program: a fake `deno` on PATH (spec 9.8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.core_lines import ORIGIN, LineClient

pytestmark = pytest.mark.process


def test_workspace_run(cc: LineClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = cc.result("open_workspace", {"path": str(tmp_path)}, origin=ORIGIN)["workspace"][
        "workspaceId"
    ]
    payload = {"workspaceId": ws, "script": "console.log(1)"}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cc.error("workspace_run", payload, origin=ORIGIN)["code"] == "DENO_RUNTIME_UNAVAILABLE"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    deno = bin_dir / "deno"
    deno.write_text(
        "#!/bin/sh\n"
        'if [ "$2" = slow ]; then sleep 2; fi\n'
        'echo "ran $2 in $(pwd)"\n'
        "echo oops >&2\n"
        "exit 4\n"
    )
    deno.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert cc.result("workspace_run", payload, origin=ORIGIN) == {
        "exitCode": 4,
        "stdout": f"ran console.log(1) in {tmp_path}\n",
        "stderr": "oops\n",
        "stdoutTruncated": False,
        "stderrTruncated": False,
    }
    slow = cc.error("workspace_run", {**payload, "script": "slow", "timeoutMs": 200}, origin=ORIGIN)
    assert slow["code"] == "DENO_EXECUTION_TIMEOUT"
