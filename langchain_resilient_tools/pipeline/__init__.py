"""The pipeline: the stages and their order (`driver.STAGES`), each stage beside its logic.

This module is its one entry, and it exports the driver's names only: the `Pipeline`,
the `Step` an adapter opens for one model message's calls, the `Outcome` of a call and
the `StepUpdate` a step's end writes. Adapters import nothing from the modules inside,
and no stage's internals pass through here (`tests/test_architecture.py` checks both).
Inside, no stage imports another: what one tells another is a typed field of
`core.call.Call` (per call) or of `stage.Env` (per pipeline), what a stage does for a
whole step is a hook of `stage.Stage` (see `step`), and what repair and validation both
read of a tool's schema is in `schema`.
"""

from .driver import Pipeline
from .step import Outcome, Step, StepUpdate

__all__ = [
    "Outcome",
    "Pipeline",
    "Step",
    "StepUpdate",
]
