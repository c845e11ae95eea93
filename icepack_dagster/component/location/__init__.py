"""The code location icepack ships (`workspace.yaml`, the demo, the Docker image, the Helm values): a
Dagster definitions folder whose `defs.yaml` is `IcepackComponent` with no attribute of its own, so every
setting comes from `ICEPACK_*` variables and the `ICEPACK_CONFIG` file, as the operator's docs say. A
host project's `defs.yaml` is the same component with its own attributes."""
