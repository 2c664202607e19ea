"""Real install/uninstall on this machine, into temporary homes only."""

from __future__ import annotations

import io
import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path, PurePath, PureWindowsPath

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID
from native_host.install import installer, locations
from native_host.install.locations import RegistryKey, Scope
from tests.conftest import FakeRegistry

REPO = Path(__file__).resolve().parent.parent
MANIFEST = f"{HOST_NAME}.json"
OFFICIAL = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"
DEV_ID = "abcdefghijklmnopabcdefghijklmnop"
DEV_ID2 = "ponmlkjihgfedcbaponmlkjihgfedcba"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "native_host", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under root with its mode and content (None for directories)."""
    result: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        content = None if path.is_dir() else path.read_bytes()
        result[str(path.relative_to(root))] = (stat.S_IMODE(info.st_mode), content)
    return result


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def manifest_at(user_data_dir: Path) -> Path:
    return user_data_dir / "NativeMessagingHosts" / MANIFEST


# --- through the real command line ---------------------------------------------------------
def test_user_data_dir_install_writes_manifest_and_launcher(
    tmp_path: Path, env: dict[str, str]
) -> None:
    profile = tmp_path / "profile"
    result = run_cli(env, "install", "--user-data-dir", str(profile))
    assert result.returncode == 0, result.stderr

    manifest_path = manifest_at(profile)
    launcher = tmp_path / "state" / "pedelec-native-host"
    manifest = json.loads(manifest_path.read_text())
    assert manifest == {
        "name": HOST_NAME,
        "description": "Pedelec native messaging host",
        "path": str(launcher),
        "type": "stdio",
        "allowed_origins": [OFFICIAL],
    }
    assert mode(manifest_path) == 0o644
    assert mode(launcher) == 0o755
    text = launcher.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert f"exec {sys.executable} -m native_host" in text or (
        f"exec '{sys.executable}' -m native_host" in text
    )
    assert f"launcher {launcher}" in result.stdout
    assert f"manifest {manifest_path}" in result.stdout
    assert (tmp_path / "state" / installer.RECORD_FILE).is_file()
    # Nothing landed in the default browser dirs.
    assert not (tmp_path / "home" / ".config").exists()


def test_launcher_runs_this_package(tmp_path: Path, env: dict[str, str]) -> None:
    assert run_cli(env, "install", "--user-data-dir", str(tmp_path / "p")).returncode == 0
    launcher = tmp_path / "state" / "pedelec-native-host"
    result = subprocess.run(
        [str(launcher), "version"], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pedelec-native-host ")


def test_default_selects_browsers_whose_user_data_dir_exists(
    home: Path, env: dict[str, str]
) -> None:
    (home / ".config" / "chromium").mkdir(parents=True)
    (home / ".config" / "BraveSoftware" / "Brave-Browser").mkdir(parents=True)
    result = run_cli(env, "install")
    assert result.returncode == 0, result.stderr
    assert manifest_at(home / ".config" / "chromium").is_file()
    assert manifest_at(home / ".config" / "BraveSoftware" / "Brave-Browser").is_file()
    assert not (home / ".config" / "google-chrome").exists()
    assert not (home / ".config" / "microsoft-edge").exists()
    assert "(chromium)" in result.stdout and "(brave)" in result.stdout


def test_no_installed_browser_is_an_error_naming_the_way_out(env: dict[str, str]) -> None:
    result = run_cli(env, "install")
    assert result.returncode == 1
    assert "no installed browser found" in result.stderr
    assert "--browser" in result.stderr and "--user-data-dir" in result.stderr


def test_explicit_browser_installs_even_without_its_dir(home: Path, env: dict[str, str]) -> None:
    result = run_cli(env, "install", "--browser", "edge", "chrome-beta")
    assert result.returncode == 0, result.stderr
    assert manifest_at(home / ".config" / "microsoft-edge").is_file()
    assert manifest_at(home / ".config" / "google-chrome-beta").is_file()
    bad = run_cli(env, "install", "--browser", "firefox")
    assert bad.returncode == 1 and "unknown browser firefox" in bad.stderr


def test_install_is_idempotent(tmp_path: Path, home: Path, env: dict[str, str]) -> None:
    (home / ".config" / "chromium").mkdir(parents=True)
    args = ("install", "--user-data-dir", str(tmp_path / "p"), "--extension-id", DEV_ID)
    assert run_cli(env, *args).returncode == 0
    before = snapshot(tmp_path)
    again = run_cli(env, *args)
    assert again.returncode == 0, again.stderr
    assert snapshot(tmp_path) == before
    assert all(line.startswith("unchanged") for line in again.stdout.splitlines()), again.stdout


def test_dry_run_writes_nothing(tmp_path: Path, home: Path, env: dict[str, str]) -> None:
    (home / ".config" / "chromium").mkdir(parents=True)
    before = snapshot(tmp_path)
    result = run_cli(env, "install", "--extension-id", DEV_ID, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert snapshot(tmp_path) == before
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("would write") for line in lines), lines
    assert any("config" in line and DEV_ID in line for line in lines)


def test_extension_ids_go_to_manifest_and_config(tmp_path: Path, env: dict[str, str]) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "config.json").write_text(json.dumps({"logLevel": "debug"}))
    profile = tmp_path / "p"
    result = run_cli(
        env, "install", "--user-data-dir", str(profile), "--extension-id", DEV_ID,
        "--extension-id", f"chrome-extension://{DEV_ID2}/",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    manifest = json.loads(manifest_at(profile).read_text())
    assert manifest["allowed_origins"] == [
        OFFICIAL,
        f"chrome-extension://{DEV_ID}/",
        f"chrome-extension://{DEV_ID2}/",
    ]
    config = json.loads((config_dir / "config.json").read_text())
    assert config == {"logLevel": "debug", "allowedExtensionIds": [DEV_ID, DEV_ID2]}

    # A later install without --extension-id keeps allowing the configured ids.
    second = run_cli(env, "install", "--user-data-dir", str(tmp_path / "q"))
    assert second.returncode == 0
    assert (
        json.loads(manifest_at(tmp_path / "q").read_text())["allowed_origins"]
        == (manifest["allowed_origins"])
    )


def test_invalid_extension_id_writes_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    before = snapshot(tmp_path)
    result = run_cli(
        env, "install", "--user-data-dir", str(tmp_path / "p"), "--extension-id", "xyz"
    )
    assert result.returncode == 1
    assert "not an extension id" in result.stderr
    assert snapshot(tmp_path) == before


def test_invalid_config_json_stops_install(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.json").write_text("{not json")
    result = run_cli(
        env, "install", "--user-data-dir", str(tmp_path / "p"), "--extension-id", DEV_ID
    )
    assert result.returncode == 1
    assert "config.json is not valid JSON" in result.stderr
    assert not (tmp_path / "p").exists()


def test_uninstall_leaves_nothing_it_wrote(tmp_path: Path, home: Path, env: dict[str, str]) -> None:
    (home / ".config" / "chromium").mkdir(parents=True)
    before = snapshot(tmp_path)
    install = run_cli(
        env, "install", "--user-data-dir", str(tmp_path / "p"), "--browser", "chromium",
        "--extension-id", DEV_ID,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    assert snapshot(tmp_path) != before
    dry = run_cli(env, "uninstall", "--dry-run")
    assert dry.returncode == 0 and "would remove" in dry.stdout
    assert (tmp_path / "state" / installer.RECORD_FILE).exists()
    result = run_cli(env, "uninstall")
    assert result.returncode == 0, result.stderr
    assert snapshot(tmp_path) == before
    assert "removed         manifest" in result.stdout
    again = run_cli(env, "uninstall")
    assert again.returncode == 0 and "nothing to uninstall" in again.stdout


def test_uninstall_keeps_what_it_did_not_write(tmp_path: Path, env: dict[str, str]) -> None:
    profile = tmp_path / "p"
    hosts = profile / "NativeMessagingHosts"
    hosts.mkdir(parents=True)
    other = hosts / "com.example.other.json"
    other.write_text('{"name": "com.example.other"}')
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "config.json").write_text(json.dumps({"allowedExtensionIds": [DEV_ID2]}))

    assert (
        run_cli(
            env, "install", "--user-data-dir", str(profile), "--extension-id", DEV_ID
        ).returncode
        == 0
    )
    # Someone edits the manifest after install: uninstall must not delete it.
    edited = manifest_at(profile)
    edited.write_text(edited.read_text().replace("Pedelec", "Edited"))

    result = run_cli(env, "uninstall")
    assert result.returncode == 0, result.stderr
    assert other.read_text() == '{"name": "com.example.other"}'
    assert "Edited" in edited.read_text()
    assert "changed since install" in result.stdout
    config = json.loads((config_dir / "config.json").read_text())
    assert config == {"allowedExtensionIds": [DEV_ID2]}
    assert not (tmp_path / "state" / "pedelec-native-host").exists()


def test_uninstall_restores_a_manifest_it_replaced(tmp_path: Path, env: dict[str, str]) -> None:
    profile = tmp_path / "p"
    original = b'{"name": "cc.isaaclin.pedelec", "path": "/opt/desktop/host"}\n'
    manifest_at(profile).parent.mkdir(parents=True)
    manifest_at(profile).write_bytes(original)
    assert run_cli(env, "install", "--user-data-dir", str(profile)).returncode == 0
    assert manifest_at(profile).read_bytes() != original
    result = run_cli(env, "uninstall")
    assert result.returncode == 0
    assert manifest_at(profile).read_bytes() == original
    assert "restored" in result.stdout


def test_host_path_override(tmp_path: Path, env: dict[str, str]) -> None:
    host = tmp_path / "bin" / "my-host"
    host.parent.mkdir()
    host.write_text("#!/bin/sh\n")
    host.chmod(0o644)
    profile = tmp_path / "p"
    refused = run_cli(env, "install", "--user-data-dir", str(profile), "--host-path", str(host))
    assert refused.returncode == 1 and "not executable" in refused.stderr
    host.chmod(0o755)
    result = run_cli(env, "install", "--user-data-dir", str(profile), "--host-path", str(host))
    assert result.returncode == 0, result.stderr
    assert json.loads(manifest_at(profile).read_text())["path"] == str(host)
    assert not (tmp_path / "state" / "pedelec-native-host").exists()


# --- in process: frozen builds, Windows with a fake registry ------------------------------
def make_env(
    platform: str, env: dict[str, str], home: PurePath, *, frozen: bool = False,
    registry: FakeRegistry | None = None, executable: str = sys.executable,
) -> tuple[installer.Environment, io.StringIO]:  # fmt: skip
    out = io.StringIO()
    fake = registry or FakeRegistry()
    ctx = installer.Environment(
        platform=platform, env=env, home=home, executable=executable, frozen=frozen,
        registry_factory=lambda: fake, out=out,
    )  # fmt: skip
    return ctx, out


def test_frozen_build_registers_its_own_executable(tmp_path: Path, env: dict[str, str]) -> None:
    exe = tmp_path / "dist" / "pedelec-native-host"
    ctx, _ = make_env("linux", env, Path(env["HOME"]), frozen=True, executable=str(exe))
    options = installer.InstallOptions(user_data_dirs=(tmp_path / "p",))
    plan = installer.install(options, ctx)
    assert plan.launcher is None
    assert json.loads(manifest_at(tmp_path / "p").read_text())["path"] == str(exe)


@pytest.fixture
def windows(tmp_path: Path, env: dict[str, str]) -> Iterator[tuple[dict[str, str], FakeRegistry]]:
    win_env = dict(env, LOCALAPPDATA=str(tmp_path / "local"), PROGRAMDATA=str(tmp_path / "pd"))
    yield win_env, FakeRegistry()


def test_windows_install_sets_keys_to_one_manifest(
    tmp_path: Path, windows: tuple[dict[str, str], FakeRegistry]
) -> None:
    win_env, registry = windows
    (tmp_path / "local" / "Google" / "Chrome" / "User Data").mkdir(parents=True)
    (tmp_path / "local" / "Microsoft" / "Edge" / "User Data").mkdir(parents=True)
    (tmp_path / "local" / "BraveSoftware" / "Brave-Browser" / "User Data").mkdir(parents=True)
    ctx, out = make_env(
        "win32", win_env, PurePath(win_env["HOME"]), registry=registry,
        executable=r"C:\Program Files\Python 3.11 (100%)\python.exe",
    )  # fmt: skip
    installer.install(installer.InstallOptions(), ctx)

    manifest = tmp_path / "local" / "pedelec-native-host" / MANIFEST
    tail = r"NativeMessagingHosts\cc.isaaclin.pedelec"
    chrome = RegistryKey("HKCU", rf"Software\Google\Chrome\{tail}")
    edge = RegistryKey("HKCU", rf"Software\Microsoft\Edge\{tail}")
    assert set(registry.values) == {chrome, edge}
    assert {Path(PureWindowsPath(v).as_posix()) for v in registry.values.values()} == {manifest}
    launcher = tmp_path / "state" / "pedelec-native-host.bat"
    assert launcher.read_bytes() == (
        b'@"C:\\Program Files\\Python 3.11 (100%%)\\python.exe" -m native_host %*\r\n'
    )
    assert json.loads(manifest.read_text())["path"].endswith("pedelec-native-host.bat")
    assert "(chrome, brave)" in out.getvalue()
    assert f"set             {chrome} = " in out.getvalue()

    installer.uninstall(ctx)
    assert registry.values == {}
    assert not manifest.exists() and not launcher.exists()


def test_windows_uninstall_restores_a_key_it_replaced_and_keeps_a_changed_one(
    tmp_path: Path, windows: tuple[dict[str, str], FakeRegistry]
) -> None:
    win_env, registry = windows
    tail = r"NativeMessagingHosts\cc.isaaclin.pedelec"
    chrome = RegistryKey("HKCU", rf"Software\Google\Chrome\{tail}")
    edge = RegistryKey("HKCU", rf"Software\Microsoft\Edge\{tail}")
    registry.values[chrome] = r"C:\Users\ann\.pedelec\cc.isaaclin.pedelec.json"
    ctx, out = make_env("win32", win_env, PurePath(win_env["HOME"]), registry=registry)
    installer.install(installer.InstallOptions(browsers=("chrome", "edge")), ctx)
    assert registry.values[chrome] != r"C:\Users\ann\.pedelec\cc.isaaclin.pedelec.json"
    registry.values[edge] = r"D:\elsewhere.json"  # rewritten by someone else since
    installer.uninstall(ctx)
    assert registry.values == {
        chrome: r"C:\Users\ann\.pedelec\cc.isaaclin.pedelec.json",
        edge: r"D:\elsewhere.json",
    }
    assert "not ours to delete" in out.getvalue()


def test_windows_rejects_user_data_dir(
    tmp_path: Path, windows: tuple[dict[str, str], FakeRegistry]
) -> None:
    win_env, registry = windows
    ctx, _ = make_env("win32", win_env, PurePath(win_env["HOME"]), registry=registry)
    with pytest.raises(installer.InstallError, match="registry"):
        installer.install(installer.InstallOptions(user_data_dirs=(tmp_path / "p",)), ctx)


def test_system_scope_plans_system_dirs(tmp_path: Path, env: dict[str, str]) -> None:
    ctx, _ = make_env("linux", env, Path(env["HOME"]))
    options = installer.InstallOptions(browsers=("chrome", "chromium"), scope=Scope.SYSTEM)
    plan = installer.plan_install(options, ctx)
    assert [str(w.path) for w in plan.manifests] == [
        f"/etc/opt/chrome/native-messaging-hosts/{MANIFEST}",
        f"/etc/chromium/native-messaging-hosts/{MANIFEST}",
    ]
    assert plan.launcher is not None
    assert str(plan.launcher.path) == "/usr/local/lib/pedelec-native-host/pedelec-native-host"


def test_macos_brave_plan_writes_both_dirs_once(tmp_path: Path, env: dict[str, str]) -> None:
    ctx, _ = make_env("darwin", env, PurePath("/Users/ann"))
    plan = installer.plan_install(installer.InstallOptions(browsers=("chrome", "brave")), ctx)
    support = "/Users/ann/Library/Application Support"
    assert {str(w.path): w.browsers for w in plan.manifests} == {
        f"{support}/Google/Chrome/NativeMessagingHosts/{MANIFEST}": ("chrome", "brave"),
        f"{support}/BraveSoftware/Brave-Browser/NativeMessagingHosts/{MANIFEST}": ("brave",),
    }


def test_template_matches_what_install_writes() -> None:
    template = (REPO / "manifests" / f"{HOST_NAME}.json.in").read_text()
    rendered = template.replace("@HOST_PATH@", "/opt/host")
    assert json.loads(rendered) == json.loads(installer.render_manifest("/opt/host", []))


def test_launcher_quoting_survives_spaces_and_quotes() -> None:
    text = installer.launcher_text(locations.Os.LINUX, "/opt/it's here/python").decode()
    assert """exec '/opt/it'"'"'s here/python' -m native_host "$@"\n""" in text
