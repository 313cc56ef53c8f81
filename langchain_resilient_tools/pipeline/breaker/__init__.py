"""The circuit breaker: the stage and its state machine."""
