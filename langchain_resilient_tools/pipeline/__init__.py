"""The pipeline: the stages and their order (`driver.STAGES`), each stage beside its logic.

This module is its one entry: the adapters import what is here, and nothing from the
modules inside (`tests/test_architecture.py` checks it). Inside, no stage imports
another: what one tells another is a typed field of `core.call.Call` (per call) or of
`stage.Env` (per pipeline), and what repair and validation both read of a tool's
schema is in `schema`.
"""

from .driver import Pipeline
from .step import Outcome, Rollback, Step, StepUpdate

__all__ = [
    "Outcome",
    "Pipeline",
    "Rollback",
    "Step",
    "StepUpdate",
]
