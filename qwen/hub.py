"""Find a checkpoint folder: a path, data/<name>, the Hugging Face cache, or (last) a download from the hub.

A dense Qwen3.5 on the hub is config.json, the tokenizer files, preprocessor_config.json (the image settings of
the vision tower), model.safetensors.index.json and the weight files it names (one for the 0.8B; the index maps
every tensor to its file). The download takes every weight file the index names: the text model's, the vision
tower's and the multi-token-prediction head's; a file comes whole. Text needs only its own files: a cached checkpoint
without the vision or MTP files (an older download) still counts, and the tower or the head, when asked for, says
which files to fetch and how. What the folder holds is read once, when it is opened (qwen/checkpoint.py).
"""
import os
import re
import sys
from pathlib import Path

from qwen.config import DEFAULT_MODEL, weight_map
from qwen.lang import tr

DENSE_SIZES = ("0.8B", "2B", "4B", "9B", "27B")  # every dense Qwen3.5 shares this layout
VISION = "model.visual."  # the vision tower's tensors
MTP = "mtp."  # the multi-token-prediction head's
SKIPPED = (MTP, VISION)  # multi-token prediction and vision tower: not part of the text model
CHECKPOINT_PARTS = ("text", "vision", "mtp")  # the parts of a checkpoint; part_name says what each is
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


MIRROR = "https://hf-mirror.com"  # a public mirror of the Hugging Face hub, reachable from mainland China


def elsewhere(name: str, local: Path) -> str:
    """Where else checkpoint `name` can come from when huggingface.co is slow or out of reach: the mirror (for this
    course's own download) or ModelScope, into `local`, the folder find_model reads for `name`."""
    return tr(f"where huggingface.co is slow or out of reach, set HF_ENDPOINT={MIRROR} (a mirror of the hub) and "
              f"rerun, or fetch it from ModelScope: `pip install modelscope`, then `modelscope download --model {name} "
              f"--local_dir {local}` (the course reads that folder by itself; QWEN_MODEL={local} names it too)",
              f"在中国大陆访问 huggingface.co 慢或连不上时，可以设 HF_ENDPOINT={MIRROR}（Hugging Face 的镜像站）"
              f"再运行；也可以从魔搭（ModelScope）下载：先 `pip install modelscope`，再运行 `modelscope download "
              f"--model {name} --local_dir {local}`（课程会自动读取这个文件夹，也可以用 QWEN_MODEL={local} 指定）")


class ModelNotFound(FileNotFoundError):
    """No usable checkpoint: `reason` says what is missing, `fix` what to do (the message is both)."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(tr(f"{reason}. Fix: {fix}", f"{reason}。解决办法：{fix}"))
        self.reason, self.fix = reason, fix


def find_model(name: str | None = None) -> Path:
    """Return a local checkpoint folder (qwen.checkpoint.open_checkpoint opens it). Looks, in order: an explicit
    path, $QWEN_MODEL (a path or a hub id), data/<name>, the huggingface_hub cache (offline), and only then
    downloads the checkpoint's files."""
    name = str(name or os.environ.get("QWEN_MODEL") or DEFAULT_MODEL)
    if name in DENSE_SIZES:
        name = f"Qwen/Qwen3.5-{name}"
    path = Path(name).expanduser()
    if path.is_dir():  # yours as it is: opening it (qwen/checkpoint.py) says what is wrong with it, if anything
        return path
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", name) or name.startswith((".", "/", "~")):
        raise ModelNotFound(tr(f"no checkpoint folder at {path}, and {name!r} is not a hub id like {DEFAULT_MODEL}",
                               f"{path} 处没有检查点文件夹，{name!r} 也不是 {DEFAULT_MODEL} 这样的 "
                               "Hugging Face 模型名"),
                            tr("give --model a checkpoint folder, a hub id, a size (0.8B ... 27B) or synthetic",
                               "--model 可以是检查点文件夹、Hugging Face 模型名、尺寸（0.8B … 27B）或 synthetic"))
    local = DATA_DIR / name.split("/")[1]
    if (local / "config.json").is_file():
        return local
    from huggingface_hub import snapshot_download  # imported here: pure-offline use never needs it
    try:  # a model already in the hub cache is never downloaded again
        return complete(Path(snapshot_download(name, allow_patterns=META, local_files_only=True)))
    except FileNotFoundError:  # not cached (huggingface_hub's LocalEntryNotFoundError), or cached incompletely
        pass
    try:
        folder = Path(snapshot_download(name, allow_patterns=META))  # config, index, tokenizer: a few MB
        # the rest takes minutes: say so before it starts
        size = tr(" (about 1.7 GB)", "（约 1.7 GB）") if name == DEFAULT_MODEL else ""
        print(tr(f"downloading {name}{size} into the Hugging Face cache, first use only: a few minutes on a fast "
                 f"connection (--model synthetic runs without it)... If it crawls, stop it with Ctrl-C: "
                 f"{elsewhere(name, local)}",
                 f"正在把 {name}{size} 下载到 Hugging Face 缓存（只有第一次使用时才下载），网速快的话要几分钟；"
                 f"--model synthetic 不需要下载也能运行……下载太慢的话，按 Ctrl-C 停下。{elsewhere(name, local)}。"),
              file=sys.stderr)
        return complete(Path(snapshot_download(name, allow_patterns=download_files(folder))))
    except OSError as e:  # what huggingface_hub raises for network, HTTP and disk failures
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        raise ModelNotFound(
            tr(f"{name} is not in {local} nor in the hub cache, and downloading it failed ({why})",
               f"{name} 既不在 {local}，也不在 Hugging Face 缓存里，下载又失败了（{why}）"),
            tr(f"go online and rerun; {elsewhere(name, local)}; or put the checkpoint in {local} yourself, or use "
               f"--model synthetic",
               f"联网后重新运行；{elsewhere(name, local)}；也可以自己把检查点放进 {local}，"
               f"或者先用 --model synthetic")) from None


def shards(folder, wanted):
    """The weight files that hold a tensor for which wanted(name) is true (model.safetensors without an index)."""
    index = Path(folder) / "model.safetensors.index.json"
    if not index.is_file():
        return ["model.safetensors"]
    return sorted({f for k, f in weight_map(index).items() if wanted(k)})


def part_name(part):
    """What a part of a checkpoint ("text", "vision" or "mtp") is, in words."""
    return {"text": tr("the text model", "文本模型"), "vision": tr("the vision tower", "视觉塔"),
            "mtp": tr("the multi-token-prediction head", "多 token 预测头")}[part]


def key_part(key):
    """Which of CHECKPOINT_PARTS a checkpoint key belongs to: "vision", "mtp" or "text"."""
    return "vision" if key.startswith(VISION) else "mtp" if key.startswith(MTP) else "text"


def text_shards(folder):
    """The weight files that hold text tensors: with an index, skip files that hold only vision/MTP tensors."""
    return shards(folder, lambda k: not k.startswith(SKIPPED))


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
    files = shards(folder, lambda k: key_part(k) == part)
    missing = [f for f in files if not (folder / f).is_file()]
    if missing:
        but = "" if part == "text" else tr("; text works without it", "；只处理文本的话用不到它")
        files, what = tr(", ", "、").join(missing), part_name(part)
        if len(missing) == 1:
            reason = tr(f"{folder} lacks {files}, which holds {what}{but}",
                        f"{folder} 缺少 {files}，这个文件存的是{what}{but}")
        else:
            reason = tr(f"{folder} lacks {files}, which hold {what}{but}",
                        f"{folder} 缺少 {files}，这些文件存的是{what}{but}")
        raise ModelNotFound(reason, fetch_fix(folder, missing))
    return [folder / f for f in files]


def fetch_fix(folder, files):
    """How to put `files` into checkpoint `folder`: for a hub-cache snapshot (<cache>/models--Org--Name/snapshots/
    <commit>), the `hf download` of that very commit into that cache, which fills the same snapshot."""
    folder, names = Path(folder), " ".join(files)
    repo = folder.parent.parent.name
    if folder.parent.name == "snapshots" and repo.startswith("models--"):
        repo_id = repo.removeprefix("models--").replace("--", "/", 1)
        return tr(f"online, run: hf download {repo_id} {names} --revision {folder.name} --cache-dir "
                  f"{folder.parents[2]} (where huggingface.co is slow, set HF_ENDPOINT={MIRROR} first)",
                  f"联网后运行 hf download {repo_id} {names} --revision {folder.name} --cache-dir "
                  f"{folder.parents[2]}（访问 huggingface.co 慢时，先设 HF_ENDPOINT={MIRROR}）")
    return tr(f"copy {names} into {folder} from where the checkpoint came from (for a hub checkpoint: "
              f"hf download <hub id> {names} --local-dir {folder})",
              f"从检查点原来的出处把 {names} 复制到 {folder}"
              f"（来自 Hugging Face 的检查点可以运行 hf download <模型名> {names} --local-dir {folder}）")


def complete(folder):
    """A hub snapshot counts when it has a config.json and every text weight file (else it is fetched again). Whether
    the config is a Qwen3.5 one is said when the folder is opened (qwen/checkpoint.py: config.json is read once)."""
    if not (folder / "config.json").is_file():
        raise ModelNotFound(tr(f"no config.json in {folder}", f"{folder} 里没有 config.json"),
                            tr("point --model at a Qwen3.5 checkpoint folder",
                               "--model 要指向一个 Qwen3.5 检查点文件夹"))
    missing = [f for f in text_shards(folder) if not (folder / f).is_file()]
    if missing:
        raise ModelNotFound(tr(f"{folder} lacks {', '.join(missing)}: the download is incomplete",
                               f"{folder} 缺少 {'、'.join(missing)}：下载不完整"),
                            tr("run it again (a finished download is never fetched twice)",
                               "再运行一次（已经下载完的文件不会重复下载）"))
    return folder
