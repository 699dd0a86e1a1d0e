"""qwen/checkpoint.py: a checkpoint is opened once. config.json is read once however many parts are loaded from the
opened checkpoint (the text model, the fast path, the vision tower, the MTP head, the chat's session), and whether
the head is tied is decided in one place, which every reader follows; the decision equals transformers' own."""
import builtins
import io
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

from qwen.chat import default_thinking
from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.course import open_model
from qwen.fast import load_fast
from qwen.model import load_model
from qwen.mtp import load_mtp
from qwen.session import Session
from qwen.vision import load_vision
from qwen.weights import Weights

TOKENIZER = SimpleNamespace(special_tokens={"</think>": 248069, "<|im_start|>": 248045})  # all a Session reads of it


@pytest.fixture
def config_reads(monkeypatch):
    """The config.json files opened from now on, by any reader (every Python open goes through io.open or the
    builtin open; safetensors reads only weight files)."""
    opened, real = [], io.open

    def counting(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).name == "config.json":
            opened.append(Path(file))
        return real(file, *args, **kwargs)
    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    return opened


def test_config_json_is_read_once(synthetic, config_reads):
    checkpoint = open_model(str(synthetic))  # as a chapter opens its --model: a folder, found, then opened
    assert config_reads == [synthetic / "config.json"] and isinstance(checkpoint, Checkpoint)
    model = load_model(checkpoint, dtype=torch.float32)
    model.mtp = load_mtp(checkpoint, dtype=torch.float32)
    assert len(Weights(checkpoint)) and default_thinking(checkpoint) is False and checkpoint.image.factor == 32
    chat = Session(model, TOKENIZER, checkpoint)
    assert chat.stop == checkpoint.stop and chat.thinking is False
    assert len(config_reads) == 1, config_reads  # every part came from the one read
    load_mtp(synthetic, dtype=torch.float32)  # a folder is opened, once, by the same function
    assert len(config_reads) == 2, config_reads


@pytest.mark.slow
def test_config_json_is_read_once_for_the_tower_and_the_fast_path(synthetic, config_reads):
    checkpoint = open_checkpoint(synthetic)
    load_vision(checkpoint, dtype=torch.float32)
    load_fast(checkpoint, dtype=torch.float32, packing=False)
    assert len(config_reads) == 1, config_reads


@pytest.fixture(scope="module")
def untied(synthetic, tmp_path_factory):
    """The synthetic checkpoint with an untied head: its config says so and it stores lm_head.weight (a copy of the
    embedding plus noise) in a weight file of its own, named by the index."""
    folder = tmp_path_factory.mktemp("untied") / "ckpt"
    shutil.copytree(synthetic, folder)
    config = json.loads((folder / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (folder / "config.json").write_text(json.dumps(config))
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    key = "model.language_model.embed_tokens.weight"
    embedding = load_file(folder / index["weight_map"][key])[key]
    head = embedding + 0.01 * torch.randn(embedding.shape, generator=torch.Generator().manual_seed(0)).bfloat16()
    save_file({"lm_head.weight": head}, folder / "head.safetensors", metadata={"format": "pt"})
    index["weight_map"]["lm_head.weight"] = "head.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def transformers_ties(folder):
    """The oracle: does transformers' model, loaded from `folder`, read its head from the embedding's storage?"""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["synthetic", "untied"])
def test_the_head_is_decided_as_transformers_does(name, synthetic, untied):
    folder = {"synthetic": synthetic, "untied": untied}[name]
    checkpoint = open_checkpoint(folder)
    assert checkpoint.tied == transformers_ties(folder) == (name == "synthetic")
    W = Weights(checkpoint)
    assert (W.where["lm_head.weight"] == W.where["embed_tokens.weight"]) == checkpoint.tied
    for model in (load_model(checkpoint), load_fast(checkpoint, packing=False)):
        assert model.cfg.tie_word_embeddings == checkpoint.tied
        assert (model.lm_head.weight is model.embed_tokens.weight) == checkpoint.tied


def test_every_reader_follows_the_one_decision(synthetic, untied, monkeypatch):
    """The decision changed in the one place it is made: the weights and both loaders follow it. The synthetic
    checkpoint judged to store a head of its own has none to give, so the untied model it would build says so; the
    untied one judged tied hands out its embedding as the head and builds a tied model."""
    import qwen.checkpoint

    monkeypatch.setattr(qwen.checkpoint, "stores_head", lambda folder: folder == synthetic)
    checkpoint = open_checkpoint(synthetic)
    assert not checkpoint.tied and "lm_head.weight" not in Weights(checkpoint)
    for load in (load_model, load_fast):
        with pytest.raises(ValueError, match=r"missing \['lm_head\.weight'\]"):
            load(checkpoint)
    flag = json.loads((untied / "config.json").read_text())
    flag["tie_word_embeddings"] = True
    (untied / "config.json").write_text(json.dumps(flag))
    try:
        checkpoint = open_checkpoint(untied)
        W = Weights(checkpoint)
        assert checkpoint.tied and W.where["lm_head.weight"] == W.where["embed_tokens.weight"]
        model = load_model(checkpoint)
        assert model.lm_head.weight is model.embed_tokens.weight
    finally:
        flag["tie_word_embeddings"] = False
        (untied / "config.json").write_text(json.dumps(flag))


def test_a_checkpoint_value_is_what_the_loaders_read(synthetic):
    """A changed Checkpoint is what is built: the loaders take its config, not the file's again."""
    checkpoint = open_checkpoint(synthetic)
    fewer = replace(checkpoint, config=replace(checkpoint.config, num_hidden_layers=4,
                                               layer_types=checkpoint.config.layer_types[:4]))
    with pytest.raises(ValueError, match=r"do not fit Qwen35 \(unexpected \['layers\."):
        load_model(fewer)  # a 4-layer model does not fit the file's 24 layers: the value was read, not the file
    assert open_checkpoint(checkpoint) is checkpoint  # an opened checkpoint is not opened again


@pytest.mark.parametrize("field, value, english, chinese", [
    ("num_hidden_layers", "24", r"num_hidden_layers is '24'; it must be a whole number of at least 1",
     r"num_hidden_layers 的值是 '24'，应为不小于 1 的整数"),
    ("head_dim", 0, r"head_dim is 0; it must be a whole number", r"head_dim 的值是 0"),
    ("num_attention_heads", 5, r"num_attention_heads 5 is not a multiple of num_key_value_heads 2: each key/value "
                               r"head serves the same number of query heads \(GQA\)",
     r"num_attention_heads（5）不是 num_key_value_heads（2）的整数倍：每个键值头要分到同样多的查询头（GQA）"),
    ("linear_num_value_heads", 5, r"linear_num_value_heads 5 is not a multiple of linear_num_key_heads",
     r"linear_num_value_heads（5）不是 linear_num_key_heads（\d+）的整数倍：DeltaNet 的每个键头要分到同样多的值头"),
])
def test_a_damaged_config_is_one_error_in_the_learners_language(synthetic, tmp_path, field, value, english, chinese):
    """A config.json whose widths cannot build a model stops where it is read, naming the field, in either language
    (not an assertion deep inside a layer)."""
    from qwen import lang
    from qwen.config import Config

    raw = json.loads((synthetic / "config.json").read_text())
    raw["text_config"][field] = value
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=english):
        Config.load(tmp_path)
    was = lang.language()
    try:
        lang.use("zh")
        with pytest.raises(ValueError, match=chinese):
            Config.load(tmp_path)
    finally:
        lang.use(was)
