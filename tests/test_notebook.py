"""The quickstart notebook runs top to bottom, offline, and shows what it promises."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "quickstart.ipynb"
pytestmark = pytest.mark.slow  # a Jupyter kernel: CI runs it on one Python


def outputs(nb: Any) -> list[dict[str, Any]]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]


def text_of(nb: Any) -> str:
    parts = []
    for o in outputs(nb):
        parts.append(o.get("text", ""))
        parts.append(o.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.filterwarnings("ignore")  # the kernel's own start-up warnings are not ours
@pytest.mark.realtime  # a generous bound: the notebook must not hang
def test_quickstart_notebook_runs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    start = time.monotonic()
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    ).execute()
    assert time.monotonic() - start < 60
    assert not [o for o in outputs(nb) if o.output_type == "error"]
    text = text_of(nb)
    # Every fault got its answer, and the right one.
    for line in (
        "flap      success  3 pages about retries",
        'hang      error    {"error": "timeout"',
        "first     success  sunny in Paris",
        "repeat    success  [This repeats an earlier identical call",
        'empty     error    {"error": "low_quality_result"',
        'malformed error    {"error": "malformed_call"',
    ):
        assert line in text
    assert "sk-live-abcdef1234567890abcdef" not in text
    assert "hang timeout retryable" in text  # tool_errors in graph state
    # The stats table renders as HTML, and the plot as an image.
    html = [o["data"]["text/html"] for o in outputs(nb) if "text/html" in o.get("data", {})]
    assert len(html) == 1 and "<table>" in html[0] and "get_report" in html[0]
    assert any("image/png" in o.get("data", {}) for o in outputs(nb))
    # A write whose outcome is unknown asks a person; the resume runs it once more only.
    assert "Asked: create_order lost contact with its service" in text
    assert "order  success  [A person reviewed this call" in text
    assert "email  success  sent to ann@example.com" in text
    assert "emails sent: 1" in text
