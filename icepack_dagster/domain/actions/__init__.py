"""Maintenance actions, one module each (`registry.py` lists them): everything one action is, from the
options its procedure may be given to how its outcome is read; beside them what they share (the shape
of a definition, option validators) and the planners that predict what Iceberg's rewrites will do."""
