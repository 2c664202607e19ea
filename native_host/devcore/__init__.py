"""The dev Core: a faithful `pedelec-core-ipc-v1` peer to test and demo the host without Desktop.

See docs/dev-core.md. Plays either protocol generation (spec 9.8).
"""

from native_host.devcore.faults import Faults, OversizeEvent
from native_host.devcore.record import RecordedRequest
from native_host.devcore.server import DevCore
from native_host.devcore.settings import DevCoreSettings

__all__ = ["DevCore", "DevCoreSettings", "Faults", "OversizeEvent", "RecordedRequest"]
