"""Alerts flow: the sensor that tells an operator's chat channel (a Slack-compatible webhook) about
quarantined tables, tables whose maintenance keeps failing and failed health-sync runs."""
