"""Windows registries as dicts: Windows cannot run here, so the installer's, doctor's and
managed-policy readers' registry access is injected and these stand in for it."""

from __future__ import annotations

from collections.abc import Mapping

from native_host.install.locations import RegistryKey, RegistryView

SHARED_HIVES = frozenset({"HKCU"})
"""64-bit Windows keeps HKCU\\Software as one key seen in both views and HKLM\\SOFTWARE as
two (WOW6432Node); Microsoft's "Registry Keys Affected by WOW64"."""


class FakeRegistry:
    """The HKCU/HKLM default values the installer and doctor read and write, with the two
    views of 64-bit Windows: a key under a shared hive is stored once, in the 64-bit view."""

    def __init__(self, values: dict[RegistryKey, str] | None = None) -> None:
        self.values: dict[RegistryKey, str] = {}
        for key, value in (values or {}).items():
            self.set_default(key, value)

    @staticmethod
    def _stored(key: RegistryKey) -> RegistryKey:
        return key.in_view(RegistryView.WOW64_64) if key.hive in SHARED_HIVES else key

    def get_default(self, key: RegistryKey) -> str | None:
        return self.values.get(self._stored(key))

    def set_default(self, key: RegistryKey, value: str) -> None:
        self.values[self._stored(key)] = value

    def delete(self, key: RegistryKey) -> None:
        self.values.pop(self._stored(key), None)


class FakePolicyRegistry:
    """Named values per key, standing in for `HKLM/HKCU\\SOFTWARE\\Policies\\...`."""

    def __init__(self, keys: Mapping[RegistryKey, Mapping[str, object]] | None = None) -> None:
        self.keys = dict(keys or {})

    def read_values(self, key: RegistryKey) -> Mapping[str, object] | None:
        return self.keys.get(key)
