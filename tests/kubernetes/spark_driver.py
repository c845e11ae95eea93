"""A Spark driver in client mode, as a large-tier run pod starts one: `python -m
tests.kubernetes.spark_driver SETTINGS READY` starts a SparkSession with the settings in the JSON file
SETTINGS, writes the application id to READY, keeps the session until its standard input closes, then
stops it (Spark deletes its executor pods) and exits.

A process of its own: the test session's JVM already holds the suite's local SparkContext, and one
process has one SparkContext."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession


def main(settings: Path, ready: Path) -> None:
    builder = SparkSession.builder
    for key, value in json.loads(settings.read_text()).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    ready.write_text(session.sparkContext.applicationId)
    sys.stdin.read()
    session.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
