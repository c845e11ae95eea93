"""Run sizing: the tiers a maintenance run is sized by, the tier a table gets, and Spark on Kubernetes."""
