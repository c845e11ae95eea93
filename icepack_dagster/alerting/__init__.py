"""Delivering alerts outside the process (network I/O); what an alert says is in domain/reports/alerts.py."""
