"""Contract: the catalog and storage examples of docs/CONFIGURATION.md are valid settings, and each
maps to PyIceberg properties and Spark catalog configuration that address the same S3 API and Glue
endpoint; a half S3 key pair fails at start-up naming the missing field; S3 secrets are masked
wherever configuration is shown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from icepack_dagster.config.catalogs import pyiceberg_properties, redact_conf, spark_catalog_conf
from icepack_dagster.config.settings import load_settings
from icepack_dagster.exceptions import ConfigurationError

DOC = Path(__file__).parents[3] / "docs" / "CONFIGURATION.md"
SECRET = "doc-S3-Secret-0a9b"


def catalog_examples() -> list[dict]:  # type: ignore[type-arg]
    section = DOC.read_text().split("## Catalogs", 1)[1].split("## Secrets", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    return [yaml.safe_load(block)["catalogs"] for block in blocks]


def secret_variables(example: dict) -> dict[str, str]:  # type: ignore[type-arg]
    """The environment variables the docs name for an example's secrets."""
    variables = {}
    for name, catalog in example.items():
        prefix = f"ICEPACK_CATALOGS__{name.upper()}__"
        if catalog["kind"] == "postgres":
            variables[prefix + "PASSWORD"] = SECRET
        if catalog["kind"] == "rest" and catalog.get("client_id"):
            variables[prefix + "CLIENT_SECRET"] = SECRET
        if catalog.get("s3", {}).get("access_key_id"):
            variables[prefix + "S3__SECRET_ACCESS_KEY"] = SECRET
    return variables


def test_every_catalog_example_is_valid_and_both_engines_reach_the_same_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    examples = catalog_examples()
    kinds = {c["kind"] for example in examples for c in example.values()}
    assert kinds == {"embedded", "postgres", "rest", "glue"}
    for example in examples:
        with monkeypatch.context() as environment:
            for variable, value in secret_variables(example).items():
                environment.setenv(variable, value)
            settings = load_settings(home=tmp_path, catalogs=example)
        for name, catalog in settings.catalogs.items():
            props = pyiceberg_properties(name, catalog, settings)
            conf = spark_catalog_conf(name, catalog, settings)
            prefix = f"spark.sql.catalog.{name}"
            s3 = getattr(catalog, "s3", None)
            if s3 is not None and s3.endpoint:
                assert props["s3.endpoint"] == conf[f"{prefix}.s3.endpoint"] == s3.endpoint
                assert conf[f"{prefix}.s3.path-style-access"] == "true"
                assert props["s3.force-virtual-addressing"] == "false"
            if s3 is not None and s3.access_key_id:
                assert props["s3.secret-access-key"] == conf[f"{prefix}.s3.secret-access-key"] == SECRET
                assert SECRET not in str(redact_conf(props)) + str(redact_conf(conf))
            if getattr(catalog, "endpoint", None):
                assert props["glue.endpoint"] == conf[f"{prefix}.glue.endpoint"] == catalog.endpoint
            assert SECRET not in settings.model_dump_json() + repr(settings)


@pytest.mark.parametrize("given", ["access_key_id", "secret_access_key"])
def test_half_an_s3_key_pair_fails_naming_the_missing_field(given: str, tmp_path: Path) -> None:
    s3 = {"endpoint": "http://127.0.0.1:9000", given: SECRET}
    catalog = {"kind": "postgres", "database": "d", "user": "u", "warehouse": "s3://b/w", "s3": s3}

    with pytest.raises(ConfigurationError) as caught:
        load_settings(home=tmp_path, catalogs={"lake": catalog})

    missing = "secret_access_key" if given == "access_key_id" else "access_key_id"
    assert "catalogs.lake" in str(caught.value) and missing in str(caught.value)
    assert SECRET not in str(caught.value)
