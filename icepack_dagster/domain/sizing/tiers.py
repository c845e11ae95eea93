"""The tiers a maintenance run is sized by: each a size bound on the table's live data bytes, the run
pod's CPU and memory, and where its Spark runs (local in the pod, a Spark cluster, or Spark Connect).
Validated so that a tier that could not run (a heap larger than its pod, executors without a cluster)
fails at start-up naming the field. `run_sizing.py` picks a tier for a table. Pure."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.domain.sizing.spark_on_kubernetes import check_secret_refs

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


class SizingTier(FrozenModel):
    """One size class: tables below `below_bytes` of live data (the last tier takes the rest)."""

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


class SizingPolicy(FrozenModel):
    """Tiers ordered by size; `spark_image` is the image Spark executors run on k8s:// (the icepack image),
    `executor_secret_refs` the environment its executors get from Secrets, by reference."""

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
