"""Recommendation: which maintenance one table should get now, planned per action behind shared gates."""
