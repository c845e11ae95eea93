"""Right-sized maintenance runs: how big a table's run pod is and where its Spark runs, from the table's
live data bytes.

A policy is a list of tiers by size. Small tables compact inside the run pod with a local Spark; larger
ones get a bigger pod; the largest drive a Spark cluster (k8s:// or spark://, or a Spark Connect sc://
endpoint). `sizing_tags` turns a `RunSize` into run tags: `dagster-k8s/config` sizes the pod (read by
dagster-k8s when it builds the run's Kubernetes Job), `icepack/spark-conf` tells the run how to start
Spark, `dagster/max_runtime` lets run monitoring stop a runaway run. Pure: no Dagster, Kubernetes or
Spark import.

A k8s:// tier's run pod is the Spark driver; `spark_on_kubernetes` ties its executors to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from icepack_dagster.domain.spark_on_kubernetes import (
    check_secret_refs,
    driver_pod_env,
    kubernetes_executor_conf,
)
from icepack_dagster.domain.status import TableStatus
from icepack_dagster.exceptions import ConfigurationError

K8S_CONFIG_TAG = "dagster-k8s/config"
SPARK_CONF_TAG = "icepack/spark-conf"
SIZE_TAG = "icepack/size"
MAX_RUNTIME_TAG = "dagster/max_runtime"

GIB = 1024**3
_CPU = re.compile(r"^(\d+(\.\d+)?|\d+m)$")
_K8S_MEMORY = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_JVM_MEMORY = re.compile(r"^(\d+)([kmgt])$", re.IGNORECASE)
_LOCAL = re.compile(r"^local\[(\*|\d+)\]$")
_CLUSTER = re.compile(r"^(spark|k8s)://.+$")
_CONNECT = re.compile(r"^sc://.+$")
_K8S_UNITS = {None: 1, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4,
              "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}
_JVM_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
# Share of the pod's memory the driver heap may take; the rest is JVM off-heap, Python and page cache.
DRIVER_HEAP_SHARE = 0.75
# Keys the tier fields own; `spark_conf` may not override them.
_MANAGED_KEYS = frozenset({
    "spark.master", "spark.driver.memory", "spark.executor.instances", "spark.executor.cores",
    "spark.executor.memory", "spark.cores.max", "spark.sql.shuffle.partitions",
    "spark.kubernetes.container.image", "spark.kubernetes.namespace", "spark.kubernetes.driver.pod.name",
    "spark.kubernetes.executor.podNamePrefix", "spark.kubernetes.executor.podTemplateFile",
    "spark.kubernetes.executor.podTemplateContainerName",
    "spark.kubernetes.authenticate.executor.serviceAccountName",
})


def k8s_memory_bytes(quantity: str) -> int:
    """Bytes in a Kubernetes memory quantity such as 6Gi or 512Mi."""
    match = _K8S_MEMORY.match(quantity)
    if match is None:
        raise ValueError(f"{quantity!r} is not a Kubernetes memory quantity (e.g. 6Gi, 512Mi)")
    return int(match.group(1)) * _K8S_UNITS[match.group(2)]


def jvm_memory_bytes(size: str) -> int:
    """Bytes in a JVM/Spark memory size such as 4g or 512m."""
    match = _JVM_MEMORY.match(size)
    if match is None:
        raise ValueError(f"{size!r} is not a Spark memory size (e.g. 4g, 512m)")
    return int(match.group(1)) * _JVM_UNITS[match.group(2).lower()]


class SizingTier(BaseModel):
    """One size class: tables below `below_bytes` of live data (the last tier takes the rest)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$", description="Tier name; the icepack/size tag")
    below_bytes: int | None = Field(default=None, gt=0, description="Live data bytes below this")
    cpu: str = Field(description="Run pod CPU, request = limit (e.g. 2, 500m)")
    memory: str = Field(description="Run pod memory, request = limit (e.g. 6Gi)")
    spark_master: str = Field(description="local[N], local[*], spark://host:7077, k8s://https://..., sc://host")
    driver_memory: str = Field(description="Driver JVM heap (spark.driver.memory), e.g. 4g")
    executor_instances: int | None = Field(default=None, ge=1, le=1000)
    executor_cores: int | None = Field(default=None, ge=1, le=64)
    executor_memory: str | None = Field(default=None, description="Executor heap, e.g. 8g")
    shuffle_partitions: int = Field(default=8, ge=1, le=10000)
    max_runtime_seconds: int = Field(default=3600, ge=60, description="dagster/max_runtime of the run")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Run pod nodeSelector")
    service_account_name: str | None = Field(
        default=None, description="Run pod service account; a k8s:// driver needs one that may create pods"
    )
    executor_service_account_name: str | None = Field(
        default=None, description="Service account of a k8s:// tier's executor pods (they call no API)"
    )
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra spark.* settings")

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, value: str) -> str:
        if not _CPU.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes CPU quantity (e.g. 2, 1.5, 500m)")
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        k8s_memory_bytes(value)
        return value

    @field_validator("driver_memory", "executor_memory")
    @classmethod
    def _jvm_memory(cls, value: str | None) -> str | None:
        if value is not None:
            jvm_memory_bytes(value)
        return value

    @field_validator("spark_conf")
    @classmethod
    def _extra_conf(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key.startswith("spark."):
                raise ValueError(f"spark_conf key {key!r} must start with 'spark.'")
            if key in _MANAGED_KEYS:
                raise ValueError(f"spark_conf key {key!r} is set by the tier's own fields; use them instead")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> SizingTier:
        where = f"sizing tier {self.name!r}"
        executors = (self.executor_instances, self.executor_cores, self.executor_memory)
        if _LOCAL.match(self.spark_master) or _CONNECT.match(self.spark_master):
            if any(value is not None for value in executors):
                raise ValueError(f"{where}: executor_* settings need a cluster master (spark:// or k8s://), "
                                 f"not {self.spark_master}")
            server_keys = sorted(k for k in self.spark_conf if not k.startswith("spark.sql."))
            if _CONNECT.match(self.spark_master) and server_keys:
                raise ValueError(f"{where}: spark_conf keys {server_keys} configure the Spark JVM, which for "
                                 "an sc:// master is the Spark Connect server's; a Connect session takes "
                                 "spark.sql.* only")
        elif _CLUSTER.match(self.spark_master):
            if any(value is None for value in executors):
                raise ValueError(f"{where}: a cluster master needs executor_instances, executor_cores and "
                                 "executor_memory")
            if self.executor_service_account_name and not self.is_kubernetes:
                raise ValueError(f"{where}: executor_service_account_name needs a k8s:// master")
        else:
            raise ValueError(f"{where}: spark_master {self.spark_master!r} is not local[N], local[*], "
                             "spark://, k8s:// or sc://")
        heap, pod = jvm_memory_bytes(self.driver_memory), k8s_memory_bytes(self.memory)
        if heap > DRIVER_HEAP_SHARE * pod:
            raise ValueError(f"{where}: driver_memory {self.driver_memory} is more than "
                             f"{DRIVER_HEAP_SHARE:.0%} of the pod memory {self.memory}; raise memory or "
                             "lower driver_memory")
        return self

    @property
    def is_kubernetes(self) -> bool:
        return self.spark_master.startswith("k8s://")


def default_tiers() -> tuple[SizingTier, ...]:
    """Small tables in a small pod, medium in a bigger one, the largest on Spark on Kubernetes."""
    return (
        SizingTier(name="small", below_bytes=5 * GIB, cpu="2", memory="6Gi", spark_master="local[2]",
                   driver_memory="4g", shuffle_partitions=8, max_runtime_seconds=2 * 3600),
        SizingTier(name="medium", below_bytes=200 * GIB, cpu="4", memory="16Gi", spark_master="local[*]",
                   driver_memory="12g", shuffle_partitions=32, max_runtime_seconds=6 * 3600),
        SizingTier(name="large", cpu="2", memory="8Gi", spark_master="k8s://https://kubernetes.default.svc:443",
                   driver_memory="6g", executor_instances=8, executor_cores=4, executor_memory="24g",
                   shuffle_partitions=256, max_runtime_seconds=12 * 3600,
                   service_account_name="icepack-spark-driver",
                   executor_service_account_name="icepack-user-code",
                   spark_conf={"spark.driver.port": "7078", "spark.blockManager.port": "7079"}),
    )


class SizingPolicy(BaseModel):
    """Tiers ordered by size; `spark_image` is the image Spark executors run on k8s:// (the icepack image),
    `executor_secret_refs` the environment its executors get from Secrets, by reference."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tiers: tuple[SizingTier, ...] = Field(default_factory=default_tiers, min_length=1)
    spark_image: str | None = Field(default=None, description="Executor image of k8s:// tiers")
    executor_secret_refs: dict[str, str] = Field(
        default_factory=dict,
        description="Executor env var -> '<secret name>:<key>' (spark.kubernetes.executor.secretKeyRef.*)",
    )

    @field_validator("executor_secret_refs")
    @classmethod
    def _secret_refs(cls, value: dict[str, str]) -> dict[str, str]:
        check_secret_refs(value)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> SizingPolicy:
        names = [tier.name for tier in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"sizing tier names must be unique: {names}")
        bounds = [tier.below_bytes for tier in self.tiers]
        if bounds[-1] is not None or None in bounds[:-1]:
            raise ValueError("every sizing tier but the last needs below_bytes; the last takes the rest "
                             f"(got {dict(zip(names, bounds, strict=True))})")
        finite = [b for b in bounds if b is not None]
        if finite != sorted(set(finite)):
            raise ValueError(f"sizing tiers must be ordered by strictly increasing below_bytes: {finite}")
        return self

    def tier_for(self, live_data_bytes: int) -> SizingTier:
        for tier in self.tiers:
            if tier.below_bytes is None or live_data_bytes < tier.below_bytes:
                return tier
        raise AssertionError("the last tier is unbounded")


class PodResources(BaseModel):
    """Kubernetes requests and limits of the run pod's container."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: dict[str, str]
    limits: dict[str, str]


class RunSize(BaseModel):
    """What one table's maintenance run gets: pod resources, Spark configuration, time limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
