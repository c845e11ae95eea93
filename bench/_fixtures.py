"""Shared by the benchmarks: one work directory with an embedded catalog (reused between runs, so big
generated tables are made once), the Spark session, timing, peak memory in a child process, and the
printed tables. Benchmarks are not tests: they print measurements side by side and assert nothing
about speed."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from icepack_dagster.config.settings import IcepackSettings, load_settings  # noqa: E402
from icepack_dagster.iceberg.catalogs import CatalogSet  # noqa: E402

NAMESPACE = "bench"


def arguments(description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> Any:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a small version that runs in under a minute")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(os.environ.get("ICEPACK_BENCH_DIR", Path(tempfile.gettempdir()) / "icepack-bench")),
        help="catalog, warehouse and generated tables (kept between runs); env ICEPACK_BENCH_DIR",
    )
    if extra is not None:
        extra(parser)
    return parser.parse_args()


@dataclass
class Bench:
    """The benchmark's catalog `lake` (SQLite + local warehouse) under `workdir`, and Spark on demand."""

    workdir: Path

    @cached_property
    def settings(self) -> IcepackSettings:
        for key in [k for k in os.environ if k.startswith("ICEPACK_") and k != "ICEPACK_BENCH_DIR"]:
            os.environ.pop(key)
        return load_settings(
            home=self.workdir / "home",
            catalogs={"lake": {"kind": "embedded"}},
            spark={"master": "local[2]", "driver_memory": "2g"},
            status_workers=1,
        )

    @cached_property
    def catalogs(self) -> CatalogSet:
        catalogs = CatalogSet(self.settings)
        catalogs.get("lake").create_namespace_if_not_exists(NAMESPACE)
        return catalogs

    @property
    def catalog(self) -> Any:
        return self.catalogs.get("lake")

    @cached_property
    def spark(self) -> Any:
        from icepack_dagster.spark.session import build_spark_session

        self.catalogs  # noqa: B018  # the embedded catalog's tables exist before Spark's JDBC catalog looks
        return build_spark_session(self.settings)

    def exists(self, name: str) -> bool:
        return bool(self.catalog.table_exists((NAMESPACE, name)))


def timed(work: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process, result)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def best_of(runs: int, work: Callable[[], Any]) -> tuple[float, float, Any]:
    """The fastest of `runs` (a shared machine only ever adds time)."""
    results = [timed(work) for _ in range(runs)]
    return min(results, key=lambda r: r[0])


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_child(script: Path, *args: str) -> dict[str, Any]:
    """Run `script --child ARGS` in a fresh interpreter; it prints one JSON line (its measurements).
    A fresh process gives an honest peak memory and a cold start (no cache from an earlier run)."""
    done = subprocess.run(
        [sys.executable, str(script), "--child", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} --child {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def child_report(wall: float, cpu: float, rss_before: float, **extra: Any) -> None:
    """What a child prints: its timings and how much its peak memory grew during the work."""
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_mib": max(0.0, peak_rss_mib() - rss_before), **extra}))


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = os.getloadavg()[0]
    return (
        f"{os.cpu_count()} cores, {memory:.0f} GiB, Python {platform.python_version()}, "
        f"load average {load:.1f} at start (other work on the machine inflates wall times)"
    )


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a plain-text table."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        padded = [c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        print("  ".join(padded))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        digits = 3 if abs(value) < 10 else 1 if abs(value) < 1000 else 0
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator > 0 else "n/a"
