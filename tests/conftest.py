"""Shared fixtures: the synthetic checkpoint (generated once into data/) and transformers' view of it.

The suite runs in two worker processes (`pytest -n 2`, pytest-xdist; course.sh test): each worker uses one thread,
and what is expensive to make (a chapter script's run, a notebook's execution) is made once per test run and shared
by the workers through files in the run's temporary folder (`shared_once`)."""
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from qwen.synthetic import synthetic_path

ROOT = Path(__file__).resolve().parent.parent
WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1" under pytest -n; None in a plain run


def pytest_configure(config):
    if WORKER:  # the workers share the cores: one thread each, in this process and in the scripts it starts
        torch.set_num_threads(1)
        os.environ["OMP_NUM_THREADS"] = "1"
    else:
        synthetic_path()  # generated once, before any worker starts (two workers must not write it at once)


def shared_once(tmp_path_factory, key, make):
    """make() run once per test run, its JSON-able result shared by every worker: the first worker to ask makes it
    under a lock, the others wait for the lock and read the file. Without workers it is simply made once."""
    root = tmp_path_factory.getbasetemp()
    root = root.parent if WORKER else root  # each worker's folder sits in the run's folder
    file = root / "shared" / f"{key}.json"
    file.parent.mkdir(exist_ok=True)
    with open(file.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not file.exists():
            file.write_text(json.dumps(make()))
    return json.loads(file.read_text())


def run_chapter(script, *args):
    """Run chapters/<script> as a learner would: (exit code, stdout, stderr)."""
    r = subprocess.run([sys.executable, str(ROOT / "chapters" / script), *args], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    return r.returncode, r.stdout, r.stderr


def bf16_steps(got, want):
    """Per row (the last dim), max |got − want| in bf16 steps at the row's scale: 2^(⌊log2 max|want|⌋ − 7), the
    spacing of bf16 numbers as large as the row's largest. (…,), leading dims of want."""
    scale = want.abs().amax(-1, keepdim=True)
    return ((got - want).abs() / 2.0 ** (torch.floor(torch.log2(scale)) - 7)).amax(-1)


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
    def output(script):
        return tuple(shared_once(tmp_path_factory, f"chapter-{script}", lambda: run_chapter(script, "--model",
                                                                                          "synthetic")))
    return output


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
