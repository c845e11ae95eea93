"""Health: the thresholds, the judgement of one table's status against them, and which judgements a health
sync writes."""
