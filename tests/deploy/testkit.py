"""Test helpers for the deployment tests: a `TableStatus` of a given size (sizing needs no real table),
a kubeconfig that lets dagster-k8s build its clients outside a cluster (nothing connects to it), Helm
values pointed at the test's PostgreSQL, and Kubernetes' label-selector matching (for NetworkPolicies
against rendered pods)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from icepack_dagster.domain.table.status import TableStatus
from tests.conftest import PG_HOST, PG_PORT, PG_USER

GIB = 1024**3


def status_of(table: str, live_data_bytes: int) -> TableStatus:
    """A healthy-looking table holding `live_data_bytes` of live data in 256 MiB files."""
    files = max(1, live_data_bytes // (256 * 1024**2))
    return TableStatus(
        table=table, collected_at=datetime(2025, 1, 1, tzinfo=UTC), location=f"s3://lake/{table}",
        format_version=2, snapshot_id=1, live_data_files=files, live_position_delete_files=0,
        live_equality_delete_files=0, live_delete_files=0, live_data_bytes=live_data_bytes,
        live_delete_bytes=0,
        total_records=files * 1000, position_delete_records=0, equality_delete_records=0,
        target_file_size_bytes=512 * 1024**2, small_file_threshold_bytes=64 * 1024**2, small_file_count=0,
        small_file_bytes=0, file_size_histogram=(), manifest_count=1, data_manifest_count=1,
        delete_manifest_count=0, manifest_bytes=8192, partition_count=1, partition_spec_count=1,
        snapshot_count=1, oldest_snapshot_age_seconds=60.0, newest_snapshot_age_seconds=60.0,
        metadata_log_entries=1, branch_count=0, tag_count=0,
    )


def write_kubeconfig(path: Path) -> Path:
    """A kubeconfig naming an API server on a closed local port (discard), with no credentials."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "none", "user": {}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    }))
    return path


def point_at_test_database(values: dict[str, Any], database: str, kubeconfig: Path) -> dict[str, Any]:
    """What an operator changes to run a release's Dagster outside the cluster: the database address
    and the kubeconfig (a copy; `values` is left as it was)."""
    values = copy.deepcopy(values)
    values["postgresql"] |= {"enabled": False, "postgresqlHost": PG_HOST, "postgresqlUsername": PG_USER,
                             "postgresqlDatabase": database, "postgresqlParams": {}}
    values["postgresql"]["service"] = {"port": PG_PORT}
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    launcher |= {"loadInclusterConfig": False, "kubeconfigFile": str(kubeconfig)}
    return values


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics (matchLabels, and matchExpressions with In/NotIn/Exists)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        value, operator = labels.get(expression["key"]), expression["operator"]
        if operator == "In" and value not in expression["values"]:
            return False
        if operator == "NotIn" and value in expression["values"]:
            return False
        if operator == "Exists" and value is None:
            return False
    return True
