"""What a user installs: the sdist and wheel, and the host installed for real use with
pipx (from the wheel) or uv (from a checkout), registered and answering (issue 12).

These build and install for real, so they are slow and need PyPI: marked `packaging`,
skipped when the tools cannot be had, except under CI=true, where that is a failure.
The builds are shared by the whole session.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from native_host import HOST_NAME, __version__, startimage
from tests.support.checkout import REPO, fresh_checkout
from tests.support.tools import pipx_and_uv, run, tool_env, unavailable

# Everything a checkout holds that the sdist leaves out on purpose (CI and git files).
NOT_IN_SDIST = (".ci/", ".github/", ".gitignore", ".benchmarks/")  # the repository's CI
SDIST_TREES = ("tests", "docs", "manifests", "installers", "packaging", "bench")

pytestmark = [
    pytest.mark.process,
    pytest.mark.packaging,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("packaging"),  # one worker builds the dists and tools once
]


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_checkout(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="session")
def dists(source_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`python -m build` of the current files: {"sdist": ..., "wheel": ...}."""
    out = tmp_path_factory.mktemp("dist")
    built = run([sys.executable, "-m", "build", "--outdir", str(out), str(source_tree)])
    if built.returncode != 0:
        unavailable("python -m build", built.stdout + built.stderr)
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return {"sdist": sdists[0], "wheel": wheels[0]}


@pytest.fixture(scope="session")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway virtualenv with pipx and uv from PyPI; returns its bin directory."""
    return pipx_and_uv(tmp_path_factory.mktemp("tools") / "venv")


# --- the sdist and the wheel ----------------------------------------------------------------
def test_wheel_and_sdist_carry_the_mit_license(dists: dict[str, Path]) -> None:
    license_text = (REPO / "LICENSE").read_text()
    assert license_text.startswith("MIT License")
    assert "Pedelec native host contributors" in license_text
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        info = f"pedelec_native_host-{__version__}.dist-info"
        assert wheel.read(f"{info}/licenses/LICENSE").decode() == license_text
        metadata = email.parser.Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["License"] is None  # the deprecated free-text field is gone
    with tarfile.open(dists["sdist"]) as sdist:
        root = f"pedelec_native_host-{__version__}"
        member = sdist.extractfile(f"{root}/LICENSE")
        assert member is not None and member.read().decode() == license_text


def test_the_sdist_is_a_source_tree_whose_tests_run(
    dists: dict[str, Path], source_tree: Path, tmp_path: Path
) -> None:
    with tarfile.open(dists["sdist"]) as sdist:
        if hasattr(tarfile, "data_filter"):  # 3.11.4+; Debian 12 has 3.11.2
            sdist.extractall(tmp_path, filter="data")
        else:
            sdist.extractall(tmp_path)
    unpacked = tmp_path / f"pedelec_native_host-{__version__}"
    shipped = {str(p.relative_to(unpacked)) for p in unpacked.rglob("*") if p.is_file()}
    wanted = {
        str(p.relative_to(source_tree))
        for p in source_tree.rglob("*")
        if p.is_file() and not str(p.relative_to(source_tree)).startswith(NOT_IN_SDIST)
    }
    assert wanted - shipped == set()
    for tree in SDIST_TREES:
        assert any(name.startswith(tree + "/") for name in shipped), tree
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"} <= shipped

    env = {k: v for k, v in os.environ.items() if not k.startswith("PEDELEC_")}
    env["PYTHONPATH"] = str(unpacked)  # the host processes the tests start run the sdist too
    probe = [sys.executable, "-c", "import native_host; print(native_host.__file__)"]
    where = run(probe, cwd=tmp_path, env=env)
    assert Path(where.stdout.strip()).is_relative_to(unpacked), where
    tested = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_golden.py", "tests/test_framing.py", "-k", "08_26 or frame"],
        cwd=unpacked, env=env,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout and " skipped" not in tested.stdout


def names_in(dist: Path) -> list[str]:
    """The files of an sdist or a wheel, without the sdist's top folder."""
    if dist.suffix == ".whl":
        with zipfile.ZipFile(dist) as wheel:
            return sorted(wheel.namelist())
    with tarfile.open(dist) as sdist:
        return sorted(m.name.partition("/")[2] for m in sdist.getmembers() if m.isfile())


def run_as_group(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`run`, but in a process group of its own that is killed whole when `timeout`
    passes: a build backend walking without end must not outlive the test."""
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.communicate()
        pytest.fail(f"`{' '.join(command)}` still ran after {timeout:.0f} s: it walks build/")
    return subprocess.CompletedProcess(command, process.returncode, output, "")


def test_links_under_build_change_neither_the_dists_nor_an_editable_install(
    dists: dict[str, Path], tmp_path: Path
) -> None:
    """After a Windows build, build/ holds a Wine prefix whose dosdevices/z: links to `/`
    (issue 33): package discovery and the sdist's file list must not walk it. Here build/
    also holds two links back to the checkout, so a walk that follows links never ends:
    this fails at its generous bound instead of taking minutes, whatever the machine."""
    checkout = fresh_checkout(tmp_path / "checkout")
    devices = checkout / "build" / "windows-build" / "wine-prefix" / "dosdevices"
    devices.mkdir(parents=True)
    (devices / "z:").symlink_to("/")
    (devices / "loop-a").symlink_to(checkout)
    (devices / "loop-b").symlink_to(checkout)
    out = tmp_path / "dist"
    built = run_as_group(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(checkout)],
        timeout=300,
    )
    if built.returncode != 0:
        unavailable("python -m build", built.stdout)
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert names_in(sdist) == names_in(dists["sdist"])
    assert names_in(wheel) == names_in(dists["wheel"])

    venv = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    python = str(venv / "bin" / "python")
    editable = run_as_group(
        [python, "-m", "pip", "install", "-q", "--no-deps", "-e", str(checkout)], timeout=300
    )
    if editable.returncode != 0:
        unavailable("pip install -e", editable.stdout)
    where = run(
        [python, "-c", "import native_host.relay; print(native_host.relay.__file__)"], cwd=tmp_path
    )
    assert Path(where.stdout.strip()).is_relative_to(checkout), where


# --- installed for real use, registered, answering ------------------------------------------
def assert_registered_host_answers(env: dict[str, str], tool_dir: Path) -> None:
    """`install` as a user runs it, then `doctor`: the browser's manifest leads to a host
    in the tool's own virtualenv, and that host relays a ping to a running Core."""
    from native_host.devcore import DevCore, DevCoreSettings

    command = shutil.which("pedelec-native-host", path=env["PATH"])
    assert command is not None and Path(command).parent == Path(env["HOME"]) / ".local" / "bin"
    installed = run([command, "install"], env=env, timeout=120)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    manifest_path = Path(env["HOME"], ".config/chromium/NativeMessagingHosts", f"{HOST_NAME}.json")
    launcher = Path(json.loads(manifest_path.read_text())["path"])
    launcher_text = launcher.read_text()
    assert str(tool_dir) in launcher_text
    assert str(REPO / "native_host") not in launcher_text  # the tool's own copy, not this one

    with DevCore(DevCoreSettings(home=Path(env["PEDELEC_HOME"]))) as core:
        checked = run([command, "doctor", "--json"], env=env, timeout=120)
        assert checked.stdout, checked.stderr
        findings = json.loads(checked.stdout)["findings"]
        pings = [f for f in findings if f["check"] == "host answers ping"]
        assert [(f["subject"], f["status"]) for f in pings] == [("chromium", "ok")], pings
        assert "Core connected" in pings[0]["detail"]
        assert [r.type for r in core.record].count("ping") >= 2  # doctor's own, the host's
    # The launcher started from the start image install wrote beside it (issue 19).
    image = launcher.parent / startimage.IMAGE_NAME
    images = [f for f in findings if f["check"] == "start image"]
    assert [(f["status"], f["detail"].split(":")[0]) for f in images] == [("ok", str(image))]
    log = "".join(p.read_text() for p in Path(env["PEDELEC_NATIVE_HOST_LOG_DIR"]).glob("*.log"))
    starts = re.findall(r" start pid=\d+ .* image=(\S+)", log)
    assert starts and set(starts) == {startimage.LOADED}, starts
    removed = run([command, "uninstall"], env=env, timeout=120)
    assert removed.returncode == 0, removed.stderr
    assert not manifest_path.exists() and not launcher.exists() and not image.exists()


def test_pipx_install_from_the_wheel_then_install_and_doctor(
    dists: dict[str, Path],
    tools: Path,
    env: dict[str, str],
    tmp_path: Path,
    permanent_dir: Path,
) -> None:
    environment = tool_env(env, permanent_dir, tmp_path, tools)
    done = run([str(tools / "pipx"), "install", str(dists["wheel"])], env=environment)
    if done.returncode != 0:
        unavailable("pipx install", done.stdout + done.stderr)
    assert_registered_host_answers(
        environment, Path(environment["PIPX_HOME"]) / "venvs" / "pedelec-native-host"
    )


def test_uv_tool_install_from_a_checkout_then_install_and_doctor(
    tools: Path, env: dict[str, str], tmp_path: Path, permanent_dir: Path
) -> None:
    checkout = fresh_checkout(tmp_path / "checkout")
    environment = tool_env(env, permanent_dir, tmp_path, tools)
    done = run(
        [str(tools / "uv"), "tool", "install", "--python", sys.executable, str(checkout)],
        env=environment,
    )
    if done.returncode != 0:
        unavailable("uv tool install", done.stdout + done.stderr)
    assert_registered_host_answers(
        environment, Path(environment["UV_TOOL_DIR"]) / "pedelec-native-host"
    )
