"""Right-sized maintenance runs: how big a table's run pod is and where its Spark runs, from the table's
live data bytes.

A policy is a list of tiers by size (`sizing_tiers.py`). Small tables compact inside the run pod with
a local Spark; larger ones get a bigger pod; the largest drive a Spark cluster (k8s:// or spark://,
or a Spark Connect sc:// endpoint). `sizing_tags` turns a `RunSize` into run tags:
`dagster-k8s/config` sizes the pod (read by dagster-k8s when it builds the run's Kubernetes Job),
`icepack/spark-conf` tells the run how to start Spark, `dagster/max_runtime` lets run monitoring stop
a runaway run. Pure: no Dagster, Kubernetes or Spark import.

A k8s:// tier's run pod is the Spark driver; `spark_on_kubernetes` ties its executors to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.sizing.spark_on_kubernetes import driver_pod_env, kubernetes_executor_conf
from icepack_dagster.domain.sizing.tiers import SizingPolicy
from icepack_dagster.domain.table.status import TableStatus
from icepack_dagster.exceptions import ConfigurationError

K8S_CONFIG_TAG = "dagster-k8s/config"
SPARK_CONF_TAG = "icepack/spark-conf"
SIZE_TAG = "icepack/size"
MAX_RUNTIME_TAG = "dagster/max_runtime"

class PodResources(FrozenModel):
    """Kubernetes requests and limits of the run pod's container."""

    requests: dict[str, str]
    limits: dict[str, str]


class RunSize(FrozenModel):
    """What one table's maintenance run gets: pod resources, Spark configuration, time limit."""

    table: str
    tier: str
    live_data_bytes: int = Field(ge=0)
    resources: PodResources
    spark_conf: dict[str, str]
    node_selector: dict[str, str]
    service_account_name: str | None
    kubernetes_driver: bool = Field(description="Spark drives executors on Kubernetes from the run pod")
    max_runtime_seconds: int = Field(gt=0)


def size_run(status: TableStatus, policy: SizingPolicy) -> RunSize:
    """Size the maintenance run of the table `status` describes."""
    tier = policy.tier_for(status.live_data_bytes)
    conf = {
        "spark.master": tier.spark_master,
        "spark.driver.memory": tier.driver_memory,
        "spark.sql.shuffle.partitions": str(tier.shuffle_partitions),
    }
    if tier.executor_instances is not None and tier.executor_cores is not None and tier.executor_memory:
        conf |= {
            "spark.executor.instances": str(tier.executor_instances),
            "spark.executor.cores": str(tier.executor_cores),
            "spark.executor.memory": tier.executor_memory,
            "spark.dynamicAllocation.enabled": "false",
        }
        if tier.spark_master.startswith("spark://"):
            # A standalone master hands out cores, not executors: cap the app at what the tier asks for.
            conf["spark.cores.max"] = str(tier.executor_instances * tier.executor_cores)
    if tier.is_kubernetes:
        if not policy.spark_image:
            raise ConfigurationError(
                f"table {status.table}: sizing tier {tier.name!r} runs Spark on Kubernetes, but the sizing "
                "policy has no spark_image (the icepack image the executors run)"
            )
        conf |= kubernetes_executor_conf(policy.spark_image, tier.executor_service_account_name,
                                         policy.executor_secret_refs)
    conf |= tier.spark_conf
    quantities = {"cpu": tier.cpu, "memory": tier.memory}
    return RunSize(
        table=status.table,
        tier=tier.name,
        live_data_bytes=status.live_data_bytes,
        resources=PodResources(requests=dict(quantities), limits=dict(quantities)),
        spark_conf=conf,
        node_selector=dict(tier.node_selector),
        service_account_name=tier.service_account_name,
        kubernetes_driver=tier.is_kubernetes,
        max_runtime_seconds=tier.max_runtime_seconds,
    )


def k8s_config_tag(size: RunSize) -> dict[str, object]:
    """The value of the `dagster-k8s/config` run tag (dagster-k8s's user-defined config, snake_case)."""
    container: dict[str, object] = {
        "resources": {"requests": dict(size.resources.requests), "limits": dict(size.resources.limits)},
    }
    if size.kubernetes_driver:
        container["env"] = driver_pod_env()
    pod_spec: dict[str, object] = {}
    if size.node_selector:
        pod_spec["node_selector"] = dict(size.node_selector)
    if size.service_account_name:
        pod_spec["service_account_name"] = size.service_account_name
    # Only a k8s:// driver asks the Kubernetes API for (executor) pods. Set either way: the chart's
    # code-location context turns the token on for every run, and this tag is applied after it.
    pod_spec["automount_service_account_token"] = size.kubernetes_driver
    return {
        "container_config": container,
        "pod_spec_config": pod_spec,
        "pod_template_spec_metadata": {"labels": {SIZE_TAG: size.tier}},
    }


def spark_conf_tag(size: RunSize) -> str:
    """The value of the `icepack/spark-conf` run tag: the Spark settings the run starts its session with."""
    return json.dumps(size.spark_conf, sort_keys=True)


def sizing_tags(size: RunSize) -> dict[str, str]:
    """All run tags that carry the size: pod (dagster-k8s), Spark, tier, time limit."""
    return {
        K8S_CONFIG_TAG: json.dumps(k8s_config_tag(size), sort_keys=True),
        SPARK_CONF_TAG: spark_conf_tag(size),
        SIZE_TAG: size.tier,
        MAX_RUNTIME_TAG: str(size.max_runtime_seconds),
    }


def read_spark_conf_tag(tags: Mapping[str, str], table: str) -> dict[str, str] | None:
    """The Spark settings a run's `icepack/spark-conf` tag carries, or None when the run has none."""
    raw = tags.get(SPARK_CONF_TAG)
    if raw is None:
        return None
    try:
        conf = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"table {table}: run tag {SPARK_CONF_TAG} is not JSON ({error})") from None
    if not isinstance(conf, dict) or not all(isinstance(v, str) for v in conf.values()):
        raise ConfigurationError(f"table {table}: run tag {SPARK_CONF_TAG} must be a JSON object of strings")
    bad = sorted(k for k in conf if not k.startswith("spark."))
    if bad or "spark.master" not in conf or "spark.driver.memory" not in conf:
        raise ConfigurationError(
            f"table {table}: run tag {SPARK_CONF_TAG} needs spark.master and spark.driver.memory and only "
            f"spark.* keys (bad keys: {bad})"
        )
    return conf


def spark_settings_update(conf: Mapping[str, str]) -> dict[str, object]:
    """`SparkSettings` fields for a sized run: master and driver memory as fields, the rest as conf."""
    rest = {k: v for k, v in conf.items() if k not in ("spark.master", "spark.driver.memory")}
    return {"master": conf["spark.master"], "driver_memory": conf["spark.driver.memory"], "conf": rest}
