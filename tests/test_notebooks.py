"""The notebooks are written from the chapter scripts (notebooks/sync.py) and must stay so; each one runs top to
bottom on the synthetic checkpoint in a kernel of this environment, prints what its script prints, and draws its
figures, titled "synthetic weights" where random weights give a figure another shape than the real model's."""
import base64
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

from helpers import FIGURES, as_the_script_prints, masked, speaking, stdout_of
from qwen.synthetic import banner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "notebooks"))
import sync  # noqa: E402  (notebooks/sync.py: the one way notebooks are written)

SCRIPTS = [s.stem for s in sync.scripts()]


def test_every_chapter_has_a_notebook():
    assert set(FIGURES) <= set(SCRIPTS), SCRIPTS
    assert SCRIPTS[:len(FIGURES)] == list(FIGURES), SCRIPTS
    for name in SCRIPTS:
        assert sync.notebook_of(ROOT / "chapters" / f"{name}.py").is_file(), \
            f"notebooks/{name}.ipynb is missing: run python notebooks/sync.py"


@pytest.mark.parametrize("lang", sync.LANGUAGES)
@pytest.mark.parametrize("name", SCRIPTS)
def test_notebook_is_in_sync_with_its_script(name, lang):
    script = ROOT / "chapters" / f"{name}.py"
    assert not sync.notebook_only_cells(script), "\n".join(sync.notebook_only_cells(script))
    expected = sync.render(script, lang)
    assert expected == sync.render(script, lang), "writing the notebook twice gives different bytes"
    on_disk = sync.notebook_of(script, lang).read_text(encoding="utf-8")
    fix = f"notebooks/{name}.ipynb is not what chapters/{name}.py gives: run python notebooks/sync.py"
    if os.environ.get("CI"):  # what is committed: exactly the tool's output, without outputs
        assert on_disk == expected, fix
    else:  # a learner who ran the notebook has outputs in it: fine, as long as the cells are the script's
        assert sync.without_run(on_disk) == expected, fix


@pytest.mark.parametrize("url", ["https://github.com/someone/qwen-by-hand", None])
def test_the_colab_cell_installs_the_course_on_colab_only(tmp_path, monkeypatch, url):
    """Run where it is not Colab, the first cell does nothing (no folder changed, nothing fetched); run on Colab (a
    google.colab module loaded), it clones the repository pyproject.toml names and installs it, or, naming none,
    stops saying to clone the course first. subprocess.run is replaced by a recorder: nothing is downloaded."""
    project = tmp_path / "pyproject.toml"
    project.write_text('[project]\nname = "x"\n' + (f'[project.urls]\nRepository = "{url}"\n' if url else ""))
    monkeypatch.setattr(sync, "PROJECT", project)
    cell, here = sync.on_colab(), os.getcwd()
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(cell, {})
    assert os.getcwd() == here
    ran = []
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(subprocess, "run", lambda command, **_: ran.append(command))
    monkeypatch.setattr(os, "chdir", lambda folder: ran.append(["cd", folder]))
    monkeypatch.setattr(sys, "path", list(sys.path))
    if url is None:
        with pytest.raises(SystemExit, match="clone the course into /content/qwen-by-hand first"):
            exec(cell, {})
        return
    exec(cell, {})
    assert ran == [["git", "clone", "-q", "--depth", "1", url, "/content/qwen-by-hand"],
                   [sys.executable, "-m", "pip", "install", "-q", "-e", "/content/qwen-by-hand"],
                   ["cd", "/content/qwen-by-hand/notebooks"]]
    assert sys.path[0] == "/content/qwen-by-hand"


def test_sync_check_fails_on_a_stale_notebook(tmp_path, monkeypatch):
    """The tool itself: it writes a notebook, --check passes, and fails once the script changes."""
    script = tmp_path / "chapters" / "ch99_test.py"
    script.parent.mkdir()
    script.write_text('"""Doc."""\n# %% [markdown]\n# # Title\n\n# %%\nx = 1\n\n# %% tags=["t"]\nprint(x)\n')
    monkeypatch.setattr(sync, "CHAPTERS", script.parent)
    monkeypatch.setattr(sync, "NOTEBOOKS", tmp_path)
    monkeypatch.setattr(sync, "ROOT", tmp_path)
    sync.main([])
    nb = nbformat.reads((tmp_path / "ch99_test.ipynb").read_text(), as_version=4)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code", "code"]  # the docstring is left out
    assert nb.cells[1].source == sync.on_colab()  # first, after the title
    assert nb.cells[3].source == "print(x)" and not nb.cells[2].outputs and nb.cells[3].metadata == {"tags": ["t"]}
    sync.main(["--check"])
    script.write_text(script.read_text().replace("x = 1", "x = 2"))
    with pytest.raises(SystemExit, match="out of date"):
        sync.main(["--check"])
    sync.main([])
    script.write_text(script.read_text().replace('tags=["t"]\nprint(x)', 'active="ipynb"\n# print(x)'))
    with pytest.raises(SystemExit, match="ch99_test.py:8: a notebook-only cell; make it a live cell"):
        sync.main([])


@pytest.mark.slow
@pytest.mark.parametrize("lang", sync.LANGUAGES)
@pytest.mark.parametrize("name", SCRIPTS)
def test_notebook_runs_clean(executed, name, lang):
    """It runs, says its weights are synthetic and how a notebook gets the real model (QWEN_MODEL: a notebook takes
    no --model), and shows nothing beside what it prints and displays: no value of a cell's last expression (a
    Generator from torch.manual_seed), nothing on stderr (a library's warning)."""
    nb, error = executed(name, lang)
    assert error is None, f"notebooks/{name}.ipynb ({lang}) failed:\n{error}"
    out = stdout_of(nb.cells)
    assert out.startswith(speaking(lang, banner, notebook=True)) and "--model" not in out
    stray = [(n, o.get("name") or o.output_type, (o.get("text") or str(o.get("data", {}).get("text/plain")))[:300])
             for n, c in enumerate(nb.cells) if c.cell_type == "code" for o in c.outputs
             if o.output_type == "execute_result" or o.get("name") == "stderr"]
    assert stray == [], f"notebooks/{name}.ipynb: stray outputs (cell, kind, text): {stray}"


def test_notebook_markdown_speaks_of_qwen_model():
    """A notebook takes no --model: the markdown names QWEN_MODEL where the script's names the option (a shell
    command, such as python -m book.diff --model ..., keeps its option)."""
    for script in sync.scripts():
        nb = nbformat.reads(sync.render(script), as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert not sync.MODEL_OPTION.search(text), f"{script.name}: a notebook cell tells the reader to pass --model"
        if "`--model " in script.read_text(encoding="utf-8"):
            assert "`QWEN_MODEL=" in text, script.name


def test_sync_silences_a_last_expression_and_names_qwen_model():
    """What sync writes differently into a notebook: `;` after a last expression whose value the notebook would
    show (not after print or book.show, which return None), and QWEN_MODEL for a markdown `--model X`."""
    assert sync._silenced("torch.manual_seed(0)  # seeded") == "torch.manual_seed(0);  # seeded"
    assert sync._silenced('x = f(\n    "é")\ng(x,\n  "ü")') == 'x = f(\n    "é")\ng(x,\n  "ü");'
    for kept in ("print(1)", 'book.show("a", f)', "book.listing('qwen/norm.py')", "x = 1", "torch.manual_seed(0);"):
        assert sync._silenced(kept) == kept
    assert sync.MODEL_OPTION.sub(r"`QWEN_MODEL=\1`", "run with `--model Qwen/Qwen3.5-0.8B` or `python x --model y`") \
        == "run with `QWEN_MODEL=Qwen/Qwen3.5-0.8B` or `python x --model y`"


@pytest.mark.slow
@pytest.mark.parametrize("lang", sync.LANGUAGES)
@pytest.mark.parametrize("name", SCRIPTS)
def test_notebook_draws_its_figures(executed, name, lang):
    """Every image the notebook shows is a figure book.show drew, once per book.show cell, titled (its alt text in
    the book) "synthetic weights" (合成权重) exactly where random weights give it another shape than the real model's
    (helpers.FIGURES)."""
    nb, error = executed(name, lang)
    assert error is None, error
    images = [(figure_names(c), o) for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    drawn = {}
    for names, output in images:
        assert base64.b64decode(output.data["image/png"]).startswith(b"\x89PNG")
        shown = output.metadata.get("book", {})
        assert "figure" in shown, f"an image not drawn by book.show, in the cell of {names}: {output.data}"
        assert shown["figure"] in names, (shown, names)
        drawn.setdefault(shown["figure"], []).append(shown["title"])
    named = {f for c in nb.cells if c.cell_type == "code" for f in figure_names(c)}
    for figure in named | set(FIGURES.get(name, {})):
        assert len(drawn.get(figure, [])) == 1, \
            f"the cell of {figure!r} should draw one figure, drew {drawn.get(figure)}"
    for figure, tagged in FIGURES.get(name, {}).items():
        marker = {"en": "synthetic weights", "zh": "合成权重"}[lang]
        assert (marker in drawn[figure][0]) == tagged, \
            f"{figure}: the title {drawn[figure][0]!r} must say 'synthetic weights' exactly where the figure would " \
            "look different on the real model (helpers.FIGURES)"


def figure_names(cell):
    """The figures a cell draws: the names it passes to book.show."""
    return re.findall(r'book\.show\(\s*"([^"]+)"', cell.source)


@pytest.mark.slow
@pytest.mark.parametrize("name", SCRIPTS)
def test_notebook_prints_what_the_script_prints(executed, chapter_outputs, name):
    """The cells print the same lines in both, except what book shows differently: a figure, a listing, an
    exercise, the proof (a notebook shows them; a script prints one line each, starting with book's NOTE).
    Timings are masked. In English: the Chinese notebook runs the same cells (tests/test_editions.py) and prints the
    same numbers, and every script runs in Chinese in tests/test_chapters.py."""
    nb, error = executed(name)
    assert error is None, error
    code, stdout, stderr = chapter_outputs(f"{name}.py")
    assert code == 0, stderr
    from book.show import NOTE

    stdout = "".join(line for line in stdout.splitlines(keepends=True) if not line.startswith(NOTE))
    assert masked(as_the_script_prints(nb, "en")) == masked(stdout)


@pytest.mark.slow
def test_ch01_shows_the_proof(executed, hf_model, synthetic):
    """With transformers installed the notebook runs the proof cell: transformers reads the same tensors. The count
    and the name check are transformers' own state dict against Weights, taken here; the difference is 0.0 by
    an identity (both read the same bytes, and fp32 holds every bf16 number)."""
    from qwen.weights import Weights

    nb, error = executed("ch01_weights")
    assert error is None, error
    out = stdout_of(nb.cells)
    theirs = sorted(k.removeprefix("model.") for k in hf_model.state_dict())  # the tied head listed once more
    assert theirs == sorted(Weights(synthetic))
    assert f"{len(theirs)} tensors, the same names as Weights: True; max |ours - theirs| over all of them: " \
           "0.0" in out
    assert "exercise 202 (Count the parameters from the config): replace the line that raises " \
           "NotImplementedError" in out


@pytest.mark.slow
def test_ch02_ch03_show_the_proof_and_the_exercises(executed):
    """With transformers installed the notebooks run the proof cells (embedding and head exact; RMSNorm and the
    gated norm exact in bf16, the gated norm rounded once up to 2 bf16 steps away), and each exercise cell says how
    to attempt it."""
    nb, error = executed("ch02_embedding")
    assert error is None, error
    out = stdout_of(nb.cells)
    assert "embedding lookup (bf16): max |ours - transformers| = 0 = 0 bf16 steps" in out
    assert "head logits (bf16): max |ours - transformers| = 0 = 0 bf16 steps" in out
    assert "exercise 203 (Embedding lookup and the tied head): replace the line that raises" in out
    nb, error = executed("ch03_norm")
    assert error is None, error
    out = stdout_of(nb.cells)
    assert "final norm, bf16: max |ours - transformers| = 0 = 0 bf16 steps" in out
    assert "gated norm of layer 0, bf16: max |ours - transformers| = 0 = 0 bf16 steps" in out
    steps = re.search(r"the gated norm rounded once instead: up to (\S+) bf16 steps from transformers", out)
    assert steps and 0 < float(steps.group(1)) <= 2, out
    for number in (204, 205):
        assert f"exercise {number} (" in out
