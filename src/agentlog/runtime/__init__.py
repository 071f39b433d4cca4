"""runtime (filled in by its issue)."""
