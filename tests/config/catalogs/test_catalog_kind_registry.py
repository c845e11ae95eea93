"""Contract: a catalog kind is one module of `config/catalogs/` plus its lines in the registry
(`config/catalogs/__init__.py`: its import, `CatalogSettings`, `CATALOG_KINDS`), as docs/ARCHITECTURE.md
says. A kind planted in a copy of the package that way, and nowhere else, is accepted in the settings
and produces the PyIceberg properties and Spark catalog settings of the same catalog."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "icepack_dagster"

PLANTED_KIND = '''
"""A Hive metastore, planted by a test."""

from typing import Literal

from pydantic import Field

from icepack_dagster.config.catalogs.base import CatalogHome, CatalogKind


class HiveCatalogSettings(CatalogKind):
    kind: Literal["hive"] = "hive"
    uri: str = Field(min_length=1)

    def pyiceberg_properties(self, home: CatalogHome) -> dict[str, str]:
        return {"type": "hive", "uri": self.uri}

    def spark_conf(self, prefix: str, home: CatalogHome) -> dict[str, str]:
        return {f"{prefix}.type": "hive", f"{prefix}.uri": self.uri}
'''
USE_IT = '''
import json
from icepack_dagster.config.catalogs import jdbc_driver_jars, needs_aws_bundle
from icepack_dagster.config.catalogs import pyiceberg_properties, spark_catalog_conf
from icepack_dagster.config.settings import IcepackSettings

settings = IcepackSettings(catalogs={"meta": {"kind": "hive", "uri": "thrift://metastore:9083"}})
catalog = settings.catalogs["meta"]
print(json.dumps({
    "pyiceberg": pyiceberg_properties("meta", catalog, settings),
    "spark": spark_catalog_conf("meta", catalog, settings),
    "jars": jdbc_driver_jars(settings),
    "aws": needs_aws_bundle(settings),
}))
try:
    IcepackSettings(catalogs={"meta": {"kind": "hive"}})
except Exception as error:
    print(type(error).__name__, "uri" in str(error))
'''


def test_a_new_catalog_kind_is_its_module_and_its_registry_lines(tmp_path: Path) -> None:
    copy = tmp_path / "icepack_dagster"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    kinds = copy / "config" / "catalogs"
    (kinds / "hive.py").write_text(PLANTED_KIND)
    registry = kinds / "__init__.py"
    text = registry.read_text()
    for old, new in (
        ("from icepack_dagster.config.catalogs.glue import GlueCatalogSettings\n",
         "from icepack_dagster.config.catalogs.glue import GlueCatalogSettings\n"
         "from icepack_dagster.config.catalogs.hive import HiveCatalogSettings\n"),
        ("| GlueCatalogSettings,", "| GlueCatalogSettings | HiveCatalogSettings,"),
        ("    GlueCatalogSettings,\n)", "    GlueCatalogSettings,\n    HiveCatalogSettings,\n)"),
    ):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    registry.write_text(text)
    changed = [
        p.relative_to(copy).as_posix() for p in sorted(copy.rglob("*.py"))
        if not (PACKAGE / p.relative_to(copy)).exists()
        or (PACKAGE / p.relative_to(copy)).read_bytes() != p.read_bytes()
    ]
    assert changed == ["config/catalogs/__init__.py", "config/catalogs/hive.py"]

    ran = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(USE_IT)],
        cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    produced, refused = ran.stdout.splitlines()
    assert json.loads(produced) == {
        "pyiceberg": {"type": "hive", "uri": "thrift://metastore:9083"},
        "spark": {
            "spark.sql.catalog.meta": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.meta.cache-enabled": "false",
            "spark.sql.catalog.meta.type": "hive",
            "spark.sql.catalog.meta.uri": "thrift://metastore:9083",
        },
        "jars": [],
        "aws": False,
    }
    assert refused == "ValidationError True"  # a half-configured entry names the missing field
