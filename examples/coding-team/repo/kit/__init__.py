"""kit: small helpers for text, dates and numbers."""
