"""Argument repair: the stage and its pure logic."""
