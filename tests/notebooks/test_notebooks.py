"""Every notebook runs top to bottom in a fresh kernel (nbclient) and shows its figures.

The stored notebooks must have their outputs cleared (they are regenerated here, never
committed). All three together must stay well under 3 minutes on the CI machine.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 120
# the figures each notebook must display (one PNG per plot call); 03 shows the calibration
# of the results file shipped by the realrun benchmark, or of a rerun on tiny models
EXPECTED_FIGURES = {"01_theory": 1, "02_recommend": 3, "03_realrun": 1}


def test_every_expected_notebook_exists():
    assert {p.stem for p in NOTEBOOKS} == set(EXPECTED_FIGURES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: clear outputs before committing")


def _execute(nb, path: Path) -> list:
    """Run ``nb`` in a fresh kernel; its code-cell outputs (no error output allowed). The
    kernel gets a temporary folder of its own, which must be empty once it has stopped (a
    notebook leaves nothing behind; torch's per-user cache folder excepted)."""
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    with tempfile.TemporaryDirectory() as folder, _environment(TMPDIR=folder):
        client.execute()  # raises CellExecutionError on the first failing cell
        left = sorted(p.name for p in Path(folder).iterdir()
                      if not p.name.startswith("torchinductor_"))
    assert left == [], f"{path.name} left temporary files behind: {left}"
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """``os.environ`` with ``values`` set (a kernel started inside inherits them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _figures(outputs: list) -> list[str]:
    import matplotlib.image

    pngs = [o.data["image/png"] for o in outputs
            if o.output_type in ("display_data", "execute_result") and "image/png" in o.data]
    for png in pngs:
        pixels = matplotlib.image.imread(io.BytesIO(base64.b64decode(png)), format="png")
        height, width = pixels.shape[:2]  # taller where the legend sits below the axes
        assert width == 960 and 630 <= height <= 1.6 * 630
    return pngs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_shows_its_figures(path):
    nb = nbformat.read(path, as_version=4)
    assert len(_figures(_execute(nb, path))) == EXPECTED_FIGURES[path.stem]


def test_realrun_notebook_reruns_on_tiny_models_without_a_file():
    path = ROOT / "notebooks" / "03_realrun.ipynb"
    nb = nbformat.read(path, as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert 'RESULTS = "shipped"' in setup.source
    setup.source = setup.source.replace('RESULTS = "shipped"', "RESULTS = None", 1)
    outputs = _execute(nb, path)
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "tiny random models on cpu" in text and "HF assisted near" in text
    assert len(_figures(outputs)) == 1


def test_the_documented_command_runs_a_notebook():
    """docs/plots.md: after ``pip install -e '.[dev]'``, ``jupyter execute
    notebooks/01_theory.ipynb`` from the project root runs it (and leaves nothing behind)."""
    jupyter = Path(sys.executable).with_name("jupyter")
    assert jupyter.exists(), "the dev extra must install the jupyter command"
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([str(jupyter), "execute", "notebooks/01_theory.ipynb"], cwd=ROOT,
                              env={**os.environ, "TMPDIR": folder}, capture_output=True,
                              text=True, timeout=300)
        left = sorted(p.name for p in Path(folder).iterdir())
    assert done.returncode == 0, done.stderr
    assert left == []


def test_the_documented_command_keeps_outputs_and_figures(tmp_path):
    """docs/plots.md's command: ``jupyter nbconvert --to html --execute NOTEBOOK --output-dir
    DIR`` writes one page with every output and figure (any browser shows it; no notebook
    front end needed). Where nbconvert is not installed (it is in the ``dev`` extra), the
    ``jupyter execute --output`` form of nbclient, which keeps them in a notebook, is run."""
    notebook = ROOT / "notebooks" / "02_recommend.ipynb"
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    try:
        import nbconvert  # noqa: F401
    except ImportError:
        work = tmp_path / "notebooks"
        work.mkdir()
        (work / notebook.name).write_bytes(notebook.read_bytes())
        run = "import sys; from nbclient.cli import main; sys.exit(main())"  # jupyter execute
        argv = ["-c", run, str(work / notebook.name), "--output=executed"]
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                              timeout=300, cwd=ROOT, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        kept = nbformat.read(work / "executed.ipynb", as_version=4)
        images = [o for c in kept.cells if c.cell_type == "code" for o in c.outputs
                  if "image/png" in o.get("data", {})]
        assert len(images) == EXPECTED_FIGURES["02_recommend"]
        return
    argv = ["-m", "nbconvert", "--to", "html", "--execute", str(notebook),
            "--output-dir", str(tmp_path)]
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "02_recommend.html").read_text(encoding="utf-8")
    assert page.count("data:image/png") >= EXPECTED_FIGURES["02_recommend"]
