"""Client-side validation: the stage and its pure logic."""
