"""Idempotency-aware retry: the stage and the retry budget."""
