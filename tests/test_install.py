"""Real install/uninstall on this machine, into temporary homes only.

The suite runs from an editable checkout, which `install` refuses to bake into a launcher
unless `--force` is given (tested below), so CLI installs here pass `--force`.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path, PurePath, PureWindowsPath

import pytest

from native_host import HOST_NAME, OFFICIAL_EXTENSION_ID, startimage
from native_host.install import installer, interpreter, locations, uninstall
from native_host.install.locations import RegistryKey, RegistryView, Scope
from tests.support.machine import install_cli
from tests.support.registry import FakeRegistry

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent
MANIFEST = f"{HOST_NAME}.json"
OFFICIAL = f"chrome-extension://{OFFICIAL_EXTENSION_ID}/"
DEV_ID = "abcdefghijklmnopabcdefghijklmnop"
DEV_ID2 = "ponmlkjihgfedcbaponmlkjihgfedcba"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def run_cli(
    env: dict[str, str], *args: str, umask: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The command line as a user runs it; `install` gets --force (editable checkout)."""
    argv = [*args, "--force"] if args and args[0] == "install" else list(args)
    return subprocess.run(
        [sys.executable, "-m", "native_host", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        umask=-1 if umask is None else umask,
    )


def changes(stdout: str) -> list[str]:
    """Output lines but the --force warning about the editable checkout and the last
    line, the next step."""
    return [line for line in stdout.splitlines() if not line.startswith(("warning", "next:"))]


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
    assert mode(manifest_path) == 0o600  # user scope: only the user's browser reads it
    assert mode(launcher) == 0o700
    assert mode(manifest_path.parent) == 0o700
    text = launcher.read_text()
    if " " in sys.executable or len(sys.executable) > 120:  # no `#!` line can carry it
        assert text.startswith("#!/bin/sh\n")
        assert f"{sys.executable}' -I -c 'import sys; from native_host.cli" in text
    else:  # the kernel starts the interpreter itself: no shell
        assert text.startswith(f"#!{sys.executable} -I\n")
        image = tmp_path / "state" / "pedelec-native-host.image"
        assert text.endswith(
            f"\nimport sys; from native_host.cli import start; sys.exit(start({str(image)!r}))\n"
        )
        assert mode(image) == 0o600 and f"start image {image}" in result.stdout
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


def test_launcher_ignores_a_planted_pythonpath_and_working_directory(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """`python -I`: what the browser's environment or cwd holds cannot replace the host."""
    assert run_cli(env, "install", "--user-data-dir", str(tmp_path / "p")).returncode == 0
    planted = tmp_path / "planted"
    (planted / "native_host").mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    payload = f"open({str(marker)!r}, 'w').close()\n"
    (planted / "native_host" / "__init__.py").write_text(payload)
    (planted / "native_host" / "__main__.py").write_text(payload)
    launcher = tmp_path / "state" / "pedelec-native-host"
    result = subprocess.run(
        [str(launcher), "version"],
        env={**env, "PYTHONPATH": str(planted), "PYTHONSTARTUP": str(planted / "x.py")},
        cwd=planted,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pedelec-native-host ")
    assert not marker.exists()


def test_launcher_ignores_a_package_planted_beside_it(tmp_path: Path, env: dict[str, str]) -> None:
    """The launcher is a script Python runs: its own directory is not on `sys.path`, so a
    `native_host` planted next to it cannot replace the host."""
    assert run_cli(env, "install", "--user-data-dir", str(tmp_path / "p")).returncode == 0
    launcher = tmp_path / "state" / "pedelec-native-host"
    marker = tmp_path / "planted-ran"
    payload = f"open({str(marker)!r}, 'w').close()\n"
    for name in ("native_host", "sys"):
        (launcher.parent / name).mkdir()
        (launcher.parent / name / "__init__.py").write_text(payload)
    result = subprocess.run(
        [str(launcher), "version"], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pedelec-native-host ")
    assert not marker.exists()


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


def test_no_installed_browser_is_an_error_naming_the_way_out(
    env: dict[str, str], tmp_path: Path
) -> None:
    """One short line saying what to pass; every folder and program looked for under
    --verbose (on a machine with no browser program: its system folders are empty)."""
    rows = locations.rows_for("linux")
    machine = tmp_path / "machine"
    machine.mkdir()
    result = install_cli(env, machine, "install", "--force")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: no installed browser found: pass --browser NAME, --browser all or "
        f"--user-data-dir DIR (--verbose lists the {len(rows)} browsers' folders and programs)"
    ]
    verbose = install_cli(env, machine, "install", "--force", "--verbose")
    assert verbose.returncode == 1
    first, *looked = verbose.stderr.splitlines()
    assert first.startswith("error: no installed browser found: pass --browser NAME")
    home = PurePath(env["HOME"])
    assert [line.split(",")[0] for line in looked] == [
        f"  {r.name}: {locations.row_user_data_dir(r, env, home)}" for r in rows
    ]
    assert (
        f"  chromium: {home}/.config/chromium, {machine}/usr/lib/chromium/chromium"
        in looked[[r.name for r in rows].index("chromium")]
    )
    assert "  chromium-flatpak: " in verbose.stderr and "  chromium-snap: " in verbose.stderr


def test_explicit_browser_installs_even_without_its_dir(home: Path, env: dict[str, str]) -> None:
    result = run_cli(env, "install", "--browser", "edge", "chrome-beta")
    assert result.returncode == 0, result.stderr
    assert manifest_at(home / ".config" / "microsoft-edge").is_file()
    assert manifest_at(home / ".config" / "google-chrome-beta").is_file()
    bad = run_cli(env, "install", "--browser", "firefox")
    assert bad.returncode == 2 and "unknown browser firefox" in bad.stderr  # a usage error


def test_browser_all_registers_every_native_browser_and_says_why_not_the_others(
    home: Path, env: dict[str, str]
) -> None:
    result = run_cli(env, "install", "--browser", "all")
    assert result.returncode == 0, result.stderr
    for subdir in ("google-chrome", "chromium", "microsoft-edge", "vivaldi"):
        assert manifest_at(home / ".config" / subdir).is_file()
    skipped = [line for line in result.stdout.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 10  # seven Flatpak rows (no --flatpak), three Snap rows
    assert not (home / ".var").exists() and not (home / "snap").exists()


def test_install_is_idempotent(tmp_path: Path, home: Path, env: dict[str, str]) -> None:
    (home / ".config" / "chromium").mkdir(parents=True)
    args = ("install", "--user-data-dir", str(tmp_path / "p"), "--extension-id", DEV_ID)
    assert run_cli(env, *args).returncode == 0
    before = snapshot(tmp_path)
    again = run_cli(env, *args)
    assert again.returncode == 0, again.stderr
    assert snapshot(tmp_path) == before
    assert all(line.startswith("unchanged") for line in changes(again.stdout)), again.stdout


def test_dry_run_writes_nothing(tmp_path: Path, home: Path, env: dict[str, str]) -> None:
    (home / ".config" / "chromium").mkdir(parents=True)
    before = snapshot(tmp_path)
    result = run_cli(env, "install", "--extension-id", DEV_ID, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert snapshot(tmp_path) == before
    lines = changes(result.stdout)
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
    assert result.returncode == 2  # a bad option value is a usage error
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
    assert refused.returncode == 2 and "not executable" in refused.stderr
    host.chmod(0o755)
    result = run_cli(env, "install", "--user-data-dir", str(profile), "--host-path", str(host))
    assert result.returncode == 0, result.stderr
    assert json.loads(manifest_at(profile).read_text())["path"] == str(host)
    assert not (tmp_path / "state" / "pedelec-native-host").exists()


# --- in process: frozen builds, Windows with a fake registry ------------------------------
def kept_interpreter(executable: str, env: object) -> interpreter.Interpreter:
    """An interpreter in a venv that stays: what `pipx install` gives."""
    site = "/opt/venvs/pedelec/lib/python3.11/site-packages"
    return interpreter.Interpreter(executable, site, (site,), None, ("/nonexistent/tmp",), {})


def make_env(
    platform: str, env: dict[str, str], home: PurePath, *, frozen: bool = False,
    registry: FakeRegistry | None = None, executable: str = sys.executable,
) -> tuple[installer.Environment, io.StringIO]:  # fmt: skip
    out = io.StringIO()
    fake = registry or FakeRegistry()
    ctx = installer.Environment(
        platform=platform, env=env, home=home, executable=executable, frozen=frozen,
        registry_factory=lambda: fake, out=out, describe_interpreter=kept_interpreter,
    )  # fmt: skip
    return ctx, out


def test_frozen_build_registers_its_own_executable(tmp_path: Path, env: dict[str, str]) -> None:
    exe = tmp_path / "dist" / "pedelec-native-host"
    ctx, _ = make_env("linux", env, Path(env["HOME"]), frozen=True, executable=str(exe))
    options = installer.InstallOptions(user_data_dirs=(tmp_path / "p",))
    plan = installer.install(options, ctx)
    assert plan.launcher is None
    assert json.loads(manifest_at(tmp_path / "p").read_text())["path"] == str(exe)


def test_a_start_image_that_cannot_be_built_leaves_a_launcher_without_one(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The image only makes starts faster: without it the launcher imports as before."""

    def cannot(python: str, options: object, paths: object) -> bytes:
        raise OSError(f"{python} exited with status 1: no such module")

    ctx, out = make_env("linux", env, Path(env["HOME"]))
    ctx = dataclasses.replace(ctx, build_image=cannot)
    plan = installer.install(installer.InstallOptions(user_data_dirs=(tmp_path / "p",)), ctx)
    assert plan.image is None and plan.launcher is not None
    assert "no start image, so every start imports the usual way: " in out.getvalue()
    text = plan.launcher.path.read_text()
    assert "from native_host.cli import main; sys.exit(main())" in text
    assert not (plan.launcher.path.parent / startimage.IMAGE_NAME).exists()


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
    site = "/opt/venvs/pedelec/lib/python3.11/site-packages"  # kept_interpreter's
    assert launcher.read_bytes() == (
        b'@"C:\\Program Files\\Python 3.11 (100%%)\\python.exe" -I -S -c '
        b"\"import sys; sys.path += ['" + site.encode() + b"']; "
        b'from native_host.cli import main; sys.exit(main())" %*\r\n'
    )
    assert installer.launcher_interpreter(launcher.read_text()) == (
        r"C:\Program Files\Python 3.11 (100%)\python.exe"
    )
    assert json.loads(manifest.read_text())["path"].endswith("pedelec-native-host.bat")
    assert "(chrome, brave)" in out.getvalue()
    assert f"set             {chrome} = " in out.getvalue()

    uninstall.uninstall(ctx)
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
    ctx, out = make_env("win32", win_env, PureWindowsPath(r"C:\Users\ann"), registry=registry)
    installer.install(installer.InstallOptions(browsers=("chrome", "edge")), ctx)
    assert registry.values[chrome] != r"C:\Users\ann\.pedelec\cc.isaaclin.pedelec.json"
    desktop_note = [line for line in out.getvalue().splitlines() if line.startswith("note")]
    assert len(desktop_note) == 1 and str(chrome) in desktop_note[0]
    assert "Pedelec Desktop's registration" in desktop_note[0]
    assert "next foreground start" in desktop_note[0]
    registry.values[edge] = r"D:\elsewhere.json"  # rewritten by someone else since
    uninstall.uninstall(ctx)
    assert registry.values == {
        chrome: r"C:\Users\ann\.pedelec\cc.isaaclin.pedelec.json",
        edge: r"D:\elsewhere.json",
    }
    assert "not ours to delete" in out.getvalue()


TAIL = r"NativeMessagingHosts\cc.isaaclin.pedelec"


def test_windows_hkcu_install_sets_one_key_for_both_views(
    tmp_path: Path, windows: tuple[dict[str, str], FakeRegistry]
) -> None:
    """HKCU\\Software is shared by both views: Chrome's 32-bit-first read finds our value,
    and nothing is written or recorded twice."""
    win_env, registry = windows
    ctx, out = make_env("win32", win_env, PureWindowsPath(r"C:\Users\ann"), registry=registry)
    installer.install(installer.InstallOptions(browsers=("chrome",)), ctx)
    chrome = RegistryKey("HKCU", rf"Software\Google\Chrome\{TAIL}")
    value = registry.get_default(chrome)
    assert value is not None
    assert registry.get_default(chrome.in_view(RegistryView.WOW64_32)) == value
    assert "32-bit view" not in out.getvalue()
    record = json.loads(installer.record_path(win_env).read_text())
    assert [(e["hive"], e["view"]) for e in record["registry"]] == [("HKCU", "64")]


def test_windows_hklm_install_takes_over_a_shadowing_32_bit_key_and_uninstall_restores_it(
    tmp_path: Path, windows: tuple[dict[str, str], FakeRegistry]
) -> None:
    """HKLM\\SOFTWARE has a key per view and Chromium reads the 32-bit one (WOW6432Node)
    first: a stale value there would win over the 64-bit key install writes."""
    win_env, registry = windows
    chrome64 = RegistryKey("HKLM", rf"Software\Google\Chrome\{TAIL}")
    chrome32 = chrome64.in_view(RegistryView.WOW64_32)
    stale = r"C:\Program Files (x86)\Old\cc.isaaclin.pedelec.json"
    registry.set_default(chrome32, stale)
    ctx, out = make_env("win32", win_env, PureWindowsPath(r"C:\Users\ann"), registry=registry)
    options = installer.InstallOptions(browsers=("chrome",), scope=Scope.SYSTEM)

    installer.install(dataclasses.replace(options, dry_run=True), ctx)
    assert f"would set       {chrome32} = " in out.getvalue()
    assert registry.values == {chrome32: stale}

    installer.install(options, ctx)
    ours = registry.get_default(chrome64)
    assert ours is not None and ours.endswith(r"pedelec-native-host\cc.isaaclin.pedelec.json")
    assert registry.get_default(chrome32) == ours
    assert f"set             {chrome32} = {ours}" in out.getvalue()

    out.truncate(0)
    installer.install(options, ctx)
    assert f"unchanged       {chrome64} = " in out.getvalue()
    assert "set " not in out.getvalue()  # the 32-bit key now reads ours: not written again

    uninstall.uninstall(ctx)
    assert registry.values == {chrome32: stale}


@pytest.mark.parametrize(("platform", "rewritten"), [("win32", False), ("linux", True)])
def test_reinstall_with_other_mode_bits_is_unchanged_only_where_modes_mean_nothing(
    tmp_path: Path, env: dict[str, str], platform: str, rewritten: bool
) -> None:
    """Windows reports 0o666 for every writable file whatever install asked for: an
    unchanged install must say "unchanged" there, and still repair a chmod on POSIX."""
    win_env = dict(env, LOCALAPPDATA=str(tmp_path / "local"), PROGRAMDATA=str(tmp_path / "pd"))
    (tmp_path / "local" / "Google" / "Chrome" / "User Data").mkdir(parents=True)
    (Path(env["HOME"]) / ".config" / "google-chrome").mkdir(parents=True)
    ctx, out = make_env(platform, win_env, PurePath(env["HOME"]))
    plan = installer.install(installer.InstallOptions(browsers=("chrome",)), ctx)
    written = [w.path for w in plan.manifests] + ([plan.launcher.path] if plan.launcher else [])
    assert len(written) == 2
    for path in written:
        path.chmod(0o666)  # what st_mode reads on Windows
    out.seek(0)
    out.truncate()
    installer.install(installer.InstallOptions(browsers=("chrome",)), ctx)
    lines = [
        line for line in out.getvalue().splitlines() if "manifest" in line or "launcher" in line
    ]
    assert len(lines) == 2, out.getvalue()
    verb = "wrote" if rewritten else "unchanged"
    assert all(line.startswith(verb) for line in lines), out.getvalue()


def test_windows_rejects_user_data_dir(
    tmp_path: Path, windows: tuple[dict[str, str], FakeRegistry]
) -> None:
    win_env, registry = windows
    ctx, _ = make_env("win32", win_env, PurePath(win_env["HOME"]), registry=registry)
    with pytest.raises(installer.UsageError, match="registry"):
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
    assert text.startswith("#!/bin/sh\n")
    assert """exec '/opt/it'"'"'s here/python' -I -c 'import sys""" in text
    assert installer.launcher_interpreter(text) == "/opt/it's here/python"
    assert installer.launcher_interpreter("#!/bin/sh\nexec /usr/bin/other\n") is None
    assert installer.launcher_interpreter("#!/usr/bin/python3 -I\nprint(1)\n") is None


def test_launcher_names_its_interpreter_on_the_shebang_line_when_it_fits() -> None:
    site = "/home/u/.local/share/pedelec/venv/lib/python3.11/site-packages"
    python = "/home/u/.local/share/pedelec/venv/bin/python"
    text = installer.launcher_text(locations.Os.DARWIN, python, [site, "/it's"]).decode()
    first, *_ = text.splitlines()
    assert first == f"#!{python} -IS"  # one word: Linux passes it as one argument
    assert text.endswith(
        f'import sys; sys.path += [{site!r}, "/it\'s"]; '
        + ("from native_host.cli import main; sys.exit(main())\n")
    )
    assert installer.launcher_interpreter(text) == python
    too_long = "/opt/" + "p" * 120 + "/python"
    text = installer.launcher_text(locations.Os.LINUX, too_long).decode()
    assert text.startswith("#!/bin/sh\n")
    assert installer.launcher_interpreter(text) == too_long


PROFILE = "C:\\Users\\O'Brien Jos\u00e9"
"""A profile whose path holds an apostrophe and a letter outside ASCII."""


def test_windows_launcher_under_an_odd_profile_is_ascii_and_relative_to_itself() -> None:
    """cmd.exe reads a batch file in the OEM code page, and a `"` inside the code string
    ends the `-c` argument: the batch file names the venv relative to `%~dp0` and the
    site directories as hex-encoded strings, all in ASCII."""
    python = PROFILE + r"\venv\Scripts\python.exe"
    site = PROFILE + r"\venv\Lib\site-packages"
    folder = PROFILE + r"\AppData\Local\pedelec-native-host"
    data = installer.launcher_text(locations.Os.WIN32, python, [site], folder, lambda _: None)
    text = data.decode("ascii")
    assert text.startswith('@"%~dp0..\\..\\..\\venv\\Scripts\\python.exe" -I -S -c "')
    code = text.split(' -c "', 1)[1].rsplit('" %*', 1)[0]
    assert '"' not in code and site.encode().hex() in code
    assert installer.launcher_interpreter(text, folder) == python


def test_windows_launcher_falls_back_to_the_short_name_or_refuses() -> None:
    python = PROFILE + r"\venv\Scripts\python.exe"
    elsewhere = r"D:\hosts"
    short = r"C:\Users\OBRIEN~1\venv\Scripts\python.exe"
    data = installer.launcher_text(locations.Os.WIN32, python, (), elsewhere, lambda _: short)
    assert data.decode("ascii").startswith(f'@"{short}" -I -c "')
    with pytest.raises(ValueError, match="ASCII"):
        installer.launcher_text(locations.Os.WIN32, python, (), elsewhere, lambda _: None)


# --- the interpreter baked into the launcher (issue 12) ---------------------------------
def test_install_from_an_editable_checkout_refuses_without_force(
    tmp_path: Path, env: dict[str, str]
) -> None:
    before = snapshot(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "native_host", "install", "--user-data-dir", str(tmp_path / "p")],
        env=env, capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 1
    # the first risk found: the checkout, unless the interpreter itself sits in a temp dir
    assert (
        f"native_host ({REPO})" in result.stderr and "source checkout" in result.stderr
    ) or "is in a temporary directory" in result.stderr
    assert "pipx install" in result.stderr and "uv tool install" in result.stderr
    assert "--force" in result.stderr
    assert snapshot(tmp_path) == before
    forced = run_cli(env, "install", "--user-data-dir", str(tmp_path / "p"))
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith("warning         --force: baking in ")


def test_an_explicit_host_path_or_frozen_build_is_never_classified(
    tmp_path: Path, env: dict[str, str]
) -> None:
    def doomed(executable: str, _env: object) -> interpreter.Interpreter:
        return interpreter.Interpreter(executable, "/src", (), None, (), {})

    exe = tmp_path / "dist" / "pedelec-native-host"
    ctx, _ = make_env("linux", env, Path(env["HOME"]), frozen=True, executable=str(exe))
    ctx.describe_interpreter = doomed
    installer.install(installer.InstallOptions(user_data_dirs=(tmp_path / "p",)), ctx)
    assert json.loads(manifest_at(tmp_path / "p").read_text())["path"] == str(exe)
    ctx.frozen = False
    with pytest.raises(installer.InstallError, match="source checkout"):
        installer.install(installer.InstallOptions(user_data_dirs=(tmp_path / "q",)), ctx)
    assert not (tmp_path / "q").exists()


# --- modes and ownership (issue 11) -------------------------------------------------------
def test_umask_000_leaves_nothing_group_or_other_writable(
    tmp_path: Path, env: dict[str, str]
) -> None:
    profile = tmp_path / "p"
    result = run_cli(
        env, "install", "--user-data-dir", str(profile), "--extension-id", DEV_ID, umask=0
    )
    assert result.returncode == 0, result.stderr
    written = [
        profile, profile / "NativeMessagingHosts", manifest_at(profile),
        tmp_path / "state", tmp_path / "state" / "pedelec-native-host",
        tmp_path / "state" / installer.RECORD_FILE, tmp_path / "config",
        tmp_path / "config" / "config.json",
    ]  # fmt: skip
    modes = {str(p.relative_to(tmp_path)): mode(p) for p in written}
    assert modes == {
        "p": 0o700,
        "p/NativeMessagingHosts": 0o700,
        f"p/NativeMessagingHosts/{MANIFEST}": 0o600,
        "state": 0o700,
        "state/pedelec-native-host": 0o700,
        f"state/{installer.RECORD_FILE}": 0o600,
        "config": 0o700,
        "config/config.json": 0o600,
    }


def test_refuses_a_target_directory_others_can_write(tmp_path: Path, env: dict[str, str]) -> None:
    profile = tmp_path / "shared-profile"
    (profile / "NativeMessagingHosts").mkdir(parents=True)
    (profile / "NativeMessagingHosts").chmod(0o777)
    result = run_cli(env, "install", "--user-data-dir", str(profile))
    assert result.returncode == 1
    assert "refusing to write into" in result.stderr
    assert "writable by other users" in result.stderr
    assert list((profile / "NativeMessagingHosts").iterdir()) == []
    # A missing directory is judged by its nearest existing ancestor.
    (profile / "NativeMessagingHosts").chmod(0o755)
    profile.chmod(0o777)
    deeper = run_cli(env, "install", "--user-data-dir", str(profile / "sub"))
    assert deeper.returncode == 1 and "writable by other users" in deeper.stderr
    assert not (profile / "sub").exists()


def other_user() -> int:
    """A uid that is not ours: `nobody`, which Debian always has. Needs root to chown."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs as root; this test must run there")
        pytest.skip("needs root to give a directory to another user")
    return 65534


def test_refuses_a_target_directory_another_user_owns(tmp_path: Path, env: dict[str, str]) -> None:
    uid = other_user()
    profile = tmp_path / "their-profile"
    (profile / "NativeMessagingHosts").mkdir(parents=True)
    os.chown(profile / "NativeMessagingHosts", uid, uid)
    result = run_cli(env, "install", "--user-data-dir", str(profile))
    assert result.returncode == 1
    assert "belongs to another user" in result.stderr
    assert list((profile / "NativeMessagingHosts").iterdir()) == []


# --- uninstall trusts only what install could have written (issue 11) --------------------
def plant_record(tmp_path: Path, victim: Path) -> Path:
    """A record naming a file no install writes, with that file's real hash."""
    import hashlib

    record = tmp_path / "state" / installer.RECORD_FILE
    record.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(victim.read_bytes()).hexdigest()
    record.write_text(
        json.dumps(
            {
                "version": 1,
                "files": [{"path": str(victim), "role": "manifest", "sha256": digest}],
                "createdDirs": [str(victim.parent)],
            }
        )
    )
    return record


def test_uninstall_never_touches_a_file_a_record_names_but_install_never_writes(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    bashrc = home / ".bashrc"
    bashrc.write_text("export PATH=$HOME/bin:$PATH\n")
    record = plant_record(tmp_path, bashrc)
    result = run_cli(env, "uninstall")
    assert result.returncode == 1
    assert f"refused         {bashrc}: not a file install writes; left alone" in result.stdout
    assert "left alone and the record kept" in result.stderr
    assert bashrc.read_text() == "export PATH=$HOME/bin:$PATH\n"
    assert record.exists() and home.is_dir()


@pytest.mark.parametrize("how", ["other-writable", "symlink"])
def test_uninstall_refuses_a_record_it_cannot_trust(
    tmp_path: Path, env: dict[str, str], how: str
) -> None:
    profile = tmp_path / "p"
    assert run_cli(env, "install", "--user-data-dir", str(profile)).returncode == 0
    record = tmp_path / "state" / installer.RECORD_FILE
    if how == "other-writable":
        record.chmod(0o646)
        why = "writable by other users"
    else:
        real = tmp_path / "elsewhere.json"
        record.rename(real)
        record.symlink_to(real)
        why = "symbolic link"
    result = run_cli(env, "uninstall")
    assert result.returncode == 1
    assert "install record refused" in result.stderr and why in result.stderr
    assert manifest_at(profile).is_file()


def test_install_names_pedelec_desktops_manifest_and_uninstall_restores_it(
    tmp_path: Path, home: Path, env: dict[str, str]
) -> None:
    profile = tmp_path / "p"
    desktop = {
        "name": HOST_NAME,
        "description": "Pedelec",
        "path": str(home / ".pedelec" / "pedelec-native-host"),
        "type": "stdio",
        "allowed_origins": [OFFICIAL],
    }
    original = json.dumps(desktop).encode()
    manifest_at(profile).parent.mkdir(parents=True)
    manifest_at(profile).write_bytes(original)
    result = run_cli(env, "install", "--user-data-dir", str(profile))
    assert result.returncode == 0, result.stderr
    note = next(line for line in result.stdout.splitlines() if line.startswith("note"))
    assert f"{manifest_at(profile)} was Pedelec Desktop's registration" in note
    assert "uninstall` restores it" in note and "next foreground start" in note
    again = run_cli(env, "install", "--user-data-dir", str(profile))
    assert "note" not in again.stdout  # ours now: nothing to say
    assert run_cli(env, "uninstall").returncode == 0
    assert manifest_at(profile).read_bytes() == original


# --- a host registered for every user (issue 31) -------------------------------------------
BUNDLE = "pedelec-native-host"


def frozen_bundle(folder: Path) -> Path:
    """A onedir bundle's executable in `folder` (0755 folders, a 0755 file)."""
    exe = folder / BUNDLE / BUNDLE
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    for path in (folder, exe.parent, exe):
        path.chmod(0o755)
    return exe


def system_plan(env: dict[str, str], exe: Path) -> installer.Plan:
    ctx, _ = make_env("linux", env, Path(env["HOME"]), frozen=True, executable=str(exe))
    options = installer.InstallOptions(browsers=("chrome", "chromium"), scope=Scope.SYSTEM)
    return installer.plan_install(options, ctx)


def test_a_system_scope_bundle_only_root_can_change_is_registered(
    tmp_path: Path, env: dict[str, str]
) -> None:
    exe = frozen_bundle(tmp_path / "opt")
    plan = system_plan(env, exe)
    assert plan.launcher is None
    assert {str(w.path) for w in plan.manifests} == {
        f"/etc/opt/chrome/native-messaging-hosts/{MANIFEST}",
        f"/etc/chromium/native-messaging-hosts/{MANIFEST}",
    }
    assert all(json.loads(w.data)["path"] == str(exe) for w in plan.manifests)
    assert {w.mode for w in plan.manifests} == {0o644}


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("folder", "opt (a directory on the way) is writable by other users"),
        ("bundle", f"opt/{BUNDLE} (a directory on the way) is writable by other users"),
        ("file", f"{BUNDLE}/{BUNDLE} (the executable) is writable by other users"),
    ],
)
def test_a_system_scope_bundle_others_can_change_is_refused(
    tmp_path: Path, env: dict[str, str], where: str, said: str
) -> None:
    """Every user's browser would run what anyone able to write there put in its place."""
    exe = frozen_bundle(tmp_path / "opt")
    changeable = {"folder": tmp_path / "opt", "bundle": exe.parent, "file": exe}[where]
    changeable.chmod(0o757 if where == "file" else 0o777)
    with pytest.raises(installer.InstallError) as refused:
        system_plan(env, exe)
    message = str(refused.value)
    assert message.startswith(
        f"refusing to register this executable ({exe}) for every user of this machine: "
    )
    assert said in message and "into /opt by root" in message
    assert "For administrators" in message and "as you" not in message


def test_a_system_scope_bundle_reached_through_a_link_is_judged_where_it_lies(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A safe-looking path whose folder links into one others can write is refused."""
    exe = frozen_bundle(tmp_path / "shared")
    (tmp_path / "shared").chmod(0o777)
    safe = tmp_path / "opt"
    safe.mkdir(mode=0o755)
    (safe / "pedelec-native-host").symlink_to(exe.parent)
    with pytest.raises(installer.InstallError, match="writable by other users"):
        system_plan(env, safe / "pedelec-native-host" / exe.name)


def test_a_system_scope_bundle_in_another_users_folder_is_refused(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Root registering a bundle a user extracted into their own home: that user could
    replace what every other user's browser runs."""
    uid = other_user()
    exe = frozen_bundle(tmp_path / "home-of-bob")
    os.chown(tmp_path / "home-of-bob", uid, uid)
    with pytest.raises(installer.InstallError, match="belongs to another user"):
        system_plan(env, exe)


def test_a_system_scope_host_path_others_can_change_is_refused_by_the_command(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """`--host-path` is held to the same rule, and nothing is written on refusal."""
    exe = frozen_bundle(tmp_path / "opt")
    (tmp_path / "opt").chmod(0o777)
    result = run_cli(
        env, "install", "--scope", "system", "--browser", "chrome", "--host-path", str(exe)
    )
    assert result.returncode == 1, result.stdout
    assert result.stderr.count("\n") == 1 and "writable by other users" in result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "state" / installer.RECORD_FILE).exists()
