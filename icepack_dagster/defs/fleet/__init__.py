"""Fleet flow: the `fleet_summary` asset, the `fleet_refresh` job and the automation condition and sensor
that refresh it."""
