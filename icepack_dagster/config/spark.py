"""The `spark` section of the settings: how maintenance reaches Spark (master URL, jars, extra
configuration), validated so that a wrong master or a key Spark Connect cannot take fails at start-up."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from icepack_dagster.domain.frozen_model import FrozenModel

_SPARK_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://.+|k8s://.+|sc://.+|yarn)$")


class SparkSettings(FrozenModel):
    """How maintenance reaches Spark: master URL, jars, and extra Spark configuration.

    An `sc://` master is a Spark Connect server: its JVM, jars and static configuration are the
    server's, so `jars` and `driver_memory` do not apply and `conf` may hold only `spark.sql.*` keys."""

    master: str = Field(
        default="local[*]", description="local[*], spark://host:7077, k8s://https://..., sc://host:15002"
    )
    app_name: str = "icepack"
    jars: list[str] | None = Field(
        default=None,
        description="Jars for the driver classpath; default: the pinned Iceberg runtime (and AWS bundle "
        "where a catalog needs S3) from the jar cache, plus the JDBC drivers the catalogs need",
    )
    jar_cache: Path = Field(
        default=Path("~/.cache/icepack/jars"),
        validate_default=True,
        description="Where `icepack jars fetch` keeps the pinned Maven Central jars the sessions load",
    )
    maven_repository: str = Field(
        default="https://repo1.maven.org/maven2",
        description="Maven repository `icepack jars fetch` downloads from (Maven Central or a mirror)",
    )
    driver_memory: str = "2g"
    conf: dict[str, str] = Field(default_factory=dict, description="Extra spark.* settings")
    connect_timeout_seconds: float = Field(
        default=30.0, gt=0, le=600, description="How long an sc:// master may take to answer at start"
    )
    connect_batch_codegen: bool = Field(
        default=False,
        description="Spark's code generation in the sessions of batch runs (the smallest tier's tables) on "
        "an sc:// master. Off by default: a Spark Connect server compiles generated code again and again "
        "(each statement's on Spark 3.5), which costs a small table more than the compiled code saves",
    )
    connect_ui_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^/\s]+/?$",
        description="The Spark UI of the sc:// master's server (http://host:4040): with it, a run's log "
        "shows the server's job, stage and task progress of each action, read from the UI's REST API; "
        "without it, an action still running after a second is named with the server's application and "
        "its jobs' tag",
    )

    @field_validator("jar_cache")
    @classmethod
    def _expand_jar_cache(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("master")
    @classmethod
    def _known_master(cls, value: str) -> str:
        if not _SPARK_MASTER.match(value):
            raise ValueError(f"{value!r} is not a Spark master URL (local[*], spark://, k8s://, sc://, yarn)")
        if value.startswith("sc://") and ";session_id=" in value:
            raise ValueError(
                "an sc:// master may not fix session_id: icepack opens server sessions of its own "
                "(per table, or per thread of a batch run)"
            )
        return value

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not k.startswith("spark.")]
        if bad:
            raise ValueError(f"Spark conf keys must start with 'spark.': {bad}")
        return value

    @model_validator(mode="after")
    def _connect_conf(self) -> SparkSettings:
        server_keys = [k for k in self.conf if not k.startswith("spark.sql.")]
        if self.master.startswith("sc://") and server_keys:
            raise ValueError(
                f"conf keys {server_keys} configure the Spark JVM, which for an sc:// master is the Spark "
                "Connect server's: set them where the server starts; a Connect session takes spark.sql.* only"
            )
        if self.connect_ui_url is not None and not self.master.startswith("sc://"):
            raise ValueError(
                f"connect_ui_url is the Spark UI of an sc:// master's server, but the master is "
                f"{self.master}: a local or cluster session reports its progress itself; unset connect_ui_url"
            )
        return self
