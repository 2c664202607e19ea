"""How a dev Core is configured, in-process or from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from native_host.devcore.faults import Faults
from native_host.paths import pedelec_home

Generation = Literal["legacy", "current"]


class DevCoreSettings(BaseModel):
    """Settings of one dev Core instance."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    home: Path = Field(default_factory=lambda: Path(pedelec_home()))
    """The Pedelec home: `runtime.json` goes here, the dev Core's own files under `dev-core/`."""
    generation: Generation = "current"
    port: int = Field(default=0, ge=0, le=65535)
    version: str = "0.4.0"
    """What a current-generation `ping` reports (spec 9.8 item 1)."""
    faults: Faults = Field(default_factory=Faults)
    record_file: Path | None = None
    """Append every received request line here as one JSON object per line."""
    hard_exit: bool = False
    """`exit_on_type` calls `os._exit(3)` (CLI) instead of `crash()` (in-process)."""
