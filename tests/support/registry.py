"""Windows registries as dicts: Windows cannot run here, so the installer's, doctor's and
managed-policy readers' registry access is injected and these stand in for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from native_host.install.locations import RegistryKey


class FakeRegistry:
    """The HKCU/HKLM default values the installer and doctor read and write."""

    def __init__(self, values: dict[Any, str] | None = None) -> None:
        self.values: dict[Any, str] = dict(values or {})

    def get_default(self, key: Any) -> str | None:
        return self.values.get(key)

    def set_default(self, key: Any, value: str) -> None:
        self.values[key] = value

    def delete(self, key: Any) -> None:
        self.values.pop(key, None)


class FakePolicyRegistry:
    """Named values per key, standing in for `HKLM/HKCU\\SOFTWARE\\Policies\\...`."""

    def __init__(self, keys: Mapping[RegistryKey, Mapping[str, object]] | None = None) -> None:
        self.keys = dict(keys or {})

    def read_values(self, key: RegistryKey) -> Mapping[str, object] | None:
        return self.keys.get(key)
