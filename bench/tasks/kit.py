"""The public fault kit (`langchain_resilient_tools.testing`), in one place."""

from __future__ import annotations

from langchain_resilient_tools.testing import (
    Fault,
    FaultLog,
    FaultPlan,
    FaultyChatModel,
    ModelFaultPlan,
    Slip,
    with_faults,
)

__all__ = [
    "Fault",
    "FaultLog",
    "FaultPlan",
    "FaultyChatModel",
    "ModelFaultPlan",
    "Slip",
    "with_faults",
]
