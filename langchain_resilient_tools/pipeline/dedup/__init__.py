"""Dedup: the stage and its pure decisions."""
