"""The four partitioned assets of one table's lineage, and the fleet summary."""
