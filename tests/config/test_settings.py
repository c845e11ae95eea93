"""Contract: settings come from ICEPACK_* variables and an optional YAML file (the platform section
also from ICEPACK_PLATFORM_*); a bad file is an error naming it; the default is one
embedded catalog under the home; a half-configured catalog fails at start-up naming the field; secrets
never appear in output."""

from __future__ import annotations

from pathlib import Path

import pytest

from icepack_dagster.config.catalogs import (
    EmbeddedCatalogSettings,
    pyiceberg_properties,
    redact_conf,
    spark_catalog_conf,
)
from icepack_dagster.config.settings import load_settings
from icepack_dagster.exceptions import ConfigurationError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for key in [k for k in os.environ if k.startswith("ICEPACK_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("ICEPACK_HOME", str(tmp_path / "home"))


def test_default_is_one_embedded_catalog_under_home(tmp_path: Path) -> None:
    settings = load_settings()
    assert list(settings.catalogs) == ["lake"]
    assert isinstance(settings.catalogs["lake"], EmbeddedCatalogSettings)
    props = pyiceberg_properties("lake", settings.catalogs["lake"], settings)
    assert props["uri"].startswith(f"sqlite:///{tmp_path / 'home' / 'catalog.db'}")
    assert props["warehouse"] == (tmp_path / "home" / "warehouse").as_uri()
    conf = spark_catalog_conf("lake", settings.catalogs["lake"], settings)
    assert conf["spark.sql.catalog.lake.uri"] == f"jdbc:sqlite:{tmp_path / 'home' / 'catalog.db'}"
    assert conf["spark.sql.catalog.lake.warehouse"] == props["warehouse"]


def test_rest_catalog_without_secret_names_the_missing_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__KIND", "rest")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__URI", "https://polaris.example.com/api/catalog")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__WAREHOUSE", "prod")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__CLIENT_ID", "icepack")
    with pytest.raises(ConfigurationError, match="client_secret is missing"):
        load_settings()


def test_rest_catalog_maps_to_both_engines_and_secrets_stay_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__KIND", "rest")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__URI", "https://polaris.example.com/api/catalog")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__WAREHOUSE", "prod")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__CLIENT_ID", "icepack")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__CLIENT_SECRET", "s3cr3t-value")
    monkeypatch.setenv("ICEPACK_CATALOGS__PROD__VENDED_CREDENTIALS", "true")
    settings = load_settings()
    catalog = settings.catalogs["prod"]
    props = pyiceberg_properties("prod", catalog, settings)
    conf = spark_catalog_conf("prod", catalog, settings)
    assert props["credential"] == "icepack:s3cr3t-value" == conf["spark.sql.catalog.prod.credential"]
    assert props["scope"] == "PRINCIPAL_ROLE:ALL" == conf["spark.sql.catalog.prod.scope"]
    assert props["header.X-Iceberg-Access-Delegation"] == "vended-credentials"
    assert conf["spark.sql.catalog.prod.header.X-Iceberg-Access-Delegation"] == "vended-credentials"
    assert "s3cr3t-value" not in settings.model_dump_json()
    assert "s3cr3t-value" not in repr(settings)
    assert "s3cr3t-value" not in str(redact_conf(conf)) + str(redact_conf(props))


def test_yaml_file_is_read_and_env_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "icepack.yaml"
    config.write_text("spark:\n  master: spark://sparkmaster:7077\nstatus_workers: 4\n")
    monkeypatch.setenv("ICEPACK_CONFIG", str(config))
    monkeypatch.setenv("ICEPACK_STATUS_WORKERS", "2")
    settings = load_settings()
    assert settings.spark.master == "spark://sparkmaster:7077"
    assert settings.status_workers == 2


def test_platform_section_from_yaml_and_both_environment_spellings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "icepack.yaml"
    config.write_text("platform:\n  health_sync_cron: '0 * * * *'\n  max_maintenance_in_flight: 5\n")
    monkeypatch.setenv("ICEPACK_CONFIG", str(config))
    monkeypatch.setenv("ICEPACK_PLATFORM_MAX_MAINTENANCE_IN_FLIGHT", "7")
    monkeypatch.setenv("ICEPACK_PLATFORM__HEALTH_SYNC_BATCH_SIZE", "9")
    platform = load_settings().platform
    assert (platform.health_sync_cron, platform.max_maintenance_in_flight) == ("0 * * * *", 7)
    assert platform.health_sync_batch_size == 9
    monkeypatch.setenv("ICEPACK_PLATFORM_HEALTH_SYNC_CRON", "hourly")
    named = r"platform\.health_sync_cron \(ICEPACK_PLATFORM_HEALTH_SYNC_CRON\)"
    with pytest.raises(ConfigurationError, match=named):
        load_settings()


def test_sizing_tiers_come_from_the_config_file_and_bad_ones_name_the_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tier = "{name: %s, below_bytes: %d, cpu: '1', memory: 2Gi, spark_master: 'local[1]', driver_memory: 1g}"
    last = "{name: big, cpu: '2', memory: 4Gi, spark_master: 'local[2]', driver_memory: 2g}"
    config = tmp_path / "icepack.yaml"
    config.write_text(f"platform:\n  sizing_tiers:\n    - {tier % ('tiny', 1024)}\n    - {last}\n")
    monkeypatch.setenv("ICEPACK_CONFIG", str(config))
    policy = load_settings().platform.sizing_policy()
    assert [t.name for t in policy.tiers] == ["tiny", "big"] and policy.tier_for(10).name == "tiny"
    config.write_text(f"platform:\n  sizing_tiers:\n    - {last}\n    - {tier % ('tiny', 1024)}\n")
    with pytest.raises(ConfigurationError, match="platform: .*below_bytes"):
        load_settings()


def test_the_sizing_example_in_the_kubernetes_doc_loads_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "KUBERNETES.md").read_text()
    start = doc.index("```yaml\nplatform:\n  run_sizing: true")
    example = doc[start + len("```yaml\n"): doc.index("```", start + 7)]
    config = tmp_path / "icepack.yaml"
    config.write_text(example)
    monkeypatch.setenv("ICEPACK_CONFIG", str(config))
    policy = load_settings().platform.sizing_policy()
    assert [t.name for t in policy.tiers] == ["small", "large"]
    assert policy.executor_secret_refs == {"AWS_WEB_IDENTITY_TOKEN_FILE": "icepack-aws:token-file"}


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "cannot read the file"), ("spark: [unclosed", "not valid YAML"), ("- a\n- b\n", "a mapping")],
)
def test_a_bad_config_file_names_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str | None, problem: str
) -> None:
    config = tmp_path / "icepack.yaml"
    if content is not None:
        config.write_text(content)
    monkeypatch.setenv("ICEPACK_CONFIG", str(config))
    with pytest.raises(ConfigurationError, match=f"ICEPACK_CONFIG={config}: .*{problem}"):
        load_settings()


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("ICEPACK_SPARK__MASTER", "http://nope", "spark.master"),
        ("ICEPACK_STATUS_WORKERS", "0", "status_workers"),
        ("ICEPACK_DEFAULT_CATALOG", "missing", "default_catalog"),
        ("ICEPACK_THRESHOLDS__MANIFEST_COUNT_CRITICAL", "1", "thresholds"),
    ],
)
def test_invalid_settings_name_the_field(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=field):
        load_settings()


def test_postgres_password_is_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(
        catalogs={
            "pg": {
                "kind": "postgres",
                "database": "cat",
                "user": "ice",
                "password": "pw-123456",
                "warehouse": "s3://bucket/wh",
            }
        }
    )
    props = pyiceberg_properties("pg", settings.catalogs["pg"], settings)
    assert "pw-123456" in props["uri"]
    assert "pw-123456" not in str(redact_conf(props))
    assert "pw-123456" not in settings.model_dump_json()


def test_postgres_credentials_with_uri_characters_are_encoded() -> None:
    settings = load_settings(
        catalogs={
            "pg": {
                "kind": "postgres",
                "database": "cat",
                "user": "ice@team",
                "password": "S3cr@t/pa:ss%w?rd#x",
                "warehouse": "s3://bucket/wh",
            }
        }
    )
    from sqlalchemy.engine import make_url

    url = make_url(pyiceberg_properties("pg", settings.catalogs["pg"], settings)["uri"])
    assert (url.username, url.password, url.host, url.database) == (
        "ice@team",
        "S3cr@t/pa:ss%w?rd#x",
        "127.0.0.1",
        "cat",
    )
