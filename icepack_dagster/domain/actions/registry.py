"""The maintenance actions' definitions, in execution order: the one list that recommendation, SQL
rendering, the runner, outcome comparison, the engine and the Dagster layer iterate over.

`MaintenanceAction` is the list of actions; each member's definition is the `DEFINITION` of the module
of this package named as its value. So a new action is its module, its name in `MaintenanceAction`
and its tests: nothing here changes. The modules are imported by name, not listed a second time; a
member without its module, or a module defining another action, fails this import naming both."""

from __future__ import annotations

from importlib import import_module

from icepack_dagster.domain.actions.definition import ActionDefinition
from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER, MaintenanceAction


def _load(action: MaintenanceAction) -> ActionDefinition:
    """The `DEFINITION` of `domain/actions/<action>.py`, checked to be that action's."""
    module = f"{__package__}.{action.value}"
    try:
        spec = import_module(module).DEFINITION
    except (ModuleNotFoundError, AttributeError) as error:
        raise ImportError(
            f"maintenance action {action.value!r} needs module {module} with a DEFINITION: {error}"
        ) from error
    if not isinstance(spec, ActionDefinition) or spec.action is not action:
        raise ImportError(f"{module}.DEFINITION must be the ActionDefinition of {action.value!r}")
    return spec


ACTIONS: tuple[ActionDefinition, ...] = tuple(_load(action) for action in ACTION_ORDER)
_BY_ACTION = {spec.action: spec for spec in ACTIONS}


def definition(action: MaintenanceAction) -> ActionDefinition:
    """Everything `action` is (`definition.py`)."""
    return _BY_ACTION[action]
