"""find_model on real huggingface_hub machinery: a pre-populated hub cache, the offline flag, $QWEN_MODEL.

Each case runs in a fresh process, because huggingface_hub reads HF_HUB_CACHE / HF_HUB_OFFLINE at import time.
Nothing is mocked: the cache is laid out as huggingface_hub lays it out (blobs, snapshots of symlinks, refs/main).
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch

from qwen.hub import DENSE_SIZES

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def populate_cache(cache, repo_id, src):
    """Put the files of checkpoint `src` into a hub cache under `repo_id`, as a download would have."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if f.is_file():
            blob = repo / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
            blob.write_bytes(f.read_bytes())
            (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snap


def find(tmp_path, *names, **env):
    """find_model(name) for each name (none: the default), opened as a chapter opens it (open_checkpoint: a wrong
    config says so there), in one fresh process with an empty data/ dir. Returns (exit code, output): one line per
    name, the folder or 'ERROR <message>' (exit code 3 on any error)."""
    code = ("import sys, pathlib, qwen.hub, qwen.checkpoint; qwen.hub.DATA_DIR = pathlib.Path(sys.argv[1]); rc = 0\n"
            "for name in sys.argv[2:] or [None]:\n"
            "    try: print(qwen.checkpoint.open_checkpoint(qwen.hub.find_model(name)).folder)\n"
            "    except FileNotFoundError as e: print('ERROR', e); rc = 3\n"
            "sys.exit(rc)")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "QWEN_"))}
    full_env.update(env)
    args = [sys.executable, "-c", code, str(tmp_path / "data"), *names]
    r = subprocess.run(args, env=full_env, capture_output=True, text=True, timeout=120)
    return r.returncode, (r.stdout + r.stderr).strip()


@pytest.fixture
def cache(tmp_path, synthetic):
    populate_cache(tmp_path / "hub", "Qwen/Qwen3.5-0.8B", synthetic)
    return tmp_path / "hub"


@pytest.mark.slow
def test_offline_cache_hit(tmp_path, cache):
    rc, out = find(tmp_path, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert rc == 0, out
    assert out.endswith(f"models--Qwen--Qwen3.5-0.8B/snapshots/{COMMIT}")


@pytest.mark.slow
def test_cached_model_needs_no_network(tmp_path, cache):
    """Online, but the hub endpoint is a closed local port: a cached model must resolve without any request."""
    rc, out = find(tmp_path, HF_HUB_CACHE=str(cache), HF_ENDPOINT="http://127.0.0.1:9")
    assert rc == 0, out
    assert out.endswith(COMMIT)


@pytest.mark.slow
def test_every_dense_size(tmp_path, synthetic):
    names = []
    for size in DENSE_SIZES:
        populate_cache(tmp_path / "hub", f"Qwen/Qwen3.5-{size}", synthetic)
        names += [f"Qwen/Qwen3.5-{size}", size]  # the hub id and its short form
    rc, out = find(tmp_path, *names, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    assert rc == 0, out
    want = [f"models--Qwen--Qwen3.5-{size}/snapshots/{COMMIT}" for size in DENSE_SIZES for _ in range(2)]
    assert [line.split("/hub/")[1] for line in out.splitlines()] == want


@pytest.mark.slow
def test_offline_nothing_cached(tmp_path):
    rc, out = find(tmp_path, HF_HUB_CACHE=str(tmp_path / "empty"), HF_HUB_OFFLINE="1")
    assert rc == 3
    assert "Qwen/Qwen3.5-0.8B is not in" in out and "--model synthetic" in out and "HF_ENDPOINT" in out
    assert "Traceback" not in out


@pytest.mark.slow
def test_incomplete_cache_is_not_used(tmp_path, synthetic):
    snap = populate_cache(tmp_path / "hub", "Qwen/Qwen3.5-0.8B", synthetic)
    (snap / "model.safetensors-00002-of-00002.safetensors").unlink()  # an interrupted download
    rc, out = find(tmp_path, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    assert rc == 3 and "not in" in out, out


@pytest.mark.slow
def test_qwen_model_env_path_and_id(tmp_path, synthetic, cache):
    rc, out = find(tmp_path, QWEN_MODEL=str(synthetic), HF_HUB_OFFLINE="1")
    assert rc == 0 and out == str(synthetic), out
    rc, out = find(tmp_path, QWEN_MODEL="Qwen/Qwen3.5-0.8B", HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert rc == 0 and out.endswith(COMMIT), out
    rc, out = find(tmp_path, str(synthetic), QWEN_MODEL="/nonexistent")  # an explicit argument beats the variable
    assert rc == 0 and out == str(synthetic), out


@pytest.mark.slow
def test_data_dir_comes_before_the_cache(tmp_path, synthetic, cache):
    local = tmp_path / "data" / "Qwen3.5-0.8B"
    local.parent.mkdir()
    local.symlink_to(synthetic)
    rc, out = find(tmp_path, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    assert rc == 0 and out == str(local), out


@pytest.mark.slow
def test_bad_names(tmp_path):
    (tmp_path / "notqwen").mkdir()
    (tmp_path / "notqwen" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    rc, out = find(tmp_path, str(tmp_path / "nowhere"), "not a hub id!", str(tmp_path / "notqwen"))
    lines = out.splitlines()
    assert rc == 1 and "no checkpoint folder at" in lines[0] and "is not a hub id like" in lines[1], out
    assert "is a llama config, not a dense Qwen3.5 one" in lines[-1]  # a ValueError: the wrong model, not a missing one


@pytest.mark.slow
def test_a_broken_cached_model_speaks(tmp_path, synthetic):
    """Only a cache miss sends find_model on to the download: a cached checkpoint of the wrong kind says so."""
    snap = populate_cache(tmp_path / "hub", "Qwen/Qwen3.5-0.8B", synthetic)
    config = snap / "config.json"
    text = config.read_text().replace('"model_type": "qwen3_5"', '"model_type": "llama"')
    config.unlink()
    config.write_text(text)
    rc, out = find(tmp_path, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    assert rc == 1 and "is a llama config, not a dense Qwen3.5 one" in out and "not in" not in out, out


def test_open_model_falls_back_with_the_reason(monkeypatch, capsys, synthetic):
    """No --model and no real model: one line with find_model's reason (not its fix), then the synthetic one."""
    import qwen.course
    from qwen.hub import ModelNotFound

    def missing(name=None):
        raise ModelNotFound("Qwen/Qwen3.5-0.8B is not here", "download it")
    monkeypatch.setattr(qwen.course, "find_model", missing)
    assert qwen.course.open_model(None).folder == synthetic
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "(no real model: Qwen/Qwen3.5-0.8B is not here; using the synthetic checkpoint)"
    with pytest.raises(ModelNotFound, match="is not here. Fix: download it"):
        qwen.course.open_model("Qwen/Qwen3.5-0.8B")  # asked for by name: an error, not a fallback


def test_qwen_model_synthetic_in_a_notebook(monkeypatch, capsys, synthetic):
    """A notebook has no --model: QWEN_MODEL=synthetic picks the synthetic checkpoint, without a 'no real model'
    line that blames the word synthetic for not being a folder or a hub id."""
    import qwen.course

    monkeypatch.setenv("QWEN_MODEL", "synthetic")
    assert qwen.course.open_model(None).folder == synthetic
    assert capsys.readouterr().out.startswith("*** SYNTHETIC WEIGHTS")


# ------------------------------------------------------------------- the vision tower's files in the hub download

TEXT_SHARD, VISION_SHARD, MTP_SHARD = (f"model.safetensors-0000{i}-of-00003.safetensors" for i in (1, 2, 3))


@pytest.fixture(scope="module")
def split(tmp_path_factory, synthetic):
    """The synthetic checkpoint re-sharded as a larger repository may be: text tensors in one file, the vision tower
    in a file of its own, the MTP block in a third; the small files as they are."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    out = tmp_path_factory.mktemp("split")
    index = json.loads((synthetic / "model.safetensors.index.json").read_text())
    groups = {TEXT_SHARD: {}, VISION_SHARD: {}, MTP_SHARD: {}}
    for key, file in index["weight_map"].items():
        with safe_open(synthetic / file, framework="pt") as f:
            shard = VISION_SHARD if key.startswith("model.visual.") else MTP_SHARD if key.startswith("mtp.") else \
                TEXT_SHARD
            groups[shard][key] = f.get_tensor(key)
    for name, tensors in groups.items():
        save_file(tensors, out / name, metadata={"format": "pt"})
    index["weight_map"] = {k: name for name, tensors in groups.items() for k in tensors}
    (out / "model.safetensors.index.json").write_text(json.dumps(index))
    for f in synthetic.iterdir():
        if not f.name.startswith("model.safetensors"):
            (out / f.name).write_bytes(f.read_bytes())
    return out


def test_the_download_asks_for_the_vision_and_mtp_files(split):
    """The patterns the download passes to snapshot_download, filtered by huggingface_hub's own filter (the one
    snapshot_download applies to the repository's file list): the text, vision and MTP weight files and
    preprocessor_config.json come; the README, .gitattributes and the video settings do not."""
    from huggingface_hub.utils import filter_repo_objects

    from qwen.hub import META, download_files, part_files, text_shards

    assert text_shards(split) == [TEXT_SHARD] and part_files(split, "vision") == [split / VISION_SHARD]
    repo = sorted(f.name for f in split.iterdir()) + ["README.md", ".gitattributes", "video_preprocessor_config.json"]
    fetched = set(filter_repo_objects(repo, allow_patterns=download_files(split)))
    want = ({f for f in META if (split / f).is_file()}
            | {TEXT_SHARD, VISION_SHARD, MTP_SHARD, "preprocessor_config.json"})
    assert fetched == want


@pytest.mark.slow
def test_a_cache_without_the_vision_files_still_serves_text(tmp_path, split, synthetic):
    """A cache filled by a text-only download: found offline and read for text as before; preprocessing falls back
    to the published settings; the vision tower names the missing file and the command that fetches it."""
    from transformers import Qwen2VLImageProcessorPil

    from helpers import picture
    from qwen.checkpoint import open_checkpoint
    from qwen.hub import ModelNotFound
    from qwen.image import preprocess
    from qwen.model import load_model
    from qwen.vision import load_vision

    snap = populate_cache(tmp_path / "hub", "Qwen/Qwen3.5-0.8B", split)
    rc, out = find(tmp_path, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    assert rc == 0 and out == str(snap), out
    whole = load_vision(snap)  # everything there: the tower reads, as from the synthetic checkpoint
    for (name, p), (_, q) in zip(whole.named_parameters(), load_vision(synthetic).named_parameters()):
        assert torch.equal(p, q), name

    (snap / VISION_SHARD).unlink()
    (snap / "preprocessor_config.json").unlink()
    rc, out = find(tmp_path, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    assert rc == 0 and out == str(snap), out  # text needs neither file
    ids = torch.tensor([[9707, 11, 1879, 0]])
    with torch.no_grad():
        assert torch.equal(load_model(snap, dtype="fp32")(ids), load_model(synthetic, dtype="fp32")(ids))
    image = picture(300, 200)
    ref = Qwen2VLImageProcessorPil.from_pretrained(synthetic)(images=[image], return_tensors="pt")
    pixels, grid = preprocess(image, open_checkpoint(snap).image)  # no preprocessor_config.json: Qwen3.5's values
    assert torch.equal(pixels, ref["pixel_values"]) and torch.equal(grid, ref["image_grid_thw"])
    with pytest.raises(ModelNotFound) as missing:
        load_vision(snap)
    message = str(missing.value)
    assert "\n" not in message and f"lacks {VISION_SHARD}, which holds the vision tower" in message
    assert f"hf download Qwen/Qwen3.5-0.8B {VISION_SHARD} --revision {COMMIT} --cache-dir {tmp_path / 'hub'}" in message


def test_a_folder_of_text_files_only_says_where_to_put_the_rest(tmp_path, split, synthetic):
    """The text files alone, as the download fetched them before (the vision and MTP files of their own left out):
    text loads and reads the same; the tower and the MTP head each name their missing file."""
    from qwen.hub import ModelNotFound
    from qwen.model import load_model
    from qwen.mtp import load_mtp
    from qwen.vision import load_vision

    folder = tmp_path / "Qwen3.5-0.8B"
    folder.mkdir()
    for f in split.iterdir():
        if f.name not in (VISION_SHARD, MTP_SHARD):
            (folder / f.name).symlink_to(f)
    ids = torch.tensor([[9707, 11, 1879]])
    with torch.no_grad():
        assert torch.equal(load_model(folder, dtype="fp32")(ids), load_model(synthetic, dtype="fp32")(ids))
    with pytest.raises(ModelNotFound, match=rf"lacks {VISION_SHARD}.*Fix: copy {VISION_SHARD} into {folder}"):
        load_vision(folder)
    with pytest.raises(ModelNotFound, match=rf"lacks {MTP_SHARD}, which holds the multi-token-prediction head"):
        load_mtp(folder)
