"""A checkpoint, opened once: the folder and everything its small files say, as one value the loaders take.

A checkpoint folder is config.json, generation_config.json, the chat template, the image settings and the weight
files. Every part of the course needs some of what the small files say: the text model its `Config`, the vision
tower its `VisionConfig`, the chat its stop ids and template, the image reader the pixel budget, the loader whether
the head is tied. Read where each was needed, config.json would be parsed again by every loader, and each reader
would have to know its layout (multimodal or flat) and decide the tied head for itself. So the folder is opened
once, here: config.json is read once (qwen/config.py knows its layout), the head is decided once, and the result
is a frozen `Checkpoint` that `load_model`, `load_fast`, `load_mtp`, `load_vision`, `Weights` and the chat's
`Session` take. Each of them also takes a folder, for convenience: it is opened by `open_checkpoint`, the same one
way. The weights themselves are not read here: qwen/weights.py reads a tensor when it is asked for.

    checkpoint = open_checkpoint("data/Qwen3.5-0.8B")
    model = load_model(checkpoint)                    # the text model (qwen/model.py)
    model.visual = load_vision(checkpoint)            # the vision tower, when a chapter needs it (qwen/vision.py)
"""
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from safetensors import SafetensorError, safe_open

from qwen import config as configs
from qwen.config import END_OF_TEXT, IM_END, Config, VisionConfig, config_file, eos_ids, read_config
from qwen.image import ImageSettings
from qwen.lang import tr
from qwen.synthetic import MARKER

HEAD = "lm_head.weight"  # an untied head's tensor: the same key in the multimodal and the flat layout


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint folder says, read once (open_checkpoint). config.tie_word_embeddings is the head as decided:
    tied when the config says so and no lm_head.weight is stored (a stored head wins, as in transformers)."""
    folder: Path
    config: Config  # the text model's numbers
    vision: VisionConfig | None  # the vision tower's, or None for a text-only checkpoint
    stop: frozenset[int]  # <|im_end|>, <|endoftext|> and every eos id the config and generation config name
    template: str | None  # the checkpoint's own jinja chat template, if it ships one (qwen/chat.py)
    synthetic: bool  # the course's random-weight checkpoint (qwen/synthetic.py)

    @property
    def tied(self) -> bool:
        """Is the head the embedding table (one (V, d) table read in and out)?"""
        return self.config.tie_word_embeddings

    @cached_property
    def image(self) -> ImageSettings:
        """How a picture is cut into patches for the tower (qwen/image.py): preprocessor_config.json, read when a
        picture first needs it, so that a broken one stops pictures, not text."""
        return ImageSettings.load(self.folder, self.vision)


def open_checkpoint(checkpoint: Checkpoint | str | Path) -> Checkpoint:
    """The checkpoint in folder `checkpoint`, opened: config.json read once, the head decided once. A Checkpoint is
    returned as it is, so every loader can take either."""
    if isinstance(checkpoint, Checkpoint):
        return checkpoint
    folder = Path(checkpoint).expanduser()
    raw = read_config(folder)  # the one read of config.json
    config = Config.from_dict(raw, config_file(folder))  # a clear error for a folder that is not a Qwen3.5 checkpoint
    vision = VisionConfig.from_dict(raw, config_file(folder))
    config = replace(config, tie_word_embeddings=config.tie_word_embeddings and not stores_head(folder))
    generation = folder / "generation_config.json"
    generated = configs.read_json(generation) if generation.is_file() else {}
    stop = {IM_END, END_OF_TEXT} | eos_ids(raw) | eos_ids(generated if isinstance(generated, dict) else {})
    return Checkpoint(folder=folder, config=config, vision=vision, stop=frozenset(stop),
                      template=checkpoint_template(folder), synthetic=MARKER in raw)


def stores_head(folder: Path) -> bool:
    """Does the checkpoint store an lm_head.weight of its own? Its index says; a checkpoint without one (a single
    model.safetensors) says in the file's header, which safetensors reads (no tensor is)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return HEAD in configs.weight_map(index)
    for file in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(file, framework="pt") as f:
                if HEAD in f.keys():
                    return True
        except SafetensorError as e:
            raise ValueError(tr(f"{file} is not a readable safetensors file ({e}): delete it and download it again",
                                f"{file} 不是可读的 safetensors 文件（{e}）：删掉它重新下载")) from None
    return False


def checkpoint_template(folder: Path) -> str | None:
    """The checkpoint's own jinja chat template (chat_template.jinja or tokenizer_config.json), or None."""
    file = folder / "chat_template.jinja"
    if file.is_file():
        return file.read_text(encoding="utf-8")
    config = folder / "tokenizer_config.json"
    if config.is_file():
        raw = configs.read_json(config)
        template = raw.get("chat_template") if isinstance(raw, dict) else None
        if isinstance(template, str):
            return template
    return None
