"""Which options a maintenance procedure may be given, and their values in canonical form.

Option keys come from the action's own allowlist (its module's `options`) and values are parsed and
re-printed from their type, never copied through. Options that would weaken a guard are refused by
name, with the reason the action's module gives. `sql/procedures.py` renders the checked options into
a `CALL`.
"""

from __future__ import annotations

from collections.abc import Mapping

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.registry import definition
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.exceptions import InvalidProcedureOptionError

_REFUSED = {
    "table": "the table comes from the table key, not from options",
    "options": "give map options as separate keys",
}


def validate_options(key: TableKey, action: MaintenanceAction, options: Mapping[str, str]) -> dict[str, str]:
    """Options checked against the action's allowlist, values in their canonical printed form."""
    spec = definition(action)
    allowed = spec.options
    clean = {}
    for name, value in options.items():
        if name in _REFUSED:
            reason = f"refused for {action}: {_REFUSED[name]}"
            raise InvalidProcedureOptionError(key.text, name, value, reason)
        if name in spec.refused_options:
            reason = f"not an option icepack ever passes to {action}: {spec.refused_options[name]}"
            raise InvalidProcedureOptionError(key.text, name, value, reason)
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise InvalidProcedureOptionError(
                key.text, name, value, f"not an option of {action} (allowed: {known})"
            )
        if not isinstance(value, str):
            raise InvalidProcedureOptionError(key.text, name, value, "option values are strings")
        try:
            clean[name] = allowed[name].validate(value)
        except ValueError as error:
            raise InvalidProcedureOptionError(key.text, name, value, f"{action}: {error}") from None
    return spec.completed_options(clean)
