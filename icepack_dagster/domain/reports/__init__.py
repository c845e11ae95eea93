"""What icepack reports to people: the fleet view and alerts."""
