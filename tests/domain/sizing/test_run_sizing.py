"""Contract: `run_sizing` picks one tier per table by live data bytes and turns it into consistent run
tags; a bad policy or a bad tag fails naming the tier, the field or the table.

Tiers: small < 5 GiB (local[2], 2 CPU / 6Gi), medium < 200 GiB (local[*], 4 CPU / 16Gi), large on
Spark on Kubernetes with executors. Pod requests equal limits; the driver heap fits the pod; the
`icepack/spark-conf` tag reads back to exactly the Spark settings it was written from, and those
settings build a valid `SparkSettings`.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from icepack_dagster.config.spark import SparkSettings
from icepack_dagster.domain.sizing.run_sizing import (
    K8S_CONFIG_TAG,
    MAX_RUNTIME_TAG,
    SIZE_TAG,
    SPARK_CONF_TAG,
    k8s_config_tag,
    read_spark_conf_tag,
    size_run,
    sizing_tags,
    spark_settings_update,
)
from icepack_dagster.domain.sizing.tiers import SizingPolicy, SizingTier
from icepack_dagster.exceptions import ConfigurationError
from tests.deploy.testkit import GIB
from tests.factories import make_status

POLICY = SizingPolicy(spark_image="registry.example.com/icepack-dagster:0.1.0")


@pytest.mark.parametrize(
    ("live_bytes", "tier", "master", "cpu", "memory"),
    [
        (0, "small", "local[2]", "2", "6Gi"),
        (5 * GIB - 1, "small", "local[2]", "2", "6Gi"),
        (5 * GIB, "medium", "local[*]", "4", "16Gi"),
        (200 * GIB - 1, "medium", "local[*]", "4", "16Gi"),
        (200 * GIB, "large", "k8s://https://kubernetes.default.svc:443", "2", "8Gi"),
    ],
)
def test_tier_boundaries(live_bytes: int, tier: str, master: str, cpu: str, memory: str) -> None:
    size = size_run(make_status(table="lake.sales.orders", live_data_bytes=live_bytes), POLICY)
    assert (size.tier, size.spark_conf["spark.master"]) == (tier, master)
    assert size.resources.requests == size.resources.limits == {"cpu": cpu, "memory": memory}


def test_large_tier_drives_executors_on_kubernetes() -> None:
    size = size_run(make_status(table="lake.sales.orders", live_data_bytes=2048 * GIB), POLICY)
    assert size.spark_conf["spark.executor.instances"] == "8"
    assert size.spark_conf["spark.executor.memory"] == "24g"
    assert size.spark_conf["spark.kubernetes.container.image"] == POLICY.spark_image
    config = k8s_config_tag(size)
    assert config["pod_spec_config"] == {"service_account_name": "icepack-spark-driver",
                                         "automount_service_account_token": True}
    env = {e["name"]: e["value_from"]["field_ref"]["field_path"]  # type: ignore[index]
           for e in config["container_config"]["env"]}  # type: ignore[index]
    assert env == {"SPARK_LOCAL_HOSTNAME": "status.podIP", "ICEPACK_POD_NAMESPACE": "metadata.namespace",
                   "ICEPACK_POD_NAME": "metadata.name", "ICEPACK_RUN_ID": "metadata.labels['dagster/run-id']"}
    # Spark resolves these references when it reads the settings (tests/deploy/test_spark_on_kubernetes.py).
    assert size.spark_conf["spark.kubernetes.namespace"] == "${env:ICEPACK_POD_NAMESPACE}"
    assert size.spark_conf["spark.kubernetes.executor.podNamePrefix"] == "icepack-${env:ICEPACK_RUN_ID}"


def test_executor_secret_refs_are_checked_and_become_secret_key_refs() -> None:
    policy = SizingPolicy(spark_image="img:1", executor_secret_refs={"CATALOG_SECRET": "creds:secret"})
    size = size_run(make_status(table="lake.sales.orders", live_data_bytes=2048 * GIB), policy)
    assert size.spark_conf["spark.kubernetes.executor.secretKeyRef.CATALOG_SECRET"] == "creds:secret"
    with pytest.raises(ValueError, match="executor_secret_refs.X: 'creds' is not"):
        SizingPolicy(executor_secret_refs={"X": "creds"})
    with pytest.raises(ValueError, match="'1X' is not an environment variable name"):
        SizingPolicy(executor_secret_refs={"1X": "creds:key"})


def test_kubernetes_tier_without_an_image_names_the_table() -> None:
    with pytest.raises(ConfigurationError, match=r"table lake\.big\.t: .*'large'.*spark_image"):
        size_run(make_status(table="lake.big.t", live_data_bytes=500 * GIB), SizingPolicy())


def test_standalone_tier_caps_cores() -> None:
    tier = SizingTier(name="cluster", cpu="1", memory="4Gi", spark_master="spark://spark-master:7077",
                      driver_memory="2g", executor_instances=3, executor_cores=2, executor_memory="4g")
    size = size_run(make_status(table="lake.a.b", live_data_bytes=GIB), SizingPolicy(tiers=(tier,)))
    assert size.spark_conf["spark.cores.max"] == "6"
    # No token: the run pod is a client of the standalone master, not of the Kubernetes API.
    assert k8s_config_tag(size)["pod_spec_config"] == {"automount_service_account_token": False}


def test_tags_carry_the_size_and_read_back() -> None:
    size = size_run(make_status(table="lake.sales.orders", live_data_bytes=10 * GIB), POLICY)
    tags = sizing_tags(size)
    assert set(tags) == {K8S_CONFIG_TAG, SPARK_CONF_TAG, SIZE_TAG, MAX_RUNTIME_TAG}
    assert all(isinstance(value, str) for value in tags.values())
    assert json.loads(tags[K8S_CONFIG_TAG]) == k8s_config_tag(size)
    assert tags[SIZE_TAG] == "medium" and tags[MAX_RUNTIME_TAG] == str(6 * 3600)
    conf = read_spark_conf_tag(tags, "lake.sales.orders")
    assert conf == size.spark_conf
    spark = SparkSettings(**(SparkSettings().model_dump() | spark_settings_update(conf)))
    assert (spark.master, spark.driver_memory) == ("local[*]", "12g")
    assert spark.conf["spark.sql.shuffle.partitions"] == "32"


def test_a_run_without_the_tag_keeps_its_settings() -> None:
    assert read_spark_conf_tag({"icepack/table": "lake.a.b"}, "lake.a.b") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "is not JSON"),
        ('{"spark.master": 1}', "JSON object of strings"),
        ('{"spark.master": "local[2]"}', "needs spark.master and spark.driver.memory"),
        ('{"spark.master": "local[2]", "spark.driver.memory": "1g", "other": "x"}', r"bad keys: \['other'\]"),
    ],
)
def test_bad_spark_conf_tag_names_table_and_tag(value: str, message: str) -> None:
    pattern = rf"table lake\.a\.b: run tag icepack/spark-conf .*{message}"
    with pytest.raises(ConfigurationError, match=pattern):
        read_spark_conf_tag({SPARK_CONF_TAG: value}, "lake.a.b")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"memory": "4Gi", "driver_memory": "4g"}, r"tier 'x': driver_memory 4g is more than 75% of the pod"),
        ({"executor_instances": 2}, r"tier 'x': executor_\* settings need a cluster master"),
        ({"spark_master": "k8s://https://api:443"}, r"tier 'x': a cluster master needs executor_instances"),
        ({"spark_master": "mesos://m"}, r"spark_master 'mesos://m' is not"),
        ({"cpu": "two"}, r"cpu\n.*'two' is not a Kubernetes CPU quantity"),
        ({"memory": "6GB"}, r"memory\n.*'6GB' is not a Kubernetes memory quantity"),
        ({"driver_memory": "4 GB"}, r"driver_memory\n.*'4 GB' is not a Spark memory size"),
        ({"spark_conf": {"spark.master": "local"}}, r"spark_conf key 'spark.master' is set by the tier"),
        ({"spark_conf": {"executor": "x"}}, r"spark_conf key 'executor' must start with 'spark.'"),
        ({"spark_master": "sc://connect:15002", "spark_conf": {"spark.network.timeout": "4s"}},
         r"tier 'x': spark_conf keys \['spark.network.timeout'\] configure the Spark JVM"),
    ],
)
def test_bad_tier_names_tier_and_field(fields: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"name": "x", "cpu": "2", "memory": "6Gi", "spark_master": "local[2]",
                               "driver_memory": "4g"}
    with pytest.raises(ValidationError, match=message):
        SizingTier.model_validate(base | fields)


def _tier(name: str, below: int | None) -> SizingTier:
    return SizingTier(name=name, below_bytes=below, cpu="1", memory="2Gi", spark_master="local[1]",
                      driver_memory="1g")


@pytest.mark.parametrize(
    ("tiers", "message"),
    [
        ((_tier("a", 10), _tier("a", None)), "names must be unique"),
        ((_tier("a", 10), _tier("b", 20)), "the last takes the rest"),
        ((_tier("a", None), _tier("b", None)), "needs below_bytes"),
        ((_tier("a", 20), _tier("b", 10), _tier("c", None)), "strictly increasing"),
    ],
)
def test_bad_policy_is_refused(tiers: tuple[SizingTier, ...], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SizingPolicy(tiers=tiers)


def test_policy_rejects_unknown_keys() -> None:
    with pytest.raises(ValidationError, match="extra"):
        SizingPolicy.model_validate({"tiers": [], "spark_img": "x"})


@given(st.integers(min_value=0, max_value=2**50), st.integers(min_value=0, max_value=2**50))
def test_bigger_tables_never_get_a_smaller_tier(a: int, b: int) -> None:
    order = [tier.name for tier in POLICY.tiers]
    small, large = sorted((a, b))
    assert order.index(POLICY.tier_for(small).name) <= order.index(POLICY.tier_for(large).name)
