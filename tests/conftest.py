"""Shared fixtures: the synthetic checkpoint (generated once into data/), transformers' view of it, and the small
random checkpoints transformers writes. Plain helpers live in helpers.py and hf_checkpoint.py.

The suite runs in two worker processes (`pytest -n 2`, pytest-xdist; course.sh test): each worker uses one thread,
and what is expensive to make (a chapter script's run, a notebook's execution) is made once per test run and shared
by the workers through files in the run's temporary folder (helpers.shared_once, under a lock that works on Linux,
macOS and Windows)."""
import os

os.environ["QWEN_LANG"] = "en"  # the suite reads what the course prints in English; tests of the Chinese ask for it

import nbformat
import pytest
import torch

from helpers import ROOT, WORKER, run_chapter, shared_once
from hf_checkpoint import CONFIGS, SMALL, add_mtp, save_checkpoint
from qwen.synthetic import synthetic_path
from web.execute import execute, kernel_spec


def pytest_configure(config):
    if WORKER:  # the workers share the cores: one thread each, in this process and in the scripts it starts
        torch.set_num_threads(1)
        os.environ["OMP_NUM_THREADS"] = "1"
    else:
        synthetic_path()  # generated once, before any worker starts (two workers must not write it at once)


@pytest.fixture(scope="session", autouse=True)
def learner_files_untouched(tmp_path_factory):
    """The judge's progress and working files go to a temporary folder for the whole run, in this process and in
    every child it starts: a test that grades a solution must not mark it solved in the learner's own progress."""
    folder = tmp_path_factory.mktemp("practice")
    saved = {k: os.environ.get(k) for k in ("PRACTICE_PROGRESS", "PRACTICE_WORK")}
    os.environ.update(PRACTICE_PROGRESS=str(folder / "progress.json"), PRACTICE_WORK=str(folder / "work"))
    yield folder
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def synthetic():
    return synthetic_path()


@pytest.fixture(scope="session")
def chapter_outputs(synthetic, tmp_path_factory):
    """Each chapter script run once on the synthetic checkpoint, shared by the chapter and notebook tests (and by
    the workers): (exit code, stdout, stderr)."""
    def output(script, lang="en"):
        key = f"chapter-{script}" if lang == "en" else f"chapter-{lang}-{script}"
        return tuple(shared_once(tmp_path_factory, key, lambda: run_chapter(script, "--model", "synthetic",
                                                                            "--lang", lang)))
    return output


@pytest.fixture(scope="session")
def executed(synthetic, tmp_path_factory):
    """Each chapter's notebook (English, or Chinese from notebooks/zh/) run once per test run in a kernel of this
    Python on the synthetic checkpoint, as the book runs it (web/execute.py), shared by the notebook and book tests
    and by the workers: (name, lang) -> (notebook with its outputs, the error that stopped it or None). No timing: a
    hang is stopped by the per-cell timeout."""
    kernels = {}

    def run(name, lang="en"):
        def make():
            if lang not in kernels:
                kernels[lang] = kernel_spec(tmp_path_factory.mktemp(f"kernels-{lang}"), synthetic, lang)
            folder = ROOT / "notebooks" / ("" if lang == "en" else lang)
            nb, error = execute(folder / f"{name}.ipynb", kernels[lang])
            return nbformat.writes(nb), error
        key = f"notebook-{name}" if lang == "en" else f"notebook-{lang}-{name}"
        text, error = shared_once(tmp_path_factory, key, make)
        return nbformat.reads(text, as_version=4), error
    return run


@pytest.fixture(scope="session")
def tok(synthetic):
    """The synthetic checkpoint's tokenizer (the real vocabulary), loaded once: its tokenizer.json takes a second."""
    from qwen.tokenizer import load_tokenizer

    return load_tokenizer(synthetic)


@pytest.fixture(scope="session")
def hf_model(synthetic):
    """transformers' Qwen3.5 text model on the same checkpoint, in fp32: the oracle."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(synthetic, dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matrices on a shared CPU: one thread is faster than several fighting. Use with
    `pytestmark = pytest.mark.usefixtures("one_thread")`; the count is restored after the module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{name: folder} of small random checkpoints written by transformers, one per hf_checkpoint.CONFIGS entry."""
    out = {}
    for i, (name, (text, tied, drop)) in enumerate(CONFIGS.items()):
        out[name] = save_checkpoint(tmp_path_factory.mktemp(f"cfg{i}"), text, tied=tied, seed=i,
                                    drop_layer_types=drop)
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """{name: folder} of small random checkpoints with random mtp.* tensors added, one per hf_checkpoint.SMALL entry."""
    return {name: add_mtp(save_checkpoint(tmp_path_factory.mktemp(f"mtp{i}"), text, tied=tied, seed=i), 10 + i)
            for i, (name, (text, tied)) in enumerate(SMALL.items())}
