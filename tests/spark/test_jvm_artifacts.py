"""Contract: the pinned Maven Central jars reach the jar cache once, with their digests checked.

A fetch downloads only what is missing or damaged; a second fetch downloads nothing; bytes that do not
match the pinned SHA-256 are refused and leave nothing in the cache; a session names the command that
fills a missing cache. Served by a real HTTP server on loopback with Maven's repository layout.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from icepack_dagster.config.settings import IcepackSettings
from icepack_dagster.exceptions import MissingComponentError
from icepack_dagster.spark import jvm_artifacts
from icepack_dagster.spark.jvm_artifacts import MavenArtifact, cached_jar, fetch, sha256_of

JAR_BYTES = b"PK\x03\x04 not really a jar, but bytes with a digest"


def _artifact(data: bytes = JAR_BYTES) -> MavenArtifact:
    return MavenArtifact(
        group="org.example.icepack", artifact="probe", version="1.0.0",
        sha256=hashlib.sha256(data).hexdigest(), purpose="test",
    )


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[tuple[str, Path, list[str]]]:
    """A Maven-layout folder served over HTTP on loopback; yields (url, root, requested paths)."""
    root = tmp_path / "repo"
    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self) -> None:
            requested.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/maven2", root, requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _publish(root: Path, artifact: MavenArtifact, data: bytes) -> None:
    path = root / "maven2" / "org" / "example" / "icepack" / "probe" / "1.0.0" / artifact.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_fetch_downloads_once_then_reuses_the_cache(repository, tmp_path: Path) -> None:
    url, root, requested = repository
    artifact = _artifact()
    _publish(root, artifact, JAR_BYTES)
    cache = tmp_path / "cache"
    [path] = fetch([artifact], cache, url)
    assert path.read_bytes() == JAR_BYTES and len(requested) == 1
    assert fetch([artifact], cache, url) == [path]
    assert len(requested) == 1, "a second fetch must download nothing"
    assert sorted(p.name for p in cache.iterdir()) == [artifact.file_name]


def test_a_damaged_cached_jar_is_downloaded_again(repository, tmp_path: Path) -> None:
    url, root, requested = repository
    artifact = _artifact()
    _publish(root, artifact, JAR_BYTES)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / artifact.file_name).write_bytes(JAR_BYTES[:10])  # an interrupted copy
    [path] = fetch([artifact], cache, url)
    assert sha256_of(path) == artifact.sha256 and len(requested) == 1


def test_bytes_that_miss_the_pinned_digest_are_refused_and_not_kept(repository, tmp_path: Path) -> None:
    url, root, _ = repository
    artifact = _artifact()
    _publish(root, artifact, b"other bytes under the same name")
    cache = tmp_path / "cache"
    with pytest.raises(MissingComponentError, match="not the pinned"):
        fetch([artifact], cache, url)
    assert list(cache.iterdir()) == []


def test_an_unreachable_repository_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(MissingComponentError, match="cannot download org.example.icepack:probe:1.0.0"):
        fetch([_artifact()], tmp_path / "cache", "http://127.0.0.1:9/maven2")


def test_a_session_names_the_command_that_fills_a_missing_cache(tmp_path: Path) -> None:
    with pytest.raises(MissingComponentError, match="icepack jars fetch"):
        cached_jar(jvm_artifacts.ICEBERG_SPARK_RUNTIME, tmp_path)


def test_the_cache_setup_filled_holds_the_pinned_bytes(settings: IcepackSettings) -> None:
    """scripts/setup ran `icepack jars fetch`: every pinned jar is there with its digest."""
    for artifact in jvm_artifacts.ARTIFACTS:
        assert sha256_of(cached_jar(artifact, settings.spark.jar_cache)) == artifact.sha256, artifact
