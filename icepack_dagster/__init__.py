"""icepack_dagster: a Dagster-native control plane that keeps Apache Iceberg tables healthy.

Importing the package does nothing but define names: no environment reads, no JVM, no network.
`icepack_dagster.IcepackComponent` (the name a host project's `defs.yaml` and `dg` use, found through
the `dagster_dg_cli.registry_modules` entry point) is imported on first access only, so the CLI and
every layer below Dagster import the package without importing Dagster.
"""

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {"IcepackComponent": "icepack_dagster.component.icepack_component"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
