"""The one base of icepack's models: frozen (a value, never changed after it is validated) and closed
(an unknown key is refused naming it, so a typo in settings, a policy rule or a stored record is not
silently dropped). The config is set here once, as PyIceberg's `IcebergBaseModel` does."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    """A frozen pydantic model that rejects unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")
