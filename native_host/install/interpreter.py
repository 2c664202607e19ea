"""Is the interpreter `install` would bake into the launcher going to be there tomorrow?

The launcher runs a fixed interpreter. Run from a `pipx run` cache (expires after 14
days), a `uvx` archive in uv's cache (pruned at will), a temporary directory, or an
editable install whose code lives in a source checkout, it stops working the day that
location goes. `classify` is a pure function over a table of location patterns; the
installer refuses (unless `--force`) and says what to do instead.
"""

from __future__ import annotations

import os
import re
import shlex
import sysconfig
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass

THEN = (
    "then run `pedelec-native-host install` from there; or pass --force to use this "
    "interpreter anyway"
)


def instead(package_dir: str) -> str:
    """What to do instead, with commands that work as written: from the checkout the
    package was loaded from, when it was (an editable install), else from a release or a
    wheel (the package is on no index, so it cannot be installed by its name)."""
    if os.path.isfile(os.path.join(package_dir, "pyproject.toml")):
        quoted = f'"{package_dir}"' if os.name == "nt" else shlex.quote(package_dir)
        script = (
            ""
            if os.name == "nt"
            else f" (or `{shlex.quote(os.path.join(package_dir, 'installers', 'install.sh'))}`)"
        )
        return (
            f"install it for real use first, from this checkout: `pipx install {quoted}` or "
            f"`uv tool install {quoted}`{script}; {THEN}"
        )
    from native_host import RELEASES_URL

    return (
        f"install it for real use first: a release from {RELEASES_URL}, or `pipx install` "
        f"(or `uv tool install`) a wheel or a checkout of the source (or `pip install` it "
        f"into a virtualenv you keep); {THEN}"
    )


@dataclass(frozen=True)
class Interpreter:
    """Where the launcher's interpreter and this package live, as seen at install time."""

    executable: str
    package_dir: str
    """The directory holding the `native_host` package."""
    site_dirs: tuple[str, ...]
    """The interpreter's site-packages directories (where a regular install puts packages)."""
    user_site: str | None
    temp_dirs: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True)
class Risk:
    """Why the interpreter is a bad thing to bake in, and what to do instead."""

    kind: str
    where: str
    why: str
    instead: str

    def message(self) -> str:
        return f"{self.where} {self.why}; {self.instead}"


def _norm(path: str) -> str:
    """Forward slashes, no trailing slash, case-folded: patterns match every OS's paths."""
    return path.replace("\\", "/").rstrip("/").casefold()


def _under(path: str, root: str) -> bool:
    path, root = _norm(path), _norm(root)
    return bool(root) and (path == root or path.startswith(root + "/"))


_PIPX_CACHE = re.compile(r"(^|/)\.?pipx/\.cache(/|$)")
_UV_CACHE = re.compile(r"(^|/)uv(/cache)?/(archive|builds|environments)-v\d+(/|$)")


def _pipx_cache(it: Interpreter, path: str) -> bool:
    custom = it.env.get("PIPX_HOME")
    return bool(_PIPX_CACHE.search(_norm(path))) or (
        bool(custom) and _under(path, os.path.join(custom or "", ".cache"))
    )


def _uv_cache(it: Interpreter, path: str) -> bool:
    custom = it.env.get("UV_CACHE_DIR")
    return bool(_UV_CACHE.search(_norm(path))) or (bool(custom) and _under(path, custom or ""))


def _temporary(it: Interpreter, path: str) -> bool:
    return any(_under(path, root) for root in it.temp_dirs)


@dataclass(frozen=True)
class Rule:
    """One row of the table: a location kind, its test on a path, and why it is bad."""

    kind: str
    test: Callable[[Interpreter, str], bool]
    why: str


RULES: tuple[Rule, ...] = (
    Rule(
        "pipx-run", _pipx_cache, "is in pipx's `pipx run` cache, which pipx empties after 14 days"
    ),
    Rule(
        "uv-cache",
        _uv_cache,
        "is in uv's cache (`uvx`/`uv run`), which `uv cache prune` or `uv cache clean` deletes",
    ),
    Rule("temporary", _temporary, "is in a temporary directory, which the system may empty"),
)


def classify(it: Interpreter) -> Risk | None:
    """The first risk found for the interpreter or the package it would run, else None."""
    advice = instead(it.package_dir)
    for subject, path in (("the interpreter", it.executable), ("native_host", it.package_dir)):
        for rule in RULES:
            if rule.test(it, path):
                return Risk(rule.kind, f"{subject} ({path})", rule.why, advice)
    if it.user_site and _under(it.package_dir, it.user_site):
        return Risk(
            "user-site",
            f"native_host ({it.package_dir})",
            "was installed with `pip install --user`; the launcher runs Python with -I, "
            "which ignores the user site",
            advice,
        )
    if not any(_under(it.package_dir, site) for site in it.site_dirs):
        return Risk(
            "editable",
            f"native_host ({it.package_dir})",
            "is loaded from a source checkout (an editable install): moving, switching or "
            "deleting that checkout breaks the host",
            advice,
        )
    return None


def import_paths(it: Interpreter) -> tuple[str, ...]:
    """Where a lasting install's package and dependencies are imported from: the
    package's directory, then the environment's site directories (the launcher then runs
    Python with -S, skipping `site`, and puts these on `sys.path` itself)."""
    return tuple(dict.fromkeys([it.package_dir, *it.site_dirs]))


def current(executable: str, env: Mapping[str, str]) -> Interpreter:
    """This process's view: the installed launcher runs `executable`, which is ours."""
    import native_host

    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(native_host.__file__)))
    paths = sysconfig.get_paths()
    sites = tuple(dict.fromkeys(p for p in (paths.get("purelib"), paths.get("platlib")) if p))
    try:
        import site

        sites = tuple(dict.fromkeys([*sites, *site.getsitepackages()]))
        user_site: str | None = site.getusersitepackages()
    except (AttributeError, ImportError):  # `python -S` or an embedded interpreter
        user_site = None
    temp_roots = [tempfile.gettempdir(), "/tmp", "/var/tmp", "/private/var/folders"]
    temp_roots += [env[k] for k in ("TMPDIR", "TEMP", "TMP") if env.get(k)]
    real = [os.path.realpath(t) for t in temp_roots]
    return Interpreter(
        executable=executable,
        package_dir=package_dir,
        site_dirs=tuple(os.path.realpath(s) for s in sites) + sites,
        user_site=user_site,
        temp_dirs=tuple(dict.fromkeys(temp_roots + real)),
        env=env,
    )
