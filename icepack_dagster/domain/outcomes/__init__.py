"""What maintenance did: each action's prediction beside Iceberg's figures, the report of one maintenance,
its impact, and the history recommendation and quarantine read."""
