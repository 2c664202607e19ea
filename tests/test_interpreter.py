"""Which interpreters `install` refuses to bake into the launcher: a pure classifier over
paths of every OS (the refusal through the real CLI is in test_install)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from native_host.install import interpreter

pytestmark = pytest.mark.process

SITE = "/home/ann/.local/share/pipx/venvs/pedelec-native-host/lib/python3.11/site-packages"


def classify(
    executable: str,
    package_dir: str = SITE,
    site_dirs: tuple[str, ...] = (SITE,),
    user_site: str | None = "/home/ann/.local/lib/python3.11/site-packages",
    temp_dirs: tuple[str, ...] = ("/tmp", "/var/tmp"),
    **env: str,
) -> str | None:
    it = interpreter.Interpreter(executable, package_dir, site_dirs, user_site, temp_dirs, env)
    risk = interpreter.classify(it)
    return None if risk is None else risk.kind


@pytest.mark.parametrize(
    ("executable", "kind"),
    [
        ("/home/ann/.local/share/pipx/venvs/pedelec-native-host/bin/python", None),
        ("/home/ann/.local/share/pipx/.cache/3f2a9c1e/bin/python", "pipx-run"),
        ("/home/ann/.local/pipx/.cache/3f2a9c1e/bin/python", "pipx-run"),
        ("/Users/ann/.local/pipx/.cache/3f2a9c1e/bin/python3", "pipx-run"),
        (r"C:\Users\ann\pipx\.cache\3f2a9c1e\Scripts\python.exe", "pipx-run"),
        ("/home/ann/.cache/uv/archive-v0/Hx9wqPzN/bin/python", "uv-cache"),
        ("/home/ann/.cache/uv/builds-v0/.tmpAbc/bin/python", "uv-cache"),
        ("/home/ann/.cache/uv/environments-v2/run-1a2b/bin/python", "uv-cache"),
        (r"C:\Users\ann\AppData\Local\uv\cache\archive-v0\Hx9w\Scripts\python.exe", "uv-cache"),
        ("/home/ann/.local/share/uv/tools/pedelec-native-host/bin/python", None),
        ("/tmp/tmp.x1/venv/bin/python", "temporary"),
        ("/var/tmp/venv/bin/python", "temporary"),
        ("/usr/bin/python3", None),
        ("/home/ann/tmpfiles/venv/bin/python", None),  # "tmp" as part of a name is fine
    ],
)
def test_interpreter_locations(executable: str, kind: str | None) -> None:
    assert classify(executable) == kind


def test_custom_pipx_home_and_uv_cache_dir() -> None:
    assert classify("/opt/pipx/.cache/ab/bin/python", PIPX_HOME="/opt/pipx") == "pipx-run"
    assert classify("/opt/pipx/venvs/p/bin/python", PIPX_HOME="/opt/pipx") is None
    assert classify("/srv/cache/x/bin/python", UV_CACHE_DIR="/srv/cache") == "uv-cache"


def test_macos_and_windows_temporary_directories() -> None:
    mac_tmp = ("/private/var/folders", "/var/folders")
    exe = "/private/var/folders/xy/abc/T/venv/bin/python3"
    assert classify(exe, temp_dirs=mac_tmp) == "temporary"
    windows = (r"C:\Users\ann\AppData\Local\Temp",)
    exe = r"c:\users\ann\appdata\local\temp\venv\Scripts\python.exe"
    assert classify(exe, temp_dirs=windows) == "temporary"


@pytest.mark.parametrize(
    ("package_dir", "kind"),
    [
        (SITE, None),
        ("/home/ann/src/pedelec-native-host", "editable"),
        ("/home/ann/.local/lib/python3.11/site-packages", "user-site"),
        ("/tmp/build/pedelec-native-host", "temporary"),
        ("/home/ann/.cache/uv/archive-v0/Hx9w/lib/python3.11/site-packages", "uv-cache"),
    ],
)
def test_where_the_package_lives(package_dir: str, kind: str | None) -> None:
    assert classify("/usr/bin/python3", package_dir=package_dir) == kind


def test_a_system_site_is_a_real_install() -> None:
    debian = ("/usr/local/lib/python3.11/dist-packages", "/usr/lib/python3/dist-packages")
    package = "/usr/lib/python3/dist-packages"
    assert classify("/usr/bin/python3", package_dir=package, site_dirs=debian) is None


def test_the_message_says_what_to_do_instead() -> None:
    it = interpreter.Interpreter("/tmp/v/bin/python", SITE, (SITE,), None, ("/tmp",), {})
    risk = interpreter.classify(it)
    assert risk is not None
    text = risk.message()
    assert text.startswith("the interpreter (/tmp/v/bin/python) is in a temporary directory")
    for advice in ("pipx install", "uv tool install", "virtualenv", "--force"):
        assert advice in text
    assert "a release from https://github.com/kaoruisaac/pedelec-native-host/releases" in text
    assert "pipx install pedelec-native-host" not in text  # on no index: it finds nothing


def test_from_a_checkout_the_message_names_it(tmp_path: Path) -> None:
    """An editable install: the commands name the very checkout, quoted for the shell."""
    checkout = tmp_path / "my clone"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\nname = 'pedelec-native-host'\n")
    it = interpreter.Interpreter("/opt/py/bin/python", str(checkout), (SITE,), None, (), {})
    risk = interpreter.classify(it)
    assert risk is not None and risk.kind == "editable"
    assert f"`pipx install '{checkout}'` or `uv tool install '{checkout}'`" in risk.message()
    assert f"(or `'{checkout}/installers/install.sh'`)" in risk.message()


def test_this_process_runs_the_package_from_the_checkout() -> None:
    """pytest imports native_host from the checkout (its rootdir is on sys.path), which
    is no site directory: `current` must see exactly that."""
    import os
    from pathlib import Path

    seen = interpreter.current(sys.executable, os.environ)
    checkout = Path(__file__).resolve().parent.parent
    assert Path(seen.package_dir) == checkout
    assert not any(Path(seen.package_dir).is_relative_to(site) for site in seen.site_dirs)
    risk = interpreter.classify(seen)
    assert risk is not None and risk.kind in ("editable", "temporary")
