"""Replaces the contributed pydantic hook (user hooks take priority): the same submodules,
minus the v1 compatibility layer and the mypy plugin, which the host never imports and the
spec excludes (the contributed hook would list them, and the build would warn about each)."""

from PyInstaller.utils.hooks import collect_submodules

UNUSED = ("pydantic.v1", "pydantic.mypy")

hiddenimports = collect_submodules("pydantic", filter=lambda name: not name.startswith(UNUSED))
