"""Re-status of changed tables: the tracker that reads a table again only when its metadata file changed,
and the status of a table changed only by appends, from its snapshot summaries."""
