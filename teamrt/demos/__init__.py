"""Demonstrations that run on a fresh machine, with no model and no network."""
