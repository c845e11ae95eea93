"""A table's commits as maintenance sees them after the fact: what the commit checks read of the metadata
(`facts`), and the guarded rollback of a maintenance's commits (`rollback`)."""
