"""The notebooks: stored without outputs, and run end to end with nbclient on data the tests made."""

from pathlib import Path

import pytest

from tests.support.servers import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
NAMES = ("trace-analysis", "load-run", "lab")
# A cold kernel importing pandas and matplotlib on a busy 2-core machine is slow: generous, finite.
CELL_TIMEOUT = 300


def read(name: str):
    import nbformat

    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_without_outputs(name):
    book = read(name)
    code = [cell for cell in book.cells if cell.cell_type == "code"]
    assert code, name
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    # walk-throughs use the public loaders only
    assert all("mcpbench.analysis." not in cell.source or "mcpbench.analysis.charts" in cell.source or "mcpbench.analysis.tables" in cell.source for cell in code)


@pytest.mark.timeout(300)  # a cold kernel, and maybe the captures first
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_on_test_data(name, captures, load_folder, lab_folder, reconnect_run, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("MCPBENCH_TRACES", ":".join(str(p) for p in (captures / "stdio-legacy.jsonl", captures / "http-legacy.jsonl", captures / "sse.jsonl")))
    monkeypatch.setenv("MCPBENCH_LOAD_RUN", str(load_folder))
    monkeypatch.setenv("MCPBENCH_LAB_RUN", str(lab_folder))
    monkeypatch.setenv("MCPBENCH_RECONNECT_RUN", str(reconnect_run[1]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    book = read(name)
    NotebookClient(book, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [out for cell in book.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    texts = " ".join(str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", "")) for out in outputs)
    if name == "trace-analysis":
        assert "3 traces" in texts and "tools/call" in texts
    elif name == "load-run":
        assert "tools/call echo" in texts
    else:
        assert "stateful-sse" in texts and "session-not-found" in texts
        assert "resume" in texts and "cut" in texts
