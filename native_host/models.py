"""Pydantic schemas of the JSON files this host reads. Imported lazily: only when a file exists.

camelCase on disk, snake_case in Python.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """Base for on-disk models: camelCase aliases, unknown keys ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class LaunchConfigFile(CamelModel):
    """`app-launch.json` (spec 4.1): the field types only, strict like the Desktop's serde.

    A missing or mistyped field is a parse failure; the value rules (version, path,
    args) are checked by the launcher so each gets its own `violation`.
    """

    model_config = ConfigDict(strict=True)

    version: int = Field(ge=0, le=4_294_967_295)
    executable_path: str
    background_args: list[str]
