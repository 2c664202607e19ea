"""Every way a user updates a launcher install, under hosts that are serving (issue 30):
`pipx upgrade`, `uv tool upgrade`, and `installers/install.sh` run again.

Each installs this tree the user's way and registers it with `install`, starts three
hosts from the manifest's path as Chrome does (mid-stream, a request in flight, idle:
tests/support/live_hosts.py), updates to a newer build whose internals differ
(tests/support/variant.py), then checks that the three answer every request type
through the update and through a Core restart that starts the Desktop, that the next
host runs the new version, that `doctor` names both versions while the old hosts run,
and that nothing of the old version is left once they have exited. The release tarball
and the MSI run the same scenario (tests/test_frozen_upgrade.py, the Windows lane).

Real installs from wheels and the checkout, with dependencies from PyPI: `packaging`.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from native_host import HOST_NAME, __version__, startimage
from tests.support.checkout import fresh_checkout
from tests.support.live_hosts import ThreeLiveHosts
from tests.support.markers import needs_os
from tests.support.tools import pipx_and_uv, run, tool_env, unavailable
from tests.support.variant import incompatible_checkout, newer_version

pytestmark = [
    pytest.mark.process,
    pytest.mark.packaging,
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("packaging"),
    needs_os("linux", reason="the fake Desktop is a #! script whose processes /proc tells apart"),
]

DEPENDENCIES = ("pydantic>=2.6", "idna>=3.6")
"""pyproject.toml's, downloaded once so the installs below need no index."""


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pipx_and_uv(tmp_path_factory.mktemp("tools") / "venv")


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """This tree and the newer, internally different one."""
    root = tmp_path_factory.mktemp("trees")
    newer = root / "newer"
    incompatible_checkout(newer)
    return {"old": fresh_checkout(root / "old"), "new": newer}


@pytest.fixture(scope="module")
def wheels(trees: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A wheel of each tree, and the dependencies' wheels in the old one's folder."""
    found = {}
    for name, tree in trees.items():
        out = tmp_path_factory.mktemp(f"wheels-{name}")
        built = run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(tree)])
        if built.returncode != 0:
            unavailable("python -m build", built.stdout + built.stderr)
        (found[name],) = out.glob("*.whl")
    pip = [sys.executable, "-m", "pip", "download", "-q", "-d", str(found["old"].parent)]
    got = run([*pip, *DEPENDENCIES])
    if got.returncode != 0:
        unavailable("the dependencies from PyPI", got.stdout + got.stderr)
    return found


def own_index(wheels: dict[str, Path], tmp_path: Path) -> Path:
    """A test's own copy of the old wheel and its dependencies, where its upgrade puts the
    new wheel: the next test's install must still find only the old one."""
    links = tmp_path / "links"
    shutil.copytree(wheels["old"].parent, links)
    return links


def manifest_path(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"], "chromium", "NativeMessagingHosts", f"{HOST_NAME}.json")


def registered(env: dict[str, str]) -> Callable[[], list[str]]:
    """How Chrome starts the host now: the path the manifest names."""
    return lambda: [json.loads(manifest_path(env).read_text())["path"]]


def succeeded(done: object, what: str) -> None:
    assert getattr(done, "returncode", 1) == 0, f"{what}: {done}"


@pytest.fixture
def live_env(env: dict[str, str], tmp_path: Path, permanent_dir: Path, tools: Path) -> Iterator[
    dict[str, str]
]:  # fmt: skip
    yield tool_env(env, permanent_dir, tmp_path, tools)


def doctor_findings(env: dict[str, str]) -> list[dict[str, str]]:
    command = shutil.which("pedelec-native-host", path=env["PATH"])
    assert command is not None
    checked = run([command, "doctor", "--json", "--browser", "chromium"], env=env, timeout=180)
    findings: list[dict[str, str]] = json.loads(checked.stdout)["findings"]
    return findings


def checks(findings: list[dict[str, str]], check: str) -> list[tuple[str, str]]:
    return [(f["status"], f["detail"]) for f in findings if f["check"] == check]


def upgrade_under_live_hosts(
    env: dict[str, str],
    world: Path,
    upgrade: Callable[[], str],
    newer: str,
    runs_install: bool = False,
) -> ThreeLiveHosts:
    """The scenario of this module's tests, up to the old hosts' exit (the caller checks
    what is left once they have gone). `upgrade` returns what it printed; one that
    `runs_install` (install.sh) writes the new image itself."""
    command = shutil.which("pedelec-native-host", path=env["PATH"])
    assert command is not None
    succeeded(run([command, "install", "--browser", "chromium"], env=env, timeout=180), "install")
    live = ThreeLiveHosts(world, registered(env), env)
    try:
        live.start()
        assert {image for _, image in live.starts().values()} == {startimage.LOADED}
        printed = upgrade()
        live.after_upgrade()
        live.core_restart()
        assert live.versions() == {__version__}
        if not runs_install:
            # Until `install` runs again the image is stale: the new version from its files.
            assert live.next_start() == (newer, startimage.STALE)
            again = run([command, "install", "--browser", "chromium"], env=env, timeout=180)
            succeeded(again, "install after the upgrade")
            printed = again.stdout
        assert f"hosts of version {__version__} still run from it" in printed
        assert live.next_start() == (newer, startimage.LOADED)
        findings = doctor_findings(env)
        assert checks(findings, "host version") == [("ok", newer)]
        (older,) = checks(findings, "older hosts running")
        assert older[0] == "warn" and f"hosts of version {__version__} still run" in older[1]
    except BaseException:
        live.close()
        raise
    return live


def nothing_old_left(env: dict[str, str], site: Path, newer: str) -> None:
    """One version installed, and no image of the old one kept (the last old host removed
    it as it exited); doctor sees no older host."""
    infos = sorted(p.name for p in site.glob("pedelec_native_host-*.dist-info"))
    assert infos == [f"pedelec_native_host-{newer}.dist-info"]
    image = Path(env["PEDELEC_NATIVE_HOST_STATE_DIR"]) / startimage.IMAGE_NAME
    leftovers = sorted(p.name for p in image.parent.iterdir() if p.name.startswith(image.name))
    assert leftovers == [image.name]
    assert checks(doctor_findings(env), "older hosts running") == []


def site_packages(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3.*/site-packages")
    return site


def test_pipx_upgrade_under_live_hosts(
    live_env: dict[str, str], tools: Path, wheels: dict[str, Path], tmp_path: Path
) -> None:
    links = own_index(wheels, tmp_path)
    pip_args = f"--no-index --find-links={links}"
    pipx = str(tools / "pipx")
    done = run([pipx, "install", "pedelec-native-host", "--pip-args", pip_args], env=live_env)
    if done.returncode != 0:
        unavailable("pipx install", done.stdout + done.stderr)
    newer = wheels["new"].name.split("-")[1]

    def upgrade() -> str:
        shutil.copy2(wheels["new"], links)
        done = run([pipx, "upgrade", "pedelec-native-host", "--pip-args", pip_args], env=live_env)
        succeeded(done, "pipx upgrade")
        return done.stdout

    live = upgrade_under_live_hosts(live_env, tmp_path / "world", upgrade, newer)
    live.close()
    venv = Path(live_env["PIPX_HOME"]) / "venvs" / "pedelec-native-host"
    nothing_old_left(live_env, site_packages(venv), newer)


def test_uv_tool_upgrade_under_live_hosts(
    live_env: dict[str, str], tools: Path, wheels: dict[str, Path], tmp_path: Path
) -> None:
    links = own_index(wheels, tmp_path)
    index = ["--no-index", "--find-links", str(links)]
    uv = str(tools / "uv")
    done = run(
        [uv, "tool", "install", "pedelec-native-host", *index, "--python", sys.executable],
        env=live_env,
    )
    if done.returncode != 0:
        unavailable("uv tool install", done.stdout + done.stderr)
    newer = wheels["new"].name.split("-")[1]

    def upgrade() -> str:
        shutil.copy2(wheels["new"], links)
        done = run([uv, "tool", "upgrade", "pedelec-native-host", *index], env=live_env)
        succeeded(done, "uv tool upgrade")
        return done.stdout

    live = upgrade_under_live_hosts(live_env, tmp_path / "world", upgrade, newer)
    live.close()
    venv = Path(live_env["UV_TOOL_DIR"]) / "pedelec-native-host"
    nothing_old_left(live_env, site_packages(venv), newer)


def test_install_sh_again_under_live_hosts(
    live_env: dict[str, str], trees: dict[str, Path], tmp_path: Path, permanent_dir: Path
) -> None:
    prefix = permanent_dir / "prefix"
    environment = {**live_env, "PYTHON": sys.executable}
    (tmp_path / "tmpdir").mkdir()
    environment["TMPDIR"] = str(tmp_path / "tmpdir")
    environment["PATH"] = f"{prefix / 'venv' / 'bin'}:{environment['PATH']}"

    def install_sh(tree: Path) -> str:
        script = tree / "installers" / "install.sh"
        done = run(["sh", str(script), "--prefix", str(prefix), "--", "--browser", "chromium"],
                   env=environment)  # fmt: skip
        if done.returncode != 0:
            unavailable("install.sh (PyPI)", done.stdout + done.stderr)
        return done.stdout

    install_sh(trees["old"])
    live = upgrade_under_live_hosts(
        environment,
        tmp_path / "world",
        lambda: install_sh(trees["new"]),
        newer_version(),
        runs_install=True,
    )
    newer = newer_version()
    live.close()
    assert sorted(p.name for p in prefix.iterdir()) == ["venv"]  # venv.old is gone
    nothing_old_left(environment, site_packages(prefix / "venv"), newer)
