"""A Spark driver with its UI on (as on the non-local sizing tiers) and a REST catalog holding an OAuth2
credential: prints the environment page of Spark's UI REST API as one JSON line, then stops. Run by
test_spark_redaction.py in its own process, since a JVM holds one SparkContext."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

from icepack_dagster.config.settings import load_settings
from icepack_dagster.spark.session import build_spark_session


def main(home: Path, secret: str, ui_port: str) -> None:
    settings = load_settings(
        home=home,
        catalogs={
            "lake": {"kind": "embedded"},
            "polaris": {"kind": "rest", "uri": "http://127.0.0.1:9/api/catalog", "warehouse": "wh",
                        "client_id": "icepack", "client_secret": secret},
        },
        spark={"master": "local[1]", "driver_memory": "512m",
               "conf": {"spark.ui.enabled": "true", "spark.ui.port": ui_port}},
    )
    spark = build_spark_session(settings)
    try:
        app = spark.sparkContext.applicationId
        url = f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}/environment"
        with urllib.request.urlopen(url, timeout=30) as response:
            print(json.dumps(json.load(response)))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
