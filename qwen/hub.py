"""Find a checkpoint folder: a path, data/<name>, the Hugging Face cache, or (last) a download from the hub.

A dense Qwen3.5 on the hub is config.json, the tokenizer files, preprocessor_config.json (the image settings of
the vision tower), model.safetensors.index.json and the weight files it names (one for the 0.8B; the index maps
every tensor to its file). The download takes the weight files that hold text or vision tensors and skips one that
holds only multi-token-prediction tensors; a file comes whole. Text needs only its own files: a cached checkpoint
without the vision files still counts, and the vision tower, when asked for, says which files to fetch and how.
"""
import json
import os
import re
import sys
from pathlib import Path

from qwen.config import DEFAULT_MODEL, Config

DENSE_SIZES = ("0.8B", "2B", "4B", "9B", "27B")  # every dense Qwen3.5 shares this layout
VISION = "model.visual."  # the vision tower's tensors
MTP = "mtp."  # the multi-token-prediction head's
SKIPPED = (MTP, VISION)  # multi-token prediction and vision tower: not part of the text model
PARTS = {"text": "the text model", "vision": "the vision tower", "mtp": "the multi-token-prediction head"}
META = ["config.json", "generation_config.json", "model.safetensors.index.json", "tokenizer.json",
        "tokenizer_config.json", "chat_template.jinja", "vocab.json", "merges.txt"]  # what text reads besides weights
VISION_META = ["preprocessor_config.json"]  # the image processor's settings (qwen/image.py)


def data_dir():
    """Where checkpoints are downloaded and generated: data/ in a checkout of the course (git-ignored there), or
    ~/.qwen-by-hand/data after a non-editable install (site-packages is no place for them; the judge keeps its
    progress in ~/.qwen-by-hand too)."""
    root = Path(__file__).resolve().parent.parent
    return root / "data" if (root / "pyproject.toml").is_file() else Path.home() / ".qwen-by-hand" / "data"


DATA_DIR = data_dir()


class ModelNotFound(FileNotFoundError):
    """No usable checkpoint: `reason` says what is missing, `fix` what to do (the message is both)."""

    def __init__(self, reason, fix):
        super().__init__(f"{reason}. Fix: {fix}")
        self.reason, self.fix = reason, fix


def find_model(name=None):
    """Return a local checkpoint folder. Looks, in order: an explicit path, $QWEN_MODEL (a path or a hub id),
    data/<name>, the huggingface_hub cache (offline), and only then downloads the text model's files."""
    name = str(name or os.environ.get("QWEN_MODEL") or DEFAULT_MODEL)
    if name in DENSE_SIZES:
        name = f"Qwen/Qwen3.5-{name}"
    path = Path(name).expanduser()
    if path.is_dir():
        return checked(path)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", name) or name.startswith((".", "/", "~")):
        raise ModelNotFound(f"no checkpoint folder at {path}, and {name!r} is not a hub id like {DEFAULT_MODEL}",
                            "give --model a checkpoint folder, a hub id, a size (0.8B ... 27B) or synthetic")
    local = DATA_DIR / name.split("/")[1]
    if (local / "config.json").is_file():
        return checked(local)
    from huggingface_hub import snapshot_download  # imported here: pure-offline use never needs it
    try:  # a model already in the hub cache is never downloaded again
        return checked(Path(snapshot_download(name, allow_patterns=META, local_files_only=True)))
    except FileNotFoundError:  # not cached (huggingface_hub's LocalEntryNotFoundError), or cached incompletely
        pass
    try:
        folder = Path(snapshot_download(name, allow_patterns=META))  # config, index, tokenizer: a few MB
        size = " (about 1.7 GB)" if name == DEFAULT_MODEL else ""  # the rest takes minutes: say so before it starts
        print(f"downloading {name}{size} into the Hugging Face cache, first use only: a few minutes on a fast "
              f"connection (--model synthetic runs without it)...", file=sys.stderr)
        return checked(Path(snapshot_download(name, allow_patterns=download_files(folder))))
    except OSError as e:  # what huggingface_hub raises for network, HTTP and disk failures
        raise ModelNotFound(
            f"{name} is not in {local} nor in the hub cache, and downloading it failed "
            f"({type(e).__name__}: {str(e).splitlines()[0][:120]})",
            f"go online (or set HF_ENDPOINT to a mirror) and rerun, put the checkpoint in {local}, "
            f"or use --model synthetic") from None


def shards(folder, wanted):
    """The weight files that hold a tensor for which wanted(name) is true (model.safetensors without an index)."""
    index = Path(folder) / "model.safetensors.index.json"
    if not index.is_file():
        return ["model.safetensors"]
    weight_map = json.loads(index.read_text())["weight_map"]
    return sorted({f for k, f in weight_map.items() if wanted(k)})


def part_of(key):
    """Which part of the model a checkpoint key belongs to: "vision", "mtp" or "text"."""
    return "vision" if key.startswith(VISION) else "mtp" if key.startswith(MTP) else "text"


def text_shards(folder):
    """The weight files that hold text tensors: with an index, skip files that hold only vision/MTP tensors."""
    return shards(folder, lambda k: not k.startswith(SKIPPED))


def vision_shards(folder):
    """The weight files that hold vision-tower tensors (model.visual.*)."""
    return shards(folder, lambda k: k.startswith(VISION))


def download_files(folder):
    """What the download asks for, given the folder holding the repository's index: the small files and every
    weight file the index names: the text model, the vision tower (chapter 10) and the MTP head (chapter 11)."""
    return META + VISION_META + shards(folder, lambda k: True)


def part_files(folder, part="text"):
    """The weight files (paths) of checkpoint `folder` that hold tensors of `part` ("text", "vision" or "mtp"): with
    an index, only those, and a file it names that the folder lacks (a download of the text files alone) is one
    clear error that says how to fetch it; without an index, every .safetensors file."""
    folder = Path(folder)
    if not (folder / "model.safetensors.index.json").is_file():
        return sorted(folder.glob("*.safetensors"))
    files = shards(folder, lambda k: part_of(k) == part)
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        but = "" if part == "text" else "; text works without it"
        raise ModelNotFound(f"{folder} lacks {', '.join(missing)}, which hold{'s' * (len(missing) == 1)} "
                            f"{PARTS[part]}{but}", fetch_fix(folder, missing))
    return [folder / f for f in files]


def fetch_fix(folder, files):
    """How to put `files` into checkpoint `folder`: for a hub-cache snapshot (<cache>/models--Org--Name/snapshots/
    <commit>), the `hf download` of that very commit into that cache, which fills the same snapshot."""
    folder, names = Path(folder), " ".join(files)
    repo = folder.parent.parent.name
    if folder.parent.name == "snapshots" and repo.startswith("models--"):
        repo_id = repo.removeprefix("models--").replace("--", "/", 1)
        return f"online, run: hf download {repo_id} {names} --revision {folder.name} --cache-dir {folder.parents[2]}"
    return (f"copy {names} into {folder} from where the checkpoint came from (for a hub checkpoint: "
            f"hf download <hub id> {names} --local-dir {folder})")


def checked(folder):
    """A folder counts as a checkpoint when its config is Qwen3.5 and every text weight file is there."""
    Config.load(folder)
    missing = [f for f in text_shards(folder) if not (folder / f).is_file()]
    if missing:
        raise ModelNotFound(f"{folder} lacks {', '.join(missing)}: the download is incomplete",
                            "run it again (a finished download is never fetched twice)")
    return folder
