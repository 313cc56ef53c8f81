"""Statistics, plots, OpenTelemetry and callbacks of finished calls."""
