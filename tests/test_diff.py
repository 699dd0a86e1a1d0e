"""book/diff.py: names the module a perturbed weight sits in; says how to install transformers when it is missing.
(That the qwen package never imports transformers is tests/test_package.py's.)"""
import subprocess
import sys

import pytest
import torch

from book.diff import compare
from hf_checkpoint import hf_load, save_checkpoint, text_config
from qwen.model import load_model


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_checkpoint(tmp_path_factory.mktemp("diff"), text_config(num_hidden_layers=4), seed=3)


@pytest.fixture(scope="module")
def theirs(folder):
    return hf_load(folder)


def test_unchanged_model_is_within_tolerance(folder, theirs, capsys):
    assert compare(folder, ours=load_model(folder, dtype=torch.float32), theirs=theirs) is None
    assert "every module is within it" in capsys.readouterr().out


@pytest.mark.parametrize("weight, module", [
    ("layers.2.mlp.down_proj.weight", "layers.2.mlp"),
    ("layers.1.linear_attn.A_log", "layers.1.linear_attn"),
    ("layers.3.self_attn.k_norm.weight", "layers.3.self_attn"),
    ("layers.0.post_attention_layernorm.weight", "layers.0.post_attention_layernorm"),
    ("norm.weight", "norm"),
])
def test_perturbed_weight_is_named(folder, theirs, weight, module, capsys):
    ours = load_model(folder, dtype=torch.float32)
    with torch.no_grad():
        ours.get_parameter(weight).view(-1)[0] += 0.5  # one number of one tensor
    assert compare(folder, ours=ours, theirs=theirs) == module
    assert f"first module beyond it: {module}" in capsys.readouterr().out


def test_without_transformers_says_how_to_install(folder, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now raises ImportError
    assert compare(folder) == "transformers missing"
    assert "pip install 'transformers==5.24.0'" in capsys.readouterr().out


@pytest.mark.slow
def test_command_line(folder):
    """The command on the small checkpoint above (the synthetic one, in-process, is test_model.py's: its 248k-row
    head made this run the slowest of the file for nothing the command line adds)."""
    r = subprocess.run([sys.executable, "-m", "book.diff", "--model", str(folder)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "layers.3.mlp" in r.stdout and "every module is within it" in r.stdout
    assert "no tokenizer" in r.stdout  # the folder has none: fixed pseudo-random ids instead, and it says so
