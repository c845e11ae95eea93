"""The JVM artifacts icepack's Spark sessions load, from Maven Central, pinned by version and SHA-256.

Spark users get Iceberg as `org.apache.iceberg:iceberg-spark-runtime-3.5_2.12`; icepack takes exactly
that jar, at a pinned version whose digest is recorded here, and keeps it in a local cache
(`spark.jar_cache`, default `~/.cache/icepack/jars`) that every later run reuses without a download.
`icepack jars fetch` (run by `scripts/setup` and by the image build) fills the cache; a Spark session
only reads it, and a missing jar stops it with the command that fetches it. Production images may
instead list their own jars in `spark.jars`.

The JDBC drivers of the SQL catalogs stay Debian's (`libxerial-sqlite-jdbc-java`,
`libpostgresql-jdbc-java`), which the image build installs the same way.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from icepack_dagster.exceptions import MissingComponentError


class MavenArtifact(BaseModel):
    """One jar in a Maven repository, pinned by version and by the SHA-256 of its bytes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: str
    artifact: str
    version: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    purpose: str

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str) -> str:
        """The artifact's address in a repository with Maven's layout."""
        return "/".join(
            [repository.rstrip("/"), *self.group.split("."), self.artifact, self.version, self.file_name]
        )


ICEBERG_SPARK_RUNTIME = MavenArtifact(
    group="org.apache.iceberg",
    artifact="iceberg-spark-runtime-3.5_2.12",
    version="1.10.2",
    sha256="c562d482dcd16b666e808b755469fbc4b2604284b41622c9d87e2c02b7cc6c5f",
    purpose="Iceberg's Spark catalog, SQL extensions and procedures (every classic session)",
)
# 1.10.2 of the bundle was never published; the bundle holds only the AWS SDK that the runtime's
# S3FileIO and GlueCatalog load, which 1.10.1's serves the same.
ICEBERG_AWS_BUNDLE = MavenArtifact(
    group="org.apache.iceberg",
    artifact="iceberg-aws-bundle",
    version="1.10.1",
    sha256="86bf20892ea5b4c17688f19b075399885f6aa5303f6b2dc9f491e76ceef9633b",
    purpose="AWS SDK for S3FileIO and the Glue catalog (sessions on s3:// warehouses, Glue, REST)",
)

SPARK_CONNECT_SERVER = MavenArtifact(
    group="org.apache.spark",
    artifact="spark-connect_2.12",
    version="3.5.7",
    sha256="15366e21273a874c760b51fa00743a2acb8fa78642cc35d7a076a3ade0c5eef6",
    purpose="Spark Connect server for pyspark 3.5.7 (an sc:// master; pyspark's wheel leaves it out)",
)

ARTIFACTS: tuple[MavenArtifact, ...] = (ICEBERG_SPARK_RUNTIME, ICEBERG_AWS_BUNDLE, SPARK_CONNECT_SERVER)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cached_jar(artifact: MavenArtifact, cache: Path) -> Path:
    """The artifact's jar in the cache; a missing one says how to fetch it. The digest is checked when
    the jar is fetched, not at every session start (that would read 100 MB per table)."""
    path = cache / artifact.file_name
    if not path.is_file():
        raise MissingComponentError(
            f"Spark jar {artifact.coordinates} is not in the jar cache {cache}: run `icepack jars fetch` "
            "(scripts/setup does), or list your own jars in ICEPACK_SPARK__JARS"
        )
    return path


def fetch(
    artifacts: Iterable[MavenArtifact],
    cache: Path,
    repository: str,
    progress: Callable[[str], None] = lambda _: None,
) -> list[Path]:
    """Make sure each artifact is in the cache with its pinned digest, downloading only what is missing
    or damaged. A download is written beside its final name and renamed into place only once its digest
    matches, so an interrupted fetch never leaves a jar the next session would load."""
    cache.mkdir(parents=True, exist_ok=True)
    paths = []
    for artifact in artifacts:
        path = cache / artifact.file_name
        if path.is_file() and sha256_of(path) == artifact.sha256:
            paths.append(path)
            continue
        url = artifact.url(repository)
        progress(f"downloading {artifact.coordinates} from {url}")
        handle, partial = tempfile.mkstemp(dir=cache, prefix=f".{artifact.file_name}.")
        try:
            with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    out.write(chunk)
            actual = sha256_of(Path(partial))
            if actual != artifact.sha256:
                raise MissingComponentError(
                    f"{artifact.coordinates} from {url} has SHA-256 {actual}, not the pinned "
                    f"{artifact.sha256}: the repository (spark.maven_repository) serves other bytes"
                )
            os.replace(partial, path)
        except (urllib.error.URLError, OSError) as error:
            raise MissingComponentError(
                f"cannot download {artifact.coordinates} from {url} ({error}): check the network or "
                "ICEPACK_SPARK__MAVEN_REPOSITORY, or place the jar in the cache yourself"
            ) from error
        finally:
            Path(partial).unlink(missing_ok=True)
        paths.append(path)
    return paths
