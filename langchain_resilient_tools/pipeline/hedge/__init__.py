"""Hedged reads: the stage, and the decisions it makes (delay, race, refusals)."""
