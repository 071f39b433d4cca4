"""projector (filled in by its issue)."""
