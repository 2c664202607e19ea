"""The Windows registry, as the four operations install, uninstall and doctor need.

`WindowsRegistry` imports `winreg` on first use so this module loads on every platform;
tests use a dict-backed fake with the same methods. Every key is opened in the view it
names (`KEY_WOW64_32KEY` / `KEY_WOW64_64KEY`), whatever the bitness of this Python.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

from native_host.install.locations import RegistryKey, RegistryView


class Registry(Protocol):
    """Default values of keys: what a host registration is made of (spec 5.2)."""

    def get_default(self, key: RegistryKey) -> str | None: ...

    def set_default(self, key: RegistryKey, value: str) -> None: ...

    def delete(self, key: RegistryKey) -> None: ...


class WindowsRegistry:
    """`winreg` behind the `Registry` and `managed_policy.PolicyRegistry` protocols."""

    def __init__(self) -> None:
        self._winreg: Any = importlib.import_module("winreg")

    def _hive(self, key: RegistryKey) -> Any:
        hives = {"HKCU": self._winreg.HKEY_CURRENT_USER, "HKLM": self._winreg.HKEY_LOCAL_MACHINE}
        return hives[key.hive]

    def _view(self, key: RegistryKey) -> int:
        if key.view is RegistryView.WOW64_32:
            return int(self._winreg.KEY_WOW64_32KEY)
        return int(self._winreg.KEY_WOW64_64KEY)

    def get_default(self, key: RegistryKey) -> str | None:
        access = self._winreg.KEY_QUERY_VALUE | self._view(key)
        try:
            with self._winreg.OpenKey(self._hive(key), key.path, 0, access) as handle:
                value, _kind = self._winreg.QueryValueEx(handle, "")
        except FileNotFoundError:
            return None
        return str(value)

    def set_default(self, key: RegistryKey, value: str) -> None:
        access = self._winreg.KEY_SET_VALUE | self._view(key)
        with self._winreg.CreateKeyEx(self._hive(key), key.path, 0, access) as handle:
            self._winreg.SetValueEx(handle, "", 0, self._winreg.REG_SZ, value)

    def delete(self, key: RegistryKey) -> None:
        try:
            self._winreg.DeleteKeyEx(self._hive(key), key.path, self._view(key), 0)
        except FileNotFoundError:
            return

    def read_values(self, key: RegistryKey) -> Mapping[str, object] | None:
        """Every named value of a key (policy keys), None when the key does not exist."""
        access = self._winreg.KEY_READ | self._view(key)
        try:
            handle = self._winreg.OpenKey(self._hive(key), key.path, 0, access)
        except FileNotFoundError:
            return None
        values: dict[str, object] = {}
        with handle:
            index = 0
            while True:
                try:
                    name, value, _kind = self._winreg.EnumValue(handle, index)
                except OSError:
                    return values
                values[str(name)] = value
                index += 1
