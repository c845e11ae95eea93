"""Maintenance actions, one module each (`MaintenanceAction` lists them, `registry.py` loads them):
everything one action is, from the options its procedure may be given to how its outcome is read;
beside them what they share (the shape of a definition, option validators) and, in `planners/`, the
planners that predict what Iceberg's rewrites will do."""
