"""Sensors: discovery (partitions = tables), maintenance (launch work from health), fleet refresh."""
