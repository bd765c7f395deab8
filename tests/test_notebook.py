"""Issue 23 item 7: docs/notebooks/tour.ipynb runs top to bottom against the current code (its asserts are
physics: the floor, amortization, the frontier, C = 6 N D), so the example cannot rot."""
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "notebooks" / "tour.ipynb"


def test_tour_notebook_executes(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is in the test extra: pip install '.[test]'")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is in the test extra: pip install '.[test]'")
    pytest.importorskip("ipykernel", reason="ipykernel is in the test extra: pip install '.[test]'")
    pytest.importorskip("pandas", reason="pandas is in the test extra: pip install '.[test]'")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # kernel "python3": ipykernel's native kernel, which runs this interpreter (sys.executable)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    n = sum(1 for c in nb.cells if c.cell_type == "code")
    assert n >= 10 and all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
