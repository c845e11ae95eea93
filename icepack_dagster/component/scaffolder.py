"""What `dg scaffold defs icepack_dagster.IcepackComponent <folder>` writes: a `defs.yaml` that loads as
it is, on the embedded demo catalog (`lake`, a SQLite catalog and a warehouse under the project's
`.icepack` folder; `icepack demo` with `ICEPACK_HOME` set to it builds the demo tables there), with
commented lines showing where a real catalog and its secrets go. The deployment is named after the
folder, so two scaffolded components never share partitions, a pool, an asset key or any other name."""

import re
from pathlib import Path

import dagster as dg

from icepack_dagster.config.platform import DEFAULT_DEPLOYMENT

_NOT_IN_A_NAME = re.compile(r"[^a-z0-9_]+")

DEFS_YAML = """\
type: {type_name}

attributes:
  # Names this deployment's partitions definition, maintenance pool, the icepack/deployment tag of its
  # runs, its asset key prefix and the prefix of its jobs, sensors, schedules and resource keys; give
  # each icepack component of one Dagster instance its own.
  name: {name}
  home: "{{{{ context.project_root }}}}/.icepack"
  catalogs:
    lake:
      kind: embedded
    # A REST catalog (Apache Polaris): secrets are environment variables, never values here.
    # polaris:
    #   kind: rest
    #   uri: https://polaris.example.com/api/catalog
    #   warehouse: analytics
    #   client_id: "{{{{ env.POLARIS_CLIENT_ID }}}}"
    #   client_secret: "{{{{ env.POLARIS_CLIENT_SECRET }}}}"
  include: ["lake.*"]
  exclude: []
  group: {name}
  owners: ["team:icepack"]
  # running: discovery, health sync and maintenance start on their own; stopped: turn each on in the UI.
  automation: running
  platform:
    max_maintenance_in_flight: 2
    health_sync_cron: "*/15 * * * *"
"""


def deployment_name(folder: Path) -> str:
    """A valid deployment name from the scaffolded folder's name (`Lake-Health` -> `lake_health`,
    `2026_lake` -> `icepack_2026_lake`), never the default deployment's own name unless asked for."""
    name = _NOT_IN_A_NAME.sub("_", folder.name.lower()).strip("_")
    name = name if name[:1].isalpha() else f"{DEFAULT_DEPLOYMENT}_{name}".rstrip("_")
    return name[:40].rstrip("_")


class IcepackScaffolder(dg.Scaffolder):
    """Writes a working `defs.yaml` for the embedded demo catalog."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        if request.scaffold_format != "yaml" or request.append:
            dg.scaffold_component(request)
            return
        name = deployment_name(request.target_path)
        text = DEFS_YAML.format(type_name=request.type_name, name=name)
        (request.target_path / "defs.yaml").write_text(text)
