"""Configuration: the settings (the only reader of the environment), their sections (platform, Spark,
catalogs) and the policy file."""
