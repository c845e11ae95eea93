"""Fleet flow: the `fleet_summary` asset, the `fleet_refresh` job and the sensor that refreshes it."""
