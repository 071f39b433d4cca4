"""archive (filled in by its issue)."""
