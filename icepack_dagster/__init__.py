"""icepack_dagster: a Dagster-native control plane that keeps Apache Iceberg tables healthy.

Importing the package does nothing but define names: no environment reads, no JVM, no network.
"""

__version__ = "0.1.0"
