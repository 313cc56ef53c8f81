"""The stages and their order (`driver.STAGES`); each stage beside its logic."""
