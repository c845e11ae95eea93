"""The JVM artifacts icepack's Spark sessions load, from Maven Central, pinned by version and SHA-256.

Spark users get Iceberg as `org.apache.iceberg:iceberg-spark-runtime-3.5_2.12`; icepack takes exactly
that jar, at a pinned version whose digest is recorded here, and keeps it in a local cache
(`spark.jar_cache`, default `~/.cache/icepack/jars`) that every later run reuses without a download.
`icepack jars fetch` (run by `scripts/setup` and by the image build) fills the cache; a Spark session
only reads it, and a missing jar stops it with the command that fetches it. Production images may
instead list their own jars in `spark.jars`.

`icepack jars fetch --test-server` also fetches a second, separate group that icepack itself never
loads: Iceberg's REST catalog test server and its classpath, which the test suite runs as a real REST
catalog, and an older Iceberg runtime (1.8.1) the suite runs a Spark Connect server with to prove the
runtime gate (`scripts/setup` fetches them, so a fresh clone's tests find them).

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

from pydantic import Field

from icepack_dagster.domain.frozen_model import FrozenModel
from icepack_dagster.exceptions import MissingComponentError


class MavenArtifact(FrozenModel):
    """One jar in a Maven repository, pinned by version and by the SHA-256 of its bytes."""

    group: str
    artifact: str
    version: str
    classifier: str | None = None
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    purpose: str

    @property
    def coordinates(self) -> str:
        suffix = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}{suffix}"

    @property
    def file_name(self) -> str:
        suffix = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{suffix}.jar"

    def url(self, repository: str) -> str:
        """The artifact's address in a repository with Maven's layout."""
        return "/".join(
            [repository.rstrip("/"), *self.group.split("."), self.artifact, self.version, self.file_name]
        )


ICEBERG_SPARK_RUNTIME = MavenArtifact(
    group="org.apache.iceberg",
    artifact="iceberg-spark-runtime-3.5_2.12",
    version="1.11.0",
    sha256="94b8e36fc329f0293d44ba9e01b784a56e9501affec1842d898144c51f6e486a",
    purpose="Iceberg's Spark catalog, SQL extensions and procedures (every classic session)",
)
ICEBERG_AWS_BUNDLE = MavenArtifact(
    group="org.apache.iceberg",
    artifact="iceberg-aws-bundle",
    version="1.11.0",
    sha256="38f01da7e96850cdd05e6616d758b77b43314b712a8808e3f9a824d56976162f",
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

# Iceberg's REST catalog test server (`RESTCatalogServer`, the server of the `iceberg-rest-fixture`
# image) with its runtime classpath as Maven resolves it; the test suite runs it, icepack never does.
# 1.10.1 is the suite's REST catalog: Iceberg 1.10.2 published iceberg-core but not iceberg-api, so its
# core cannot be resolved. The server speaks the REST protocol, so a 1.11 Spark runtime talks to it as to
# any REST catalog.
_REST_TEST_SERVER_1_10_JARS = """
com.fasterxml.jackson.core:jackson-annotations:2.19.2
    e516743a316dcf83c572ffc9cb6e8c5e8c134880c8c5155b02f7b34e9c5dc3cf
com.fasterxml.jackson.core:jackson-core:2.19.2
    aa77eaf29293a868c47372194f7c5287d77d9370b04ea25d3fffc1e4904b5880
com.fasterxml.jackson.core:jackson-databind:2.19.2
    0a1bd4e9b0d670e632d40ee8c625ad376233502f03c2f5889baea95d025b47a7
com.github.ben-manes.caffeine:caffeine:2.9.3
    1e0a7bbef1dd791653143f3f05d0e489934bf5481e58a87c9e619cd46b68729b
com.google.code.findbugs:jsr305:3.0.2
    766ad2a0783f2687962c8ad74ceecc38a28b9f72a2d085ee438b7813e928d0c7
com.google.errorprone:error_prone_annotations:2.10.0
    a249d4d25dfb86d41e6c82fc335df580189f0c9feeabdc53233fc1e5060724a1
commons-codec:commons-codec:1.17.0
    f700de80ac270d0344fdea7468201d8b9c805e5c648331c3619f2ee067ccfc59
commons-io:commons-io:2.16.1
    f41f7baacd716896447ace9758621f62c1c6b0a91d89acee488da26fc477c84f
commons-logging:commons-logging:1.2
    daddea1ea0be0f56978ab3006b8ac92834afeefbd9b7e4e6316fca57df0fa636
io.airlift:aircompressor:0.27
    fdbef3137a28f63bb0cb93487803080ede746a4ec3d421e36c6f0c305c35e5e4
org.apache.avro:avro:1.12.0
    1f5fbfff9b7427d6832cc3031a3c81413d3e21d9e2551847d9231c28493f9492
org.apache.commons:commons-compress:1.26.2
    9168a03141d8fc7eda21a2360d83cc0412bcbb1d6204d992bd48c2573cb3c6b8
org.apache.commons:commons-lang3:3.14.0
    7b96bf3ee68949abb5bc465559ac270e0551596fa34523fddf890ec418dde13c
org.apache.hadoop:hadoop-client-api:3.4.1
    a964d4daa054c9615bbafb4553efbb140fa7fb9ac6f358a24393f183a5703438
org.apache.hadoop:hadoop-client-runtime:3.4.1
    f6a800a159f918670db533606d33560d6c13b7e13f14eda493280ae33b9eeb2f
org.apache.httpcomponents.client5:httpclient5:5.5
    496b4b0e8d5f3a8139a5d2638486d304758bac3a9c39d76989f663cfd9354fc9
org.apache.httpcomponents.core5:httpcore5-h2:5.3.4
    1fb4f34e4b612e7c127ad693335583587850b17ce9b1c366f9de1ca49fe2c781
org.apache.httpcomponents.core5:httpcore5:5.3.4
    f2b2fd7a0164e8c3120cd8437bc9fea439239e165c17262b3e907daa7e979f80
org.apache.iceberg:iceberg-api:1.10.1
    9c806b96f20882d1e5e7a4b9a8d7bc1fa32917b509af4e6d139afaa09a288396
org.apache.iceberg:iceberg-bundled-guava:1.10.1
    05b79072e19071b1bcf7a4e382d624b3b2ccad6eaf79627676219bb48e4e834d
org.apache.iceberg:iceberg-common:1.10.1
    167791c08975f299ebae6c508ea872b899673c33dc2911e4c265f95b96a656f1
org.apache.iceberg:iceberg-core:1.10.1
    5dc1472e3a393d9d5a713aedee7007cebdf62cabbe82c72feb6d3da8e50d7216
org.apache.iceberg:iceberg-core:1.10.1:tests
    8c18111a61ea40ba23114e10e33bacfceca6cf36d2c9a932d880e0100f14af1e
org.apache.iceberg:iceberg-open-api:1.10.1:test-fixtures
    ec4dce1663933e3520227da8238a980d52b7eccac532c1953f337dc1e6ee597b
org.checkerframework:checker-qual:3.19.0
    a827c49183f3a632277d27a0a4673686cb341507447b9d570261094bd748aa68
org.eclipse.jetty.toolchain:jetty-jakarta-servlet-api:5.0.2
    efb20997729f32bfa6c8a8319037c353f7ad460d5d49f336bf232998ea2358db
org.eclipse.jetty:jetty-http:11.0.25
    7ae3f8055557e6cea13980eaa37eaf9d546cd57a2d358aa7cb2e5de7c4946169
org.eclipse.jetty:jetty-io:11.0.25
    6d5859f4ce88156c86aac0fa62d27a768d8f100aa6da5c13a82ec3c9ea16a349
org.eclipse.jetty:jetty-security:11.0.25
    861a0be80a4dfa7935a89113d4ac4ed76505f079b22c9e2f1a84017908bbcd57
org.eclipse.jetty:jetty-server:11.0.25
    710652a7dccc0590cd0af2798dd3c4c93a777e7fb591d89d7cf02a4839bf0dd8
org.eclipse.jetty:jetty-servlet:11.0.25
    641eb7725c8aa27ff4f35e71b826f6c3fff5ce745d6997e520eafb887e3623ec
org.eclipse.jetty:jetty-util:11.0.25
    801ce0baaaf9a269fade7172dadd290c707f3bcdaf22b4292c323f6548b05959
org.roaringbitmap:RoaringBitmap:1.3.0
    73443a71a2e2401c7d518a487983539fcaf5f9652efbd178f929e7b6d36881d0
org.slf4j:slf4j-api:2.0.17
    7b751d952061954d5abfed7181c1f645d336091b679891591d63329c622eb832
org.slf4j:slf4j-simple:2.0.16
    effc32018658bea09d1e08c7d1060ccad46c086960f583d07dd7ffe9c1172a47
org.xerial.snappy:snappy-java:1.1.10.4
    55b30c94e5c4cc2d4b6976916098d0678a8a6cc7427fa8c875621bd94e731ac8
"""


# 1.11.0, the first whose loadTable sends an `ETag` and answers `If-None-Match` with 304, run by the
# tests of conditional loads only: its Jetty 12 refuses `%1F` in a path ("Suspicious Path Character",
# 400), which Iceberg 1.10's clients (icepack's Spark runtime) send for multi-level namespaces when
# Spark resolves `table.branch_x`; 1.11's clients follow the server's `namespace-separator` (`%2E`).
# Hadoop stays at 3.4.1 (only its `Configuration` is used), the rest as Iceberg 1.11.0 resolves it.
_REST_TEST_SERVER_1_11_JARS = """
com.fasterxml.jackson.core:jackson-annotations:2.21
    53ca085f4a150f703f49e1aabd935bd03b43e1ea3d55d135438292af22cef56b
com.fasterxml.jackson.core:jackson-core:2.21.3
    baf8b739e9d9b93bcdb33f25046bfdb8dbd74c97de2a8698539fbe0c7eeac0bb
com.fasterxml.jackson.core:jackson-databind:2.21.3
    f397563d8e67630c10cab8c2334ca0e55af832fa3ebde160a379c2c96d43bf25
com.github.ben-manes.caffeine:caffeine:2.9.3
    1e0a7bbef1dd791653143f3f05d0e489934bf5481e58a87c9e619cd46b68729b
com.google.code.findbugs:jsr305:3.0.2
    766ad2a0783f2687962c8ad74ceecc38a28b9f72a2d085ee438b7813e928d0c7
com.google.errorprone:error_prone_annotations:2.10.0
    a249d4d25dfb86d41e6c82fc335df580189f0c9feeabdc53233fc1e5060724a1
commons-codec:commons-codec:1.19.0
    5c3881e4f556855e9c532927ee0c9dfde94cc66760d5805c031a59887070af5f
commons-io:commons-io:2.20.0
    df90bba0fe3cb586b7f164e78fe8f8f4da3f2dd5c27fa645f888100ccc25dd72
commons-logging:commons-logging:1.2
    daddea1ea0be0f56978ab3006b8ac92834afeefbd9b7e4e6316fca57df0fa636
io.airlift:aircompressor:2.0.3
    b86bb66f610079e0bf790d62e2ff68853eb0dc4748a6d68ae28bce92b68094aa
jakarta.servlet:jakarta.servlet-api:6.0.0
    c034eb1afb158987dbb53a5fea0cadf611c8dae8daadd59c44d9d5ab70129cef
org.apache.avro:avro:1.12.1
    72600f057bfbe2efe35fa55433e7756d45667dc938934be38a6e2be368aca237
org.apache.commons:commons-compress:1.28.0
    e1522945218456f3649a39bc4afd70ce4bd466221519dba7d378f2141a4642ca
org.apache.commons:commons-lang3:3.18.0
    4eeeae8d20c078abb64b015ec158add383ac581571cddc45c68f0c9ae0230720
org.apache.hadoop:hadoop-client-api:3.4.1
    a964d4daa054c9615bbafb4553efbb140fa7fb9ac6f358a24393f183a5703438
org.apache.hadoop:hadoop-client-runtime:3.4.1
    f6a800a159f918670db533606d33560d6c13b7e13f14eda493280ae33b9eeb2f
org.apache.httpcomponents.client5:httpclient5:5.6.1
    1e3d8444c3c27772e4b9d42a790f06b3345a8ece4fd16d00981f2f2460e1e772
org.apache.httpcomponents.core5:httpcore5-h2:5.4
    2e0f4ace15db2d1609c2b06eca6012e7582afe4a99ad8d15073f62dd8edb3460
org.apache.httpcomponents.core5:httpcore5:5.4
    cec2981fa7f520efb63f0787c24f10af2679e31f9f75c448c4dde40a3ae8100d
org.apache.iceberg:iceberg-api:1.11.0
    f00675a12ceb6d833bb9c22024823a3e7afdedf7abcefe34719f45b0d211995a
org.apache.iceberg:iceberg-bundled-guava:1.11.0
    396d48d93ef5735f2ddef0cf9b3d6968ebd67b64b5cfe753d41c429d3f46a2a1
org.apache.iceberg:iceberg-common:1.11.0
    b2835d00db7c92bdfa728123ad7cdcb488e2f2805c1c51fb9ae94e8bd203bd7d
org.apache.iceberg:iceberg-core:1.11.0
    53b9eb7a8c34fb9958ea7d9a4d19ba5bc96f592d0f05e8625b0778c70b1f0090
org.apache.iceberg:iceberg-core:1.11.0:tests
    4284719a5f0eb7db01e9f784a0ed4ca8bacf7d6f9951924143afc083428d8be3
org.apache.iceberg:iceberg-open-api:1.11.0:test-fixtures
    b0aa8636d88c24976d552ac9b3075a1315dc1ccd4fa6ed95b365901842664316
org.checkerframework:checker-qual:3.19.0
    a827c49183f3a632277d27a0a4673686cb341507447b9d570261094bd748aa68
org.eclipse.jetty.compression:jetty-compression-common:12.1.8
    46f12d348115f310130c7df6e736017c6e7dc032f19b96a0dc2658f56ec43bf1
org.eclipse.jetty.compression:jetty-compression-gzip:12.1.8
    482455c2e4b243913354dfd52cf2a68becfb9a7479c1deb385019f97925f0ae0
org.eclipse.jetty.compression:jetty-compression-server:12.1.8
    fab794df5609bbe97e7ff04d8d5ff3446048dc7af7ca64ce52bbe19d31c420a5
org.eclipse.jetty.ee10:jetty-ee10-servlet:12.1.8
    c6251faae241b2b6879ce8fb9177366ca4793ff9356f60793b8d10a1f1fef404
org.eclipse.jetty:jetty-http:12.1.8
    32c351984fd74e7db9b3120f7aa43c034a9d7fe290386747ff318f4c4221d94b
org.eclipse.jetty:jetty-io:12.1.8
    c45a68ceed3526f5ca0974768caa61f6683c3d5591a819fbcf3c0480a64ab245
org.eclipse.jetty:jetty-security:12.1.8
    44add9ee95b955d96979cc74e32ec751ea807ebc0f5139eb13adcfc23712c58f
org.eclipse.jetty:jetty-server:12.1.8
    71b8862a72305aebb65909b8b9f3c9a0c790ef3245c6056e56b48117aec238fe
org.eclipse.jetty:jetty-session:12.1.8
    ebe84dd41942d7adda5f7d1304095d274e7915999451d848e887cbd409f947ea
org.eclipse.jetty:jetty-util:12.1.8
    00432715f20c3ddc8d4fe3b01974253a7772f1830f7712da71af30348b01c822
org.roaringbitmap:RoaringBitmap:1.6.14
    78ae7a6261b5b03f53b8db991047d06959cfadbd0b08af54bd95dda40af9acba
org.slf4j:slf4j-api:2.0.17
    7b751d952061954d5abfed7181c1f645d336091b679891591d63329c622eb832
org.slf4j:slf4j-simple:2.0.17
    ddfea59ac074c6d3e24ac2c38622d2d963895e17f70b38ed4bdae4d780be6964
org.xerial.snappy:snappy-java:1.1.10.4
    55b30c94e5c4cc2d4b6976916098d0678a8a6cc7427fa8c875621bd94e731ac8
"""

def _pinned(listing: str, purpose: str) -> tuple[MavenArtifact, ...]:
    """Artifacts from whitespace-separated pairs `group:artifact:version[:classifier] sha256`."""
    tokens = listing.split()
    artifacts = []
    for coordinates, sha256 in zip(tokens[::2], tokens[1::2], strict=True):
        group, artifact, version, *classifier = coordinates.split(":")
        artifacts.append(
            MavenArtifact(
                group=group,
                artifact=artifact,
                version=version,
                classifier=classifier[0] if classifier else None,
                sha256=sha256,
                purpose=purpose,
            )
        )
    return tuple(artifacts)


_TEST_SERVER_PURPOSE = "Iceberg's REST catalog test server, run by the test suite (not by icepack)"
REST_TEST_SERVER_CLASSPATHS: dict[str, tuple[MavenArtifact, ...]] = {
    "1.10.1": _pinned(_REST_TEST_SERVER_1_10_JARS, _TEST_SERVER_PURPOSE),
    "1.11.0": _pinned(_REST_TEST_SERVER_1_11_JARS, _TEST_SERVER_PURPOSE),
}
# What `icepack jars fetch --test-server` fetches: both servers' jars, each once.
REST_CATALOG_TEST_SERVER: tuple[MavenArtifact, ...] = tuple(
    {a.coordinates: a for jars in REST_TEST_SERVER_CLASSPATHS.values() for a in jars}.values()
)
# An Iceberg runtime too old for format v3 tables: the test suite runs a Spark Connect server with it
# to prove the runtime gate refuses (domain/actions/runtime_requirements.py); icepack never loads it.
OLD_ICEBERG_SPARK_RUNTIME = MavenArtifact(
    group="org.apache.iceberg",
    artifact="iceberg-spark-runtime-3.5_2.12",
    version="1.8.1",
    sha256="a42f6e3f89943ddc67d35738f822396970d0c83d5688c7614099a810aeabf9e0",
    purpose="an Iceberg runtime older than format v3 needs, run by the test suite (not by icepack)",
)
TEST_SUITE_JARS: tuple[MavenArtifact, ...] = (*REST_CATALOG_TEST_SERVER, OLD_ICEBERG_SPARK_RUNTIME)


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
