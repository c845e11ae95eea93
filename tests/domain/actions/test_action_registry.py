"""Contract: a maintenance action is one module of `domain/actions/` plus its line in the registry's
list, `MaintenanceAction` (the module is named as the value). The registry loads every action once, in
execution order, and refuses a listed action without its module, naming both; each action's module
provides every piece of what the action is (`ActionDefinition`); no module outside `domain/actions/`
names a particular action (`MaintenanceAction.<NAME>` or the action's name as a string), and an action's
module names no action but its own. The checker proves itself on planted violations, and adding one
more action to a copy of the package (a new module and one line in `MaintenanceAction`, nothing else)
makes recommendation, options, rendering, guards and the runner's plans take it up."""

from __future__ import annotations

import ast
import inspect
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from icepack_dagster.domain.actions import registry
from icepack_dagster.domain.actions.definition import ActionDefinition, ProcedureOption
from icepack_dagster.domain.actions.maintenance_action import ACTION_ORDER, MaintenanceAction

PACKAGE = Path(__file__).resolve().parents[3] / "icepack_dagster"
ACTIONS_FOLDER = "domain/actions/"
RENDERINGS = {"map", "string", "timestamp", "plain"}


def test_the_registry_lists_every_action_once_in_execution_order() -> None:
    assert tuple(spec.action for spec in registry.ACTIONS) == ACTION_ORDER
    assert all(registry.definition(action).action is action for action in MaintenanceAction)


@pytest.mark.parametrize("action", list(MaintenanceAction), ids=str)
def test_each_action_is_its_own_module_providing_every_piece(action: MaintenanceAction) -> None:
    spec = registry.definition(action)
    module = inspect.getmodule(spec.plan)
    assert module is not None and module.__name__ == f"icepack_dagster.domain.actions.{action.value}"
    assert module.DEFINITION is spec and isinstance(spec, ActionDefinition)
    assert all(isinstance(o, ProcedureOption) and o.rendering in RENDERINGS for o in spec.options.values())
    assert not set(spec.options) & set(spec.refused_options), "an option is either accepted or refused"
    assert all(callable(o.validate) for o in spec.options.values())
    assert callable(spec.plan) and callable(spec.read_outcome) and callable(spec.completed_options)
    for version in (spec.min_runtime, *(o.min_runtime for o in spec.options.values())):
        assert version is None or (len(version) == 3 and all(isinstance(n, int) for n in version))
    if spec.output_fields is not None:
        assert isinstance(spec.output_fields[0], str)


def _action_names() -> tuple[dict[str, MaintenanceAction], dict[str, MaintenanceAction]]:
    return {a.name: a for a in MaintenanceAction}, {a.value: a for a in MaintenanceAction}


def named_actions(root: Path) -> list[str]:
    """Every place a module of the package at `root` names a particular action, where it may not: any
    `<x>.<MEMBER>` of `MaintenanceAction` or an action's name as a whole string, outside
    `domain/actions/`; in an action's module of `domain/actions/`, any action but its own."""
    members, values = _action_names()
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module == f"{ACTIONS_FOLDER}maintenance_action.py":
            continue  # where the names are declared
        own = values.get(path.stem) if module.startswith(ACTIONS_FOLDER) else None
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in members:
                named = members[node.attr]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values:
                named = values[node.value]
            else:
                continue
            if module.startswith(ACTIONS_FOLDER) and named is own:
                continue
            found.append(f"{module}:{node.lineno}: {named.value}")
    return found


def test_no_module_outside_its_action_names_an_action() -> None:
    assert named_actions(PACKAGE) == []


PLANTED = {
    "a branch on an action in the Dagster layer": (
        "defs/maintenance/planted.py",
        "from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction\n\n"
        "def f(action):\n    return action is MaintenanceAction.REMOVE_ORPHAN_FILES\n",
        "defs/maintenance/planted.py:4: remove_orphan_files",
    ),
    "an action's name as a string in the runner": (
        "spark/planted.py", "ORPHANS = 'remove_orphan_files'\n", "spark/planted.py:1: remove_orphan_files",
    ),
    "one action's module naming another": (
        "domain/actions/rewrite_manifests.py", "X = MaintenanceAction.REWRITE_DATA_FILES\n",
        "domain/actions/rewrite_manifests.py:1: rewrite_data_files",
    ),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_planted_branch_is_reported(name: str, tmp_path: Path) -> None:
    module, source, expected = PLANTED[name]
    copy = tmp_path / "icepack_dagster"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert named_actions(copy) == []
    (copy / module).write_text(source)
    assert named_actions(copy) == [expected]


NEW_ACTION = '''
"""`planted_action`, planted by a test: an action that always has something to do."""

from icepack_dagster.domain.actions.definition import ActionDefinition, ActionEstimate, PlanningContext
from icepack_dagster.domain.actions.definition import ProcedureOption
from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.actions.option_values import int_between


def plan(context: PlanningContext) -> ActionEstimate:
    return ActionEstimate("always", {"snapshot_id": str(context.status.snapshot_id)})


DEFINITION = ActionDefinition(
    action=MaintenanceAction.PLANTED_ACTION,
    plan=plan,
    options={"snapshot_id": ProcedureOption(int_between(0, 2**62), min_runtime=(1, 10, 0))},
    min_runtime=(1, 10, 0),
)
'''
USE_IT = '''
from datetime import timedelta

from icepack_dagster.domain.actions.maintenance_action import MaintenanceAction
from icepack_dagster.domain.health.judging import assess_health
from icepack_dagster.domain.health.thresholds import HealthThresholds
from icepack_dagster.domain.outcomes.history import TableHistory
from icepack_dagster.domain.policy.layering import resolve_policy
from icepack_dagster.domain.recommendation.recommender import recommend
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.spark.prepared_actions import prepare_actions
from tests.factories import NOW, make_status

new = MaintenanceAction("planted_action")
key = TableKey(catalog="lake", namespace=("ns",), name="t")
status = make_status(snapshot_id=7)
health = assess_health(status, HealthThresholds())
history = TableHistory(table=key.text)
policy = resolve_policy(key, {}, ()).policy
chosen = recommend(status, health, policy, history, NOW)
print([a.action.value for a in chosen.actions])
[prepared] = prepare_actions("lake", key, [a for a in chosen.actions if a.action is new], {}, NOW)
print(prepared.statements[-1])
off = resolve_policy(key, {"icepack.action.planted_action.enabled": "false"}, ()).policy
print([s.reason for s in recommend(status, health, off, history, NOW).skipped if s.action is new])
later = recommend(status, health, policy, history.model_copy(update={"last_succeeded": {new: NOW}}),
                  NOW + timedelta(hours=1))
print([s.reason.split(':')[0] for s in later.skipped if s.action is new])
'''


def test_a_new_action_is_one_module_and_its_line_in_the_list(tmp_path: Path) -> None:
    copy = tmp_path / "icepack_dagster"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    actions = copy / "domain" / "actions"
    (actions / "planted_action.py").write_text(NEW_ACTION)
    names = actions / "maintenance_action.py"
    last = '    REMOVE_ORPHAN_FILES = "remove_orphan_files"\n'
    new_name = '    PLANTED_ACTION = "planted_action"\n'
    names.write_text(names.read_text().replace(last, last + new_name))
    changed = [
        p.relative_to(copy).as_posix() for p in sorted(copy.rglob("*.py"))
        if not (PACKAGE / p.relative_to(copy)).exists()
        or (PACKAGE / p.relative_to(copy)).read_bytes() != p.read_bytes()
    ]
    assert changed == [
        f"{ACTIONS_FOLDER}maintenance_action.py", f"{ACTIONS_FOLDER}planted_action.py",
    ]
    repo = PACKAGE.parent
    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(USE_IT)],
        cwd=tmp_path, env={"PYTHONPATH": f"{tmp_path}:{repo}"}, capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    recommended, statement, disabled, cadence = ran.stdout.splitlines()
    assert recommended.endswith("'planted_action']")
    assert statement == "CALL lake.system.planted_action(table => '`lake`.`ns`.`t`', snapshot_id => 7)"
    assert disabled == "['disabled by policy (icepack.action.planted_action.enabled=false)']"
    assert cadence == "['cadence not elapsed']"
    assert named_actions(copy) == []


def test_a_listed_action_without_its_module_fails_the_import_naming_both(tmp_path: Path) -> None:
    copy = tmp_path / "icepack_dagster"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    names = copy / "domain" / "actions" / "maintenance_action.py"
    last = '    REMOVE_ORPHAN_FILES = "remove_orphan_files"\n'
    names.write_text(names.read_text().replace(last, last + '    PLANTED_ACTION = "planted_action"\n'))
    ran = subprocess.run(
        [sys.executable, "-c", "import icepack_dagster.domain.actions.registry"],
        cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode != 0
    needs = "maintenance action 'planted_action' needs module icepack_dagster.domain.actions.planted_action"
    assert needs in ran.stderr
