"""The prompt guidance that explains the error envelope to the model."""

from __future__ import annotations

import pytest

from langchain_resilient_tools import ToolErrorType
from langchain_resilient_tools.prompts import (
    ERROR_TYPE_GUIDANCE,
    TOOL_ERROR_GUIDANCE,
    with_tool_error_guidance,
)


def test_appends_the_guidance_once() -> None:
    prompt = with_tool_error_guidance("You are a travel agent.")
    assert prompt.startswith("You are a travel agent.\n\n")
    assert prompt.endswith(TOOL_ERROR_GUIDANCE)
    assert prompt.count(TOOL_ERROR_GUIDANCE) == 1
    assert with_tool_error_guidance(prompt) == prompt


@pytest.mark.parametrize("empty", [None, "", "  \n"])
def test_no_prompt_gives_the_guidance_alone(empty: str | None) -> None:
    assert with_tool_error_guidance(empty) == TOOL_ERROR_GUIDANCE


def test_guidance_covers_the_envelope() -> None:
    text = TOOL_ERROR_GUIDANCE
    for needle in (
        '"retryable"',
        ToolErrorType.UNKNOWN_OUTCOME.value,
        ToolErrorType.DUPLICATE_CALL.value,
        "Never make up",
        "tell the user plainly",
        '"suggestion"',
    ):
        assert needle in text, needle
    assert len(text) < 3000  # it rides along in every request: keep it short


@pytest.mark.parametrize("kind", list(ToolErrorType), ids=lambda k: k.value)
def test_guidance_covers_every_error_type_the_model_can_receive(kind: ToolErrorType) -> None:
    # Every member reaches the model in some envelope: each needs a line of guidance.
    assert kind.value in ERROR_TYPE_GUIDANCE
    assert f'"{kind.value}": {ERROR_TYPE_GUIDANCE[kind.value]}' in TOOL_ERROR_GUIDANCE


def test_guidance_names_the_keys_the_envelope_carries() -> None:
    for key in ('"fields"', '"dropped"', '"valid_tools"', '"retry_after_s"'):
        assert key in TOOL_ERROR_GUIDANCE, key
    assert "rate_limited" in ERROR_TYPE_GUIDANCE  # used once `ToolErrorType` has it
