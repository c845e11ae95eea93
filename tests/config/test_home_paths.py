"""Contract: an ICEPACK_HOME whose path holds a space, a percent sign, a `#` or a `?` (which a URI
reads as the start of a fragment or a query) works like any other: the
embedded catalog opens, Spark writes the table's files under the home's own warehouse directory (not a
percent-encoded sibling), PyIceberg reads the very table Spark wrote, and the orphan model lists the
table's own directory and finds exactly the one file planted there. Run in a process of its own,
since a Spark session's catalog configuration is fixed when it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

_SCRIPT = """
import json, sys
from pathlib import Path
from icepack_dagster.domain.table.key import TableKey
from icepack_dagster.engine import Engine
from icepack_dagster.config.settings import load_settings

home = Path(sys.argv[1])
settings = load_settings(home=home, catalogs={"lake": {"kind": "embedded"}},
                         spark={"master": "local[1]", "driver_memory": "1g"})
engine = Engine(settings)
engine.catalogs.get("lake").create_namespace_if_not_exists("ns")
spark = engine.spark()
spark.sql("CREATE TABLE lake.ns.t (id bigint) USING iceberg")
spark.sql("INSERT INTO lake.ns.t VALUES (1), (2), (3)")
key = TableKey(catalog="lake", namespace=("ns",), name="t")
status = engine.status(key)
table_dir = home / "warehouse" / "ns" / "t"
(table_dir / "data" / "planted.parquet").write_bytes(b"orphan")
unreferenced = engine.unreferenced_files(key)
found = [f.location for f in (*unreferenced.young, *unreferenced.removable)]
print(json.dumps({"files": status.live_data_files, "records": status.total_records, "unreferenced": found}))
"""


@pytest.mark.parametrize(
    "folder",
    [
        "ice pack%41 100%",  # a space, an escape-looking %41 and a bare %
        "ice#pack?v=1",  # a URI fragment and query marker
    ],
)
def test_a_home_with_uri_special_characters_keeps_everything_inside_it(tmp_path: Path, folder: str) -> None:
    home = tmp_path / folder
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICEPACK_")}
    if jar_cache := os.environ.get("ICEPACK_SPARK__JAR_CACHE"):
        env["ICEPACK_SPARK__JAR_CACHE"] = jar_cache
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(home)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    planted = str(home / "warehouse" / "ns" / "t" / "data" / "planted.parquet")
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "files": 1, "records": 3, "unreferenced": [planted]
    }
    written = list(tmp_path.rglob("*.parquet"))
    assert written and all(home / "warehouse" in p.parents for p in written), written
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder]  # no encoded sibling directory
