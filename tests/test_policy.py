"""The origin policy store on real temp dirs (spec 7.11 c, d)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from native_host import policy as policy_module
from native_host.errors import (
    INVALID_ORIGIN,
    ORIGIN_NOT_APPROVED,
    STAGE_UPDATE_ORIGIN_POLICY,
    STAGE_VALIDATE_ORIGIN,
    STORAGE_ERROR,
    HostError,
)
from native_host.origins import InvalidOriginError
from native_host.policy import (
    PolicyStore,
    handle_host_local,
    host_local_request_error,
    validate_caller_origin,
)

pytestmark = pytest.mark.process

APP = "https://app.example.com"
T0 = 1_700_000_000_000


def write_policy(path: Path, **fields: Any) -> None:
    document = {"version": 1, "mode": "extension", "approved": [], "blocked": [], **fields}
    path.write_text(json.dumps(document), encoding="utf-8")


def read_policy(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result


def refusal(store: PolicyStore, origin: str) -> dict[str, Any]:
    with pytest.raises(HostError) as caught:
        store.check(origin)
    assert caught.value.code == ORIGIN_NOT_APPROVED
    assert caught.value.message == "caller origin is not approved"
    return caught.value.details


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "origins.json"


@pytest.fixture
def store(path: Path) -> PolicyStore:
    return PolicyStore(path, now_ms=lambda: T0)


def test_missing_file_means_extension_mode_without_pydantic(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from native_host.policy import PolicyStore;"
        f"s = PolicyStore(Path({str(tmp_path / 'origins.json')!r}));"
        "s.check('https://anything.example'); r = s.list();"
        "assert r == {'mode': 'extension', 'approved': [], 'blocked': []}, r;"
        "assert 'pydantic' not in sys.modules, 'pydantic imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_config_dir_is_a_missing_file(tmp_path: Path) -> None:
    store = PolicyStore(tmp_path / "not" / "there" / "origins.json")
    store.check(APP)
    assert store.problem() is None


def test_strict_mode_needs_approval(path: Path, store: PolicyStore) -> None:
    write_policy(path, mode="strict")
    assert refusal(store, APP) == {
        "stage": STAGE_VALIDATE_ORIGIN,
        "callerOrigin": APP,
        "reason": "not_approved",
    }
    assert store.approve("HTTPS://App.Example.com:443") == {"origin": APP, "approved": True}
    store.check(APP)
    refusal(store, "https://other.example.com")


def test_approve_is_idempotent_and_keeps_first_time(path: Path) -> None:
    times = iter([T0, T0 + 1, T0 + 2])
    store = PolicyStore(path, now_ms=lambda: next(times))
    store.approve(APP)
    store.approve(APP + ":443")
    store.approve("https://second.example")
    assert store.list()["approved"] == [
        {"origin": APP, "approvedAt": T0},
        {"origin": "https://second.example", "approvedAt": T0 + 1},
    ]


def test_revoke(path: Path, store: PolicyStore) -> None:
    write_policy(
        path, mode="strict", approved=[{"origin": "HTTPS://APP.example.com", "approvedAt": T0}]
    )
    store.check(APP)  # hand-written entries are normalised on load
    assert store.revoke(APP) == {"origin": APP, "revoked": True}
    assert read_policy(path)["approved"] == []
    assert refusal(store, APP)["reason"] == "not_approved"
    assert store.revoke(APP) == {"origin": APP, "revoked": False}


def test_extension_mode_ignores_approvals_but_applies_blocks(
    path: Path, store: PolicyStore
) -> None:
    write_policy(path, blocked=["https://*.example.com"])
    assert refusal(store, APP)["reason"] == "blocked"
    store.check("https://example.com")
    store.check("https://unrelated.example")


def test_block_takes_precedence_over_approval(path: Path, store: PolicyStore) -> None:
    write_policy(
        path,
        mode="strict",
        approved=[{"origin": APP, "approvedAt": T0}],
        blocked=["https://app.example.com"],
    )
    assert refusal(store, APP) == {
        "stage": STAGE_VALIDATE_ORIGIN,
        "callerOrigin": APP,
        "reason": "blocked",
    }


def test_block_unblock_and_mode(path: Path, store: PolicyStore) -> None:
    assert store.block("HTTPS://*.Evil.example") == {
        "pattern": "https://*.evil.example",
        "blocked": True,
    }
    store.block("https://*.evil.example")
    assert read_policy(path)["blocked"] == ["https://*.evil.example"]
    assert refusal(store, "https://a.evil.example")["reason"] == "blocked"
    with pytest.raises(InvalidOriginError):
        store.block("https://evil.example/")
    assert store.unblock("https://*.EVIL.example") == {
        "pattern": "https://*.evil.example",
        "unblocked": True,
    }
    assert store.unblock("https://*.evil.example")["unblocked"] is False
    store.check("https://a.evil.example")
    assert store.set_mode("strict") == {"mode": "strict"}
    assert read_policy(path)["mode"] == "strict"
    with pytest.raises(ValueError):
        store.set_mode("paranoid")


def test_invalid_block_entries_are_ignored_logged_and_kept(
    path: Path, store: PolicyStore, host_log: Callable[[], str]
) -> None:
    write_policy(path, blocked=["https://evil.example/", "https://bad.example"])
    store.check("https://evil.example")
    assert "https://evil.example/" in host_log()
    assert refusal(store, "https://bad.example")["reason"] == "blocked"
    store.approve(APP)
    assert read_policy(path)["blocked"] == ["https://evil.example/", "https://bad.example"]
    assert store.unblock("https://evil.example/")["unblocked"] is True
    assert read_policy(path)["blocked"] == ["https://bad.example"]


def test_rereads_when_the_file_changes(path: Path, store: PolicyStore) -> None:
    store.check(APP)
    write_policy(path, mode="strict")
    assert refusal(store, APP)["reason"] == "not_approved"
    # Same size, same inode, only the mtime differs.
    before = path.read_text(encoding="utf-8")
    write_policy(
        path, mode="strict", approved=[{"origin": "https://b.example.com", "approvedAt": 1}]
    )
    store.check("https://b.example.com")
    path.write_text(before.replace("[]", '[{"origin":"https://c.example.com","approvedAt":1}]', 1))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    refusal(store, "https://b.example.com")
    store.check("https://c.example.com")
    path.unlink()
    store.check(APP)


def test_same_size_rewrite_is_seen(path: Path, store: PolicyStore) -> None:
    write_policy(
        path, mode="strict", approved=[{"origin": "https://a.example.com", "approvedAt": 1}]
    )
    store.check("https://a.example.com")
    size = path.stat().st_size
    write_policy(
        path, mode="strict", approved=[{"origin": "https://b.example.com", "approvedAt": 1}]
    )
    stat = path.stat()
    assert stat.st_size == size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    refusal(store, "https://a.example.com")


def test_unchanged_file_is_parsed_once(
    path: Path, store: PolicyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_policy(path, blocked=["https://evil.example"])
    calls: list[bytes] = []
    real = policy_module._parse_policy

    def counting(raw: bytes, where: Path) -> policy_module.Policy:
        calls.append(raw)
        return real(raw, where)

    monkeypatch.setattr(policy_module, "_parse_policy", counting)
    for _ in range(50):
        store.check(APP)
    assert len(calls) == 1


def test_writes_are_atomic_and_leave_no_temp_files(path: Path, store: PolicyStore) -> None:
    for i in range(20):
        store.approve(f"https://site{i}.example")
    store.block("https://*.evil.example")
    store.revoke("https://site3.example")
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == [".origins.json.lock", "origins.json"]
    document = read_policy(path)
    assert document["version"] == 1
    assert len(document["approved"]) == 19


def test_bom_is_accepted(path: Path, store: PolicyStore) -> None:
    path.write_bytes(b'\xef\xbb\xbf{"mode":"strict"}')
    assert refusal(store, APP)["reason"] == "not_approved"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{\n  "mode": "strict",\n  "approved": [,]\n}', "line 3 column 16: not valid JSON"),
        (b"", "line 1 column 1: not valid JSON"),
        (b'{"mode": "paranoid"}', "mode: must be 'extension' or 'strict'"),
        (b'{"version": 2}', "version"),
        (b"[]", "top level"),
        (b'{"approved": [{"origin": "https://a.example"}]}', "approved.0.approvedAt"),
        (b'{"approved": [{"origin": "https://a.example", "approvedAt": "1"}]}', "approvedAt"),
        (b'{"blocked": [42]}', "blocked.0"),
        (b'{"mode": "strict"}\xff', "not UTF-8"),
    ],
)
def test_corrupt_file_fails_closed(
    path: Path, store: PolicyStore, content: bytes, why: str
) -> None:
    path.write_bytes(content)
    details = refusal(store, APP)
    assert details["reason"] == "policy_invalid"
    assert details["error"].startswith(f"{path}: ")
    assert why in details["error"]
    assert store.problem() == details["error"]


def test_corrupt_file_is_never_overwritten(path: Path, store: PolicyStore) -> None:
    content = b'{"mode": "strict",, }'
    path.write_bytes(content)
    changes: list[Callable[[], object]] = [
        lambda: store.approve(APP),
        lambda: store.revoke(APP),
        lambda: store.block("https://evil.example"),
        lambda: store.unblock("https://evil.example"),
        lambda: store.set_mode("extension"),
    ]
    for change in changes:
        with pytest.raises(HostError) as caught:
            change()
        assert caught.value.code == STORAGE_ERROR
        assert caught.value.details["stage"] == STAGE_UPDATE_ORIGIN_POLICY
        assert "line 1 column 19" in caught.value.details["error"]
        assert "delete it" in caught.value.details["error"]
    assert path.read_bytes() == content
    with pytest.raises(HostError) as listing:
        store.list()
    assert listing.value.code == STORAGE_ERROR
    assert str(path) in listing.value.details["error"]


def test_unreadable_file_fails_closed(path: Path, store: PolicyStore) -> None:
    path.mkdir()
    details = refusal(store, APP)
    assert details["reason"] == "policy_invalid"
    assert "is not a regular file" in details["error"]


def test_fixed_file_is_picked_up(path: Path, store: PolicyStore) -> None:
    path.write_text("{", encoding="utf-8")
    refusal(store, APP)
    write_policy(path)
    store.check(APP)


def test_storage_error_when_the_dir_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    store = PolicyStore(blocker / "config" / "origins.json")
    store.check(APP)  # nothing to read: defaults
    with pytest.raises(HostError) as caught:
        store.approve(APP)
    error = caught.value.to_error()
    assert error["code"] == STORAGE_ERROR
    assert error["message"] == "origin policy could not be saved"
    assert error["details"]["stage"] == STAGE_UPDATE_ORIGIN_POLICY
    assert "Not a directory" in error["details"]["error"]


def full_policy(path: Path) -> list[str]:
    """A strict policy in the store's own format, thousands of approvals long, less than
    one approval short of the size the host reads; returns the approved origins."""

    def text(count: int) -> str:
        approved = [
            {"origin": f"https://a{i:06d}.example.com", "approvedAt": T0} for i in range(count)
        ]
        document = {"version": 1, "mode": "strict", "approved": approved, "blocked": []}
        return json.dumps(document, indent=2) + "\n"

    entry = len(text(2)) - len(text(1))
    count = (policy_module.MAX_POLICY_BYTES - len(text(0))) // entry
    written = text(count)
    assert policy_module.MAX_POLICY_BYTES - entry < len(written) <= policy_module.MAX_POLICY_BYTES
    path.write_text(written, encoding="utf-8")
    return [f"https://a{i:06d}.example.com" for i in range(count)]


def test_a_policy_never_grows_past_what_the_host_reads(path: Path, store: PolicyStore) -> None:
    """Thousands of approvals: the one that would make the file too large to read is
    refused with a reason, and the file stays the one every page is checked against
    (written, it would have failed closed for all of them)."""
    origins = full_policy(path)
    assert len(origins) > 10_000
    before = path.read_bytes()
    for attempt in (lambda: store.approve("https://one-more.example.com"),
                    lambda: store.block("https://*." + "b" * 60 + ".example.com")):  # fmt: skip
        with pytest.raises(HostError) as caught:
            attempt()
        error = caught.value.to_error()
        assert (error["code"], error["details"]["stage"]) == (STORAGE_ERROR, "update_origin_policy")
        assert "revoke or unblock origins first" in error["details"]["error"]
        assert path.read_bytes() == before
    store.check(origins[-1])
    assert store.problem() is None
    assert store.revoke(origins[0]) == {"origin": origins[0], "revoked": True}
    store.approve("https://one-more.example.com")
    store.check("https://one-more.example.com")


def test_concurrent_approvals_from_threads_lose_nothing(path: Path) -> None:
    shared = PolicyStore(path)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def approve_many(worker: int) -> None:
        own = PolicyStore(path)  # half share one store, half bring their own
        store = shared if worker % 2 else own
        barrier.wait()
        try:
            for i in range(15):
                store.approve(f"https://w{worker}-{i}.example")
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=approve_many, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(PolicyStore(path).list()["approved"]) == 8 * 15


def test_concurrent_approvals_from_processes_lose_nothing(path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from native_host.policy import PolicyStore;"
        "s = PolicyStore(Path(sys.argv[1]));"
        "[s.approve(f'https://p{sys.argv[2]}-{i}.example') for i in range(20)];"
        "s.block(f'https://*.p{sys.argv[2]}.example')"
    )
    workers = [subprocess.Popen([sys.executable, "-c", code, str(path), str(n)]) for n in range(5)]
    assert [worker.wait(timeout=60) for worker in workers] == [0] * 5
    listing = PolicyStore(path).list()
    assert len(listing["approved"]) == 5 * 20
    assert len(listing["blocked"]) == 5


# --- relay helpers and host-local requests ---------------------------------------------


def test_validate_caller_origin(path: Path, store: PolicyStore) -> None:
    assert validate_caller_origin("HTTPS://App.Example.com:443", store) == APP
    with pytest.raises(HostError) as caught:
        validate_caller_origin("http://evil.example.com", store)
    assert caught.value.code == INVALID_ORIGIN
    assert caught.value.details["callerOrigin"] == "http://evil.example.com"
    assert "http is only allowed" in caught.value.details["reason"]
    write_policy(path, blocked=[APP])
    with pytest.raises(HostError) as blocked:
        validate_caller_origin(APP + ":443", store)
    assert blocked.value.details == {
        "stage": STAGE_VALIDATE_ORIGIN,
        "callerOrigin": APP,
        "reason": "blocked",
    }


def test_host_local_requests(path: Path, store: PolicyStore) -> None:
    approve = {"type": "approve_origin", "requestId": "r1", "origin": "HTTPS://App.Example.com"}
    assert handle_host_local(approve, store) == {"origin": APP, "approved": True}
    assert handle_host_local({"type": "list_origin_approvals", "requestId": "r2"}, store) == {
        "mode": "extension",
        "approved": [{"origin": APP, "approvedAt": T0}],
        "blocked": [],
    }
    revoke = {"type": "revoke_origin", "requestId": "r3", "origin": APP}
    assert handle_host_local(revoke, store) == {"origin": APP, "revoked": True}
    assert handle_host_local(revoke, store) == {"origin": APP, "revoked": False}


@pytest.mark.parametrize(
    ("message", "reason_part"),
    [
        ({"type": "approve_origin"}, "required"),
        ({"type": "revoke_origin"}, "required"),
        ({"type": "approve_origin", "origin": None}, "string"),
        ({"type": "approve_origin", "origin": "https://app.example.com/"}, "path"),
        ({"type": "revoke_origin", "origin": "null"}, "null"),
    ],
)
def test_host_local_bad_origin(
    path: Path, store: PolicyStore, message: dict[str, Any], reason_part: str
) -> None:
    with pytest.raises(HostError) as caught:
        handle_host_local(message, store)
    assert caught.value.code == INVALID_ORIGIN
    assert caught.value.details["stage"] == STAGE_VALIDATE_ORIGIN
    assert reason_part in caught.value.details["reason"]
    assert not path.exists()


def test_host_local_request_error() -> None:
    assert host_local_request_error(APP).to_error() == {
        "code": ORIGIN_NOT_APPROVED,
        "message": "caller origin is not approved",
        "details": {
            "stage": STAGE_VALIDATE_ORIGIN,
            "reason": "host_local_request",
            "callerOrigin": APP,
        },
    }
    assert "callerOrigin" not in host_local_request_error(7).details
