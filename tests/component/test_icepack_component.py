"""`IcepackComponent` in process: its YAML attributes reach the definitions (the deployment name names
the partitions definition and the maintenance pool, group and owners go on every asset, `automation`
decides how sensors and schedules start), attributes left out come from the `ICEPACK_*` environment, a
secret is an environment variable's name in the YAML and a `SecretStr` in the settings (a secret written
as a value is refused naming its path), a bad attribute
fails naming it, the code location icepack ships is the same component, the scaffolder names the
deployment after its folder, and every attribute carries the description `dg` and the UI show."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pytest
import yaml

from icepack_dagster import IcepackComponent
from icepack_dagster.component.scaffolder import deployment_name
from icepack_dagster.definitions import build_definitions, defs
from icepack_dagster.exceptions import ConfigurationError

PACKAGE = Path(__file__).resolve().parents[2] / "icepack_dagster"
LOCATION_YAML = PACKAGE / "component" / "location" / "defs.yaml"


@pytest.fixture(autouse=True)
def no_icepack_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only what a test sets: the run's own ICEPACK_* variables are unset, the home is the test's."""
    for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("ICEPACK_HOME", str(tmp_path / "home"))


def component(text: str) -> IcepackComponent:
    return IcepackComponent.resolve_from_yaml(text)


def test_the_name_group_owners_and_automation_reach_every_definition() -> None:
    built = dg.build_defs_for_component(
        component("name: north\ngroup: lakehouse\nowners: ['team:data-platform']\nautomation: stopped\n")
    )
    graph = built.resolve_asset_graph()
    partitioned = [graph.get(key) for key in graph.get_all_asset_keys() if graph.get(key).partitions_def]
    assert {node.partitions_def.name for node in partitioned} == {"iceberg_tables_north"}  # type: ignore[union-attr]
    for key in graph.get_all_asset_keys():
        assert graph.get(key).group_name == "lakehouse"
        assert graph.get(key).owners == ["team:data-platform"]
    maintenance = built.resolve_job_def("north_maintenance")
    assert {op.pool for op in maintenance.graph.node_defs} & {"north_maintenance"}
    assert all(s.default_status == dg.DefaultSensorStatus.STOPPED for s in built.sensors or [])
    assert all(s.default_status == dg.DefaultScheduleStatus.STOPPED for s in built.schedules or [])


def test_two_components_in_one_code_location_have_their_own_names_and_partitions() -> None:
    built = [dg.build_defs_for_component(component(f"name: {name}\n")) for name in ("north", "south")]
    merged = dg.Definitions.merge(*built)  # what a project with both components loads
    dg.Definitions.validate_loadable(merged)
    graph = merged.resolve_asset_graph()
    statuses = [graph.get(dg.AssetKey([name, "table_status"])) for name in ("north", "south")]
    assert {node.partitions_def.name for node in statuses} == {  # type: ignore[union-attr]
        "iceberg_tables_north", "iceberg_tables_south"
    }
    assert sorted(merged.resources or {}) == ["north_icepack", "north_spark", "south_icepack", "south_spark"]


def test_attributes_left_out_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICEPACK_PLATFORM_HEALTH_SYNC_CRON", "0 * * * *")
    monkeypatch.setenv("ICEPACK_PLATFORM_MAINTENANCE_INTERVAL_SECONDS", "45")
    text = "platform:\n  maintenance_interval_seconds: 90\ninclude: ['lake.sales.*']\n"
    settings = component(text).settings()
    assert settings.platform.health_sync_cron == "0 * * * *"  # from the environment
    assert settings.platform.maintenance_interval_seconds == 90  # the YAML wins over the environment
    assert settings.include == ["lake.sales.*"]


def test_a_secret_is_a_variable_name_in_the_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-client-value"
    monkeypatch.setenv("POLARIS_CLIENT_SECRET", secret)
    text = (
        "catalogs:\n  polaris:\n    kind: rest\n    uri: https://polaris.example.com/api/catalog\n"
        "    warehouse: analytics\n    client_id: icepack\n"
        "    client_secret: '{{ env.POLARIS_CLIENT_SECRET }}'\n"
    )
    settings = component(text).settings()
    client_secret = settings.catalogs["polaris"].client_secret  # type: ignore[union-attr]
    assert client_secret is not None and client_secret.get_secret_value() == secret
    assert secret not in text and secret not in repr(settings) and secret not in repr(component(text))


def test_a_bad_attribute_fails_naming_it() -> None:
    named = r"(?s)IcepackComponent: .*platform\.max_maintenance_in_flight"
    with pytest.raises(ConfigurationError, match=named):
        component("platform:\n  max_maintenance_in_flight: 0\n").settings()
    with pytest.raises(ValueError, match="(?s)name.*should match pattern"):
        component("name: Not-A-Name\n")


def test_the_shipped_code_location_is_the_component_with_every_setting_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shipped_yaml = yaml.safe_load(LOCATION_YAML.read_text())
    assert shipped_yaml == {"type": "icepack_dagster.IcepackComponent", "attributes": {}}
    monkeypatch.setenv("ICEPACK_PLATFORM_DEPLOYMENT_NAME", "shipped")
    shipped = defs()
    direct = build_definitions()
    assert {s.name for s in shipped.sensors or []} == {s.name for s in direct.sensors or []}
    assert {j.name for j in shipped.jobs or []} == {j.name for j in direct.jobs or []}
    resources = ["shipped_icepack", "shipped_spark"]
    assert sorted(shipped.resources or {}) == sorted(direct.resources or {}) == resources
    table_status = shipped.resolve_asset_graph().get(dg.AssetKey(["shipped", "table_status"]))
    assert table_status.partitions_def.name == "iceberg_tables_shipped"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("folder", "name"),
    [("lake_health", "lake_health"), ("Lake-Health", "lake_health"), ("2026 lake", "icepack_2026_lake"),
     ("---", "icepack"), ("a" * 50, "a" * 40)],
)
def test_the_scaffolded_deployment_is_named_after_its_folder(folder: str, name: str) -> None:
    assert deployment_name(Path(folder)) == name
    assert component(f"name: {name}\n").name == name  # a name the component accepts


def test_every_attribute_is_described_for_dg_and_the_docs_tab() -> None:
    schema = IcepackComponent.get_model_cls().model_json_schema()
    assert {name for name, field in schema["properties"].items() if not field.get("description")} == set()


REST = "kind: rest, uri: 'https://polaris.example.com', warehouse: w, client_id: icepack"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (f"catalogs:\n  polaris: {{{REST}, client_secret: plain}}\n", "catalogs.polaris.client_secret"),
        (
            f"catalogs:\n  polaris: {{{REST}, client_secret: '{{{{ env.S }}}}', "
            "s3: {access_key_id: a, secret_access_key: plain}}\n",
            "catalogs.polaris.s3.secret_access_key",
        ),
        (
            "catalogs:\n  pg: {kind: postgres, host: h, database: d, user: u, password: plain}\n",
            "catalogs.pg.password",
        ),
        ("platform:\n  alert_webhook_url: https://hooks.example.com/T0\n", "platform.alert_webhook_url"),
        ("state_url: postgresql://icepack:plain@db/icepack\n", "state_url"),
    ],
)
def test_a_secret_written_as_a_value_is_refused_naming_it(text: str, named: str) -> None:
    refused = rf"(?s)IcepackComponent: {named.replace('.', '[.]')}: a secret written as a value"
    with pytest.raises(Exception, match=refused):
        component(text)


def test_templated_secrets_and_plain_values_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S", "from-the-environment")
    accepted = component(
        f"catalogs:\n  polaris: {{{REST}, client_secret: '{{{{ env.S }}}}'}}\n"
        "state_url: postgresql://icepack@db/icepack\nplatform:\n  max_maintenance_in_flight: 3\n"
    )
    assert accepted.catalogs == {"polaris": {
        "kind": "rest", "uri": "https://polaris.example.com", "warehouse": "w", "client_id": "icepack",
        "client_secret": "from-the-environment",
    }}


@pytest.mark.parametrize("value", ["123", "012345", "'quoted'", "1e5", "[1, 2]", "true"])
def test_a_templated_secret_stays_text(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dagster renders templates natively (`123` would become the number 123); a secret is text."""
    monkeypatch.setenv("PG_PASSWORD", value)
    monkeypatch.setenv("PG_PORT", "5433")
    text = (
        "catalogs:\n  pg: {kind: postgres, host: h, port: '{{ env.PG_PORT }}', database: d, user: u, "
        "password: '{{ env.PG_PASSWORD }}', warehouse: /w}\n"
        "state_url: 'postgresql://u:{{ env.PG_PASSWORD }}@h/d'\n"
    )
    settings = component(text).settings()
    assert settings.catalogs["pg"].password.get_secret_value() == value  # type: ignore[union-attr]
    assert settings.catalogs["pg"].port == 5433  # type: ignore[union-attr]
    assert settings.state_url is not None and settings.state_url.get_secret_value() == f"postgresql://u:{value}@h/d"


def test_a_secret_naming_an_unset_variable_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICEPACK_TEST_UNSET_WEBHOOK", raising=False)
    with pytest.raises(Exception, match=r"(?s)platform\.alert_webhook_url .* resolves to nothing"):
        component("platform:\n  alert_webhook_url: '{{ env.ICEPACK_TEST_UNSET_WEBHOOK }}'\n")
