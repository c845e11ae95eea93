"""Contract: a REST catalog's OAuth2 credential never shows in Spark's UI. Spark's default redaction
pattern does not match `spark.sql.catalog.<name>.credential`; icepack's sessions set one that does, and
the environment page of a real driver's UI (the page a non-local tier exposes) shows the key masked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.network import free_port

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]




def test_the_spark_ui_masks_the_rest_credential(tmp_path: Path) -> None:
    secret = f"client-S3cret-{uuid.uuid4().hex[:10]}"
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.spark_ui_probe", str(tmp_path), secret, str(free_port())],
        cwd=REPO, capture_output=True, text=True, timeout=180,
        env={k: v for k, v in os.environ.items() if not k.startswith(("ICEPACK_", "PYSPARK_", "SPARK_"))},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    page = done.stdout.strip().splitlines()[-1]
    properties = dict(json.loads(page)["sparkProperties"])
    assert properties["spark.sql.catalog.polaris.credential"] == "*********(redacted)"
    assert properties["spark.sql.catalog.polaris.uri"] == "http://127.0.0.1:9/api/catalog"
    assert secret not in page and secret not in done.stderr
