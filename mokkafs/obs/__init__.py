"""Observability: the daemon's own metrics registry, health state, and its HTTP endpoint."""
