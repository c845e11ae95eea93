"""Maintenance policy: what it says, how its layers combine, windows, and the text of icepack.* properties."""
