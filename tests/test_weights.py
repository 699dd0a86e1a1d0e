"""qwen/config.py and qwen/weights.py: Config, Weights and fill, against transformers' reading of the same
checkpoints; every error path of the one loader, for the text model, the fast path, the vision tower and the MTP
head alike."""
import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig

from qwen.config import Config
from qwen.norm import RMSNorm
from qwen.weights import Weights, fill


def hf_name(name):
    return name if name == "lm_head.weight" else "model." + name


def test_transformers_loads_synthetic_with_no_missing_keys(synthetic):
    for cls in (AutoModelForCausalLM, Qwen3_5ForConditionalGeneration):
        _, info = cls.from_pretrained(synthetic, output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info


def test_weights_equal_transformers(synthetic, hf_model):
    W = Weights(synthetic)
    sd = hf_model.state_dict()
    assert {hf_name(n) for n in W} == set(sd)
    for name in W:
        assert torch.equal(W[name].float(), sd[hf_name(name)]), name


def test_weights_are_lazy(synthetic):
    W = Weights(synthetic)
    assert W.files == {}, "no file should be opened for data before a tensor is asked for"
    W["norm.weight"]
    assert len(W.files) == 1


def test_skips_mtp_and_vision(synthetic):
    index = json.loads((synthetic / "model.safetensors.index.json").read_text())["weight_map"]
    assert any(k.startswith("mtp.") for k in index) and any(k.startswith("model.visual.") for k in index)
    assert not any(n.startswith(("mtp.", "visual.", "model.")) for n in Weights(synthetic))


def test_config_equals_transformers(synthetic):
    ours, theirs = Config.load(synthetic), AutoConfig.from_pretrained(synthetic)
    text = theirs.text_config
    for f in Config.__dataclass_fields__:
        if f in ("rope_theta", "partial_rotary_factor", "mrope_section"):
            assert getattr(ours, f) == text.rope_parameters[f], f
        elif f == "tie_word_embeddings":
            assert ours.tie_word_embeddings == theirs.tie_word_embeddings  # the top-level flag decides
        elif f == "dtype":
            assert ours.dtype == str(text.dtype).removeprefix("torch.")
        else:
            assert getattr(ours, f) == getattr(text, f), f


def write_config(folder, text, composite=True):
    cfg = {"model_type": "qwen3_5", "text_config": text} if composite else dict(text, model_type="qwen3_5_text")
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("interval", [2, 4])
def test_layer_types_derived_like_transformers(tmp_path, interval):
    text = {"num_hidden_layers": 8, "full_attention_interval": interval}
    ours = Config.load(write_config(tmp_path, text, composite=False))
    assert ours.layer_types == Qwen3_5TextConfig(**text).layer_types


def test_rope_defaults_like_transformers(tmp_path):
    ours = Config.load(write_config(tmp_path, {"num_hidden_layers": 4}))
    theirs = Qwen3_5TextConfig(num_hidden_layers=4)
    assert ours.rope_theta == theirs.rope_parameters["rope_theta"] == 10000
    assert ours.partial_rotary_factor == theirs.rope_parameters["partial_rotary_factor"] == 0.25
    old_style = Config.load(write_config(tmp_path, {"num_hidden_layers": 4, "rope_theta": 5e6}))  # top-level key
    assert old_style.rope_theta == Qwen3_5TextConfig(num_hidden_layers=4, rope_theta=5e6).rope_parameters["rope_theta"]


def test_tie_flag_comes_from_top_level(tmp_path):
    cfg = {"model_type": "qwen3_5", "tie_word_embeddings": True, "text_config": {"tie_word_embeddings": False}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert Config.load(tmp_path).tie_word_embeddings is True


@pytest.mark.parametrize("config, found", [
    ({"model_type": "qwen3", "hidden_size": 1024}, "qwen3 config"),
    ({"model_type": "qwen3_5_moe", "text_config": {}}, "qwen3_5_moe config"),
    ({"hello": "world"}, "non-model config"),
    ([1, 2, 3], "non-model config"),
])
def test_not_qwen35_config(tmp_path, config, found):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=f"is a {found}, not a dense Qwen3.5 one"):
        Config.load(tmp_path)


def test_broken_config_json(tmp_path):
    (tmp_path / "config.json").write_text("{ not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Config.load(tmp_path)


def copy_checkpoint(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_truncated_file(synthetic, tmp_path):
    ckpt = copy_checkpoint(synthetic, tmp_path / "ckpt")
    shard = ckpt / "model.safetensors-00002-of-00002.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated: its header promises [\d,]+ bytes, the file has [\d,]+"):
        Weights(ckpt)
    shard.write_bytes(data[:5])  # not even the 8-byte length
    with pytest.raises(ValueError, match="truncated or not a safetensors file"):
        Weights(ckpt)


def single_file_checkpoint(synthetic, folder, rename=None, text_only=False):
    """Merge the shards into one model.safetensors, optionally renaming keys; no index."""
    folder.mkdir()
    tensors = {}
    for f in sorted(synthetic.glob("*.safetensors")):
        tensors.update(load_file(f))
    if rename:
        tensors = {rename(k): v for k, v in tensors.items() if rename(k)}
    save_file(tensors, folder / "model.safetensors")
    raw = json.loads((synthetic / "config.json").read_text())
    if text_only:  # a flat text config, as Qwen3_5ForCausalLM.save_pretrained writes it
        raw = dict(raw["text_config"], tie_word_embeddings=raw["tie_word_embeddings"])
    (folder / "config.json").write_text(json.dumps(raw))
    return folder


def test_single_file_checkpoint(synthetic, tmp_path, hf_model):
    ckpt = single_file_checkpoint(synthetic, tmp_path / "single")
    W = Weights(ckpt)
    sd = hf_model.state_dict()
    assert {hf_name(n) for n in W} == set(sd)
    assert all(torch.equal(W[n].float(), sd[hf_name(n)]) for n in W)


def test_model_prefix_checkpoint(synthetic, tmp_path):
    """The CausalLM layout: `model.*` keys and a flat qwen3_5_text config; transformers reads the same tensors."""
    def rename(k):
        return None if k.startswith(("mtp.", "model.visual.")) else k.replace("model.language_model.", "model.")
    ckpt = single_file_checkpoint(synthetic, tmp_path / "causal", rename=rename, text_only=True)
    theirs, info = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    W, sd = Weights(ckpt), theirs.state_dict()
    assert {hf_name(n) for n in W} == set(sd)
    assert all(torch.equal(W[n].float(), sd[hf_name(n)]) for n in W)


def test_stored_head_wins_over_tying(synthetic, tmp_path):
    """Tying on but an lm_head.weight in the file that differs: transformers uses the stored head; so do we."""
    ckpt = single_file_checkpoint(synthetic, tmp_path / "head")
    tensors = load_file(ckpt / "model.safetensors")
    tensors["lm_head.weight"] = torch.randn_like(tensors["model.language_model.embed_tokens.weight"].float()).bfloat16()
    save_file(tensors, ckpt / "model.safetensors")
    theirs = AutoModelForCausalLM.from_pretrained(ckpt)
    W = Weights(ckpt)
    assert torch.equal(W["lm_head.weight"].float(), theirs.lm_head.weight)
    assert not torch.equal(W["lm_head.weight"], W["embed_tokens.weight"])


def test_fill_copies_and_checks(synthetic):
    """A module built with real tensors keeps its dtype (fp32 here: bf16 widens exactly) and its requires_grad."""
    W = Weights(synthetic)
    d = Config.load(synthetic).hidden_size
    norm = fill(RMSNorm(d), W, "norm.")
    assert torch.equal(norm.weight, W["norm.weight"].float()) and norm.weight.requires_grad
    with pytest.raises(ValueError, match=r"norm\.weight has shape \(64,\) in the checkpoint, RMSNorm\.weight expects "
                                         r"\(65,\)\. Fix: download the checkpoint again"):
        fill(RMSNorm(d + 1), W, "norm.")
    with pytest.raises(ValueError, match=r"missing \['nope\.weight'\]"):
        fill(RMSNorm(d), W, "nope.")
    with pytest.raises(ValueError, match=r"missing \['layers\.0\.weight'\] \(1\); unexpected \['layers\.0\.\w"):
        fill(RMSNorm(d), W, "layers.0.")  # a whole layer's tensors do not fit one norm


def test_bad_layer_types(tmp_path):
    config = {"model_type": "qwen3_5_text", "num_hidden_layers": 3, "layer_types": ["x", "full_attention"]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"layer_types must list 3 entries .* got 2 with \{'x'\}"):
        Config.load(tmp_path)


# ---------------------------------------------------------------- the synthetic checkpoint: what it claims

def test_the_banner_is_true(synthetic):
    """Real: names, dtypes, depth and layer pattern, vocabulary, config layout. Not real: widths, shapes, counts."""
    from qwen.sizes import REAL_TEXT_CONFIG, real_config, tensor_shapes
    from qwen.synthetic import banner

    BANNER = banner(notebook=False)  # in English: the tests run with the course's default language
    assert "Real: tensor names, dtypes, depth and layer pattern, vocabulary" in BANNER
    assert "the tokenizer files are the course's rebuild" in BANNER  # not Qwen's own tokenizer.json
    assert "Not real: widths, so shapes and parameter counts, and every value" in BANNER
    ours, theirs = Config.load(synthetic), real_config()
    same = ("vocab_size", "num_hidden_layers", "layer_types", "tie_word_embeddings", "dtype", "linear_conv_kernel_dim",
            "rope_theta", "partial_rotary_factor", "rms_norm_eps")
    assert [getattr(ours, k) for k in same] == [getattr(theirs, k) for k in same]
    raw = json.loads((synthetic / "config.json").read_text())
    assert raw["architectures"] == ["Qwen3_5ForConditionalGeneration"] and set(raw["text_config"]) >= set(
        k for k in REAL_TEXT_CONFIG if k != "model_type")  # every key of the real text_config is there
    names = lambda cfg: {n.split(".", 2)[-1] for n in tensor_shapes(cfg)}  # noqa: E731 (names within a layer)
    W = Weights(synthetic)
    assert {n.split(".", 2)[-1] for n in W if n != "lm_head.weight"} == names(REAL_TEXT_CONFIG)
    fp32 = {n for n in W if W[n].dtype == torch.float32}  # the published checkpoints' fp32 tensors (third-party)
    assert fp32 == {f"layers.{i}.{t}" for i in range(24) for t in ("linear_attn.A_log", "linear_attn.norm.weight")
                    if ours.layer_types[i] == "linear_attention"} and len(fp32) == 36
    assert {W[n].dtype for n in W if n not in fp32} == {torch.bfloat16}
    assert ours.hidden_size != theirs.hidden_size


def readme():
    """The README's text, its line breaks as spaces."""
    return " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8").split())


def test_readme_figure_synthetic_parameter_count(synthetic):
    """A README figure, checked so the text stays true: "17.8 M instead of 752 M" (the count is qwen.sizes', proven
    against transformers; the 752 M in test_practice.py)."""
    from qwen.sizes import count_by_part, tensor_shapes

    total = count_by_part(tensor_shapes(json.loads((synthetic / "config.json").read_text())["text_config"]))["total"]
    assert round(total / 1e6, 1) == 17.8 and "17.8 M instead of 752 M" in readme()


def test_no_planted_structure(synthetic):
    """Each norm weight is drawn around its initial value, the same way in every layer: no trend with depth for a
    chapter to 'find'. Zero-centred norms scatter around 0, the gated norm around 1 (5 standard errors)."""
    W = Weights(synthetic)
    cfg = Config.load(synthetic)
    zero_centred = [n for n in W if n.endswith(("layernorm.weight", "q_norm.weight", "k_norm.weight"))]
    for name in zero_centred + ["norm.weight"]:
        w = W[name].float()
        assert abs(w.mean()) < 5 * 0.1 / len(w) ** 0.5, (name, w.mean())
    gated = [W[n].float() for n in W if n.endswith("linear_attn.norm.weight")]
    assert all(abs(w.mean() - 1) < 5 * 0.1 / len(w) ** 0.5 for w in gated)
    means = torch.tensor([W[f"layers.{i}.post_attention_layernorm.weight"].float().mean()
                          for i in range(cfg.num_hidden_layers)])
    depth = torch.arange(cfg.num_hidden_layers, dtype=torch.float32)
    assert abs(torch.corrcoef(torch.stack([means, depth]))[0, 1]) < 0.6  # no drift with depth


def test_readme_figure_synthetic_size(synthetic):
    """A README figure, checked so the text stays true: about 53 MB on disk (10**6 bytes each), 36 MB of them weights
    and 16.5 MB the tokenizer."""
    size = lambda files: sum(f.stat().st_size for f in files) / 1e6  # noqa: E731
    assert round(size(synthetic.iterdir())) == 53
    assert round(size(synthetic.glob("*.safetensors"))) == 36
    assert round(size([synthetic / "tokenizer.json"]), 1) == 16.5
    assert "about 53 MB: 36 MB of weights and the 16.5 MB tokenizer" in readme()


# ---------------------------------------------------------------- the one loader's error paths, part by part

def text_loader(folder):
    from qwen.model import load_model

    return load_model(folder, dtype=torch.float32)


def fast_loader(folder):
    from qwen.fast import load_fast

    return load_fast(folder, dtype=torch.float32, widen=False)


def vision_loader(folder):
    from qwen.vision import load_vision

    return load_vision(folder)


def mtp_loader(folder):
    from qwen.mtp import load_mtp

    return load_mtp(folder)


# part: (its loader, the module it builds, a tensor of it to break: in the fast model the MLP's up_proj is a part of
# the joined gate_up_proj)
PARTS = {"text": (text_loader, "Qwen35", "model.language_model.layers.0.mlp.up_proj.weight"),
         "fast": (fast_loader, "Fast", "model.language_model.layers.0.mlp.up_proj.weight"),
         "vision": (vision_loader, "VisionTower", "model.visual.blocks.0.mlp.linear_fc1.weight"),
         "mtp": (mtp_loader, "MTP", "mtp.fc.weight")}
FILES = {"text": "text.safetensors", "vision": "vision.safetensors", "mtp": "mtp.safetensors"}


@pytest.fixture(scope="module")
def every_tensor(synthetic):
    tensors = {}
    for f in sorted(synthetic.glob("*.safetensors")):
        tensors.update(load_file(f))
    return tensors


def by_part(synthetic, folder, tensors):
    """A checkpoint of `tensors` with one weight file per part (text, vision, MTP) and an index naming them."""
    from qwen.hub import key_part

    folder.mkdir()
    weight_map = {}
    for part, file in FILES.items():
        mine = {k: v for k, v in tensors.items() if key_part(k) == part}
        save_file(mine, folder / file)
        weight_map.update(dict.fromkeys(mine, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    shutil.copy(synthetic / "config.json", folder / "config.json")
    return folder


def stripped(part, key):
    return key.removeprefix("model.language_model.") if part in ("text", "fast") else key.split(".", 1 + (
        part == "vision"))[-1]


@pytest.mark.parametrize("part", PARTS)
def test_each_part_loads_from_its_own_file(synthetic, tmp_path, every_tensor, part):
    """The checkpoint split by part loads as the synthetic one does: the loaders read only their own files."""
    load, kind, _ = PARTS[part]
    folder = by_part(synthetic, tmp_path / "ok", every_tensor)
    for other in FILES:
        if other != ("text" if part == "fast" else part):
            (folder / FILES[other]).unlink()
    got, want = load(folder), load(synthetic)
    assert type(got).__name__ == kind
    assert all(torch.equal(p, q) for p, q in zip(got.parameters(), want.parameters(), strict=True))


@pytest.mark.parametrize("part", PARTS)
def test_a_missing_tensor_names_the_checkpoint_and_the_fix(synthetic, tmp_path, every_tensor, part):
    load, kind, key = PARTS[part]
    folder = by_part(synthetic, tmp_path / "missing", {k: v for k, v in every_tensor.items() if k != key})
    name = stripped(part, key)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(folder))}: the tensors under '' do not fit {kind} "
                                         rf"\(missing \['{re.escape(name)}'\] \(1\)\)\. Fix: download the checkpoint"):
        load(folder)


@pytest.mark.parametrize("part", PARTS)
def test_an_unexpected_tensor_names_the_checkpoint_and_the_fix(synthetic, tmp_path, every_tensor, part):
    load, kind, key = PARTS[part]
    extra = key.replace("weight", "extra")
    folder = by_part(synthetic, tmp_path / "unexpected", {**every_tensor, extra: every_tensor[key].clone()})
    with pytest.raises(ValueError, match=rf"^{re.escape(str(folder))}: the tensors under '' do not fit {kind} "
                                         rf"\(unexpected \['{re.escape(stripped(part, extra))}'\] \(1\)\)\. Fix: "):
        load(folder)


@pytest.mark.parametrize("part", PARTS)
def test_a_wrong_shape_names_the_checkpoint_and_the_fix(synthetic, tmp_path, every_tensor, part):
    """One row too many; in the fast model the broken tensor is one part of a joined weight."""
    load, kind, key = PARTS[part]
    t = every_tensor[key]
    folder = by_part(synthetic, tmp_path / "shape", {**every_tensor, key: torch.cat([t, t[:1]])})
    rows = f"\\({t.shape[0] + 1}, {t.shape[1]}\\)"
    joined = part == "fast"
    match = (rf"^{re.escape(str(folder))}: \S*{re.escape(stripped(part, key))} has shape .*{rows}.* in the checkpoint, "
             rf"{kind}\.\S*{'gate_up_proj' if joined else re.escape(stripped(part, key).rpartition('.')[0])}\.weight "
             rf"expects \(\d+, \d+\)\. Fix: download the checkpoint again")
    with pytest.raises(ValueError, match=match):
        load(folder)


@pytest.mark.parametrize("part", PARTS)
def test_a_file_the_index_names_but_the_folder_lacks(synthetic, tmp_path, every_tensor, part):
    """The part's weight file deleted: one clear error naming the file, what it holds and how to fetch it."""
    from qwen.hub import ModelNotFound

    load = PARTS[part][0]
    folder = by_part(synthetic, tmp_path / "lacks", every_tensor)
    file = FILES["text" if part == "fast" else part]
    (folder / file).unlink()
    with pytest.raises(ModelNotFound, match=rf"^{re.escape(str(folder))} lacks {file}, which holds the .*\. Fix: "
                                            rf"copy {file} into {re.escape(str(folder))}"):
        load(folder)
