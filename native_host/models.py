"""The pydantic base of the install record's schema (install and doctor only: the relay
reads its files with small validators of its own, which a host start can afford).

camelCase on disk, snake_case in Python.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """Base for on-disk models: camelCase aliases, unknown keys ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
