"""icepack as a Dagster Component (`icepack_component.py`, imported by the package as
`icepack_dagster.IcepackComponent`), its `dg scaffold defs` scaffolder, and the code location icepack
ships, which is that component with a shipped `defs.yaml` (`location/`)."""
