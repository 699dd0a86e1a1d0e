"""From a picture to patches: what the vision tower reads.

The tower sees an image as a grid of 16 × 16-pixel patches and its merger joins each 2 × 2 block of patches into one
text token, so both sides of the image must be multiples of 16 · 2 = 32. `smart_resize` picks the nearest such size
that keeps the aspect ratio and lands inside a pixel budget (Qwen3.5 publishes 256² to 4096² pixels: 64 to 16 384
tokens). Pixels are scaled to [0, 1] and normalised with the checkpoint's mean and std. A still image is repeated to
the temporal patch size (2): the same patch embedding reads videos two frames at a time. Finally the patches are
listed so that the four patches of each 2 × 2 block are consecutive: the merger then only has to join rows 4k … 4k+3.
Each patch is flattened in the order (channel, frame, row, column), the order of the patch embedding's weight.

Source: transformers' image processor for model_type qwen3_5. AutoImageProcessor picks its torchvision class,
Qwen2VLImageProcessor, whenever torchvision is installed (the preprocessor_config.json published with Qwen3.5, as public
copies give it, names it by its old name, Qwen2VLImageProcessorFast), and falls back to the PIL class,
Qwen2VLImageProcessorPil, without torchvision. The two share the resize rule and the patch order. This module follows
the PIL class, and the tests hold it to that one bit for bit: PyPI's torchvision does not work beside the CPU build of
torch the tests run on. The settings come from the checkpoint's preprocessor_config.json; without one, the values
Qwen3.5 publishes there, except the three the tower is built for (patch size, frames per patch, merge size): those come
from config.json's vision_config, and a preprocessor_config.json that disagrees with it is one clear error.
"""
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from qwen.config import VisionConfig
from qwen.lang import tr


@dataclass
class ImageSettings:
    """preprocessor_config.json. Defaults: the values published with Qwen3.5 (e.g. Qwen/Qwen3.5-2B-Base, third-party
    copies: not verified here). transformers' class defaults (patch 14, CLIP mean and std) belong to Qwen2-VL."""
    min_pixels: int = 256 * 256  # "size": {"shortest_edge"}: 64 tokens
    max_pixels: int = 4096 * 4096  # "size": {"longest_edge"}: 16 384 tokens
    patch_size: int = 16  # P: pixels per patch side
    temporal_patch_size: int = 2  # frames per patch; a still image is repeated
    merge_size: int = 2  # m: the merger joins m × m patches into one token
    image_mean: tuple = (0.5, 0.5, 0.5)
    image_std: tuple = (0.5, 0.5, 0.5)
    rescale_factor: float = 1 / 255

    @classmethod
    def load(cls, folder: str | Path, vision: VisionConfig | None) -> "ImageSettings":
        """The settings of checkpoint folder `folder` (qwen.checkpoint.open_checkpoint reads them, once): its
        preprocessor_config.json where it has one, else the values Qwen3.5 publishes; patch, frames per patch and
        merge size as its vision config `vision` has them in either case (None: a checkpoint without a tower)."""
        tower = {} if vision is None else {ours: getattr(vision, theirs) for ours, theirs in TOWER_KEYS.items()}
        file = Path(folder) / "preprocessor_config.json"
        if not file.is_file():
            return cls(**tower)
        try:
            raw = json.loads(file.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(tr(f"{file} is not valid JSON ({e}): download it again, or delete it to use the values "
                                f"Qwen3.5 publishes",
                                f"{file} 不是有效的 JSON（{e}）：请重新下载，"
                                f"或者删掉它，改用 Qwen3.5 公布的默认值")) from None
        size = raw.get("size") or {}
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        known.setdefault("min_pixels", size.get("shortest_edge", cls.min_pixels))
        known.setdefault("max_pixels", size.get("longest_edge", cls.max_pixels))
        for name, value in tower.items():
            if known.setdefault(name, value) != value:
                raise ValueError(tr(f"{file} has {name} {known[name]}, but config.json's vision_config has "
                                    f"{TOWER_KEYS[name]} {value}: they belong to different checkpoints; download "
                                    f"preprocessor_config.json again, or delete it to use the vision config's",
                                    f"{file} 里 {name} 是 {known[name]}，但 config.json 的 vision_config 里 "
                                    f"{TOWER_KEYS[name]} 是 {value}：两者来自不同的检查点；重新下载 "
                                    f"preprocessor_config.json，或者删掉它，改用 vision_config 里的值"))
        return cls(**known)

    @property
    def factor(self) -> int:  # both sides of the resized image are multiples of this: 16 · 2 = 32
        return self.patch_size * self.merge_size


# what the tower is built for: ImageSettings' name -> vision_config's
TOWER_KEYS = {"patch_size": "patch_size", "temporal_patch_size": "temporal_patch_size",
              "merge_size": "spatial_merge_size"}


def load_image(file: str | Path) -> Image.Image:
    """Open an image file with Pillow; one clear line when it is not an image."""
    try:
        image = Image.open(file)
        image.load()
    except FileNotFoundError:
        raise FileNotFoundError(tr(f"no image file at {file}", f"{file} 处没有图片文件")) from None
    except UnidentifiedImageError:
        raise ValueError(tr(f"{file} is not an image Pillow can read: use a PNG, JPEG, WebP, GIF or BMP file",
                            f"{file} 不是 Pillow 能读的图片：请用 PNG、JPEG、WebP、GIF 或 BMP 文件")) from None
    except Image.DecompressionBombError as e:
        raise ValueError(tr(f"{file} is too large to open safely ({e}); downscale it first",
                            f"{file} 太大，无法安全打开（{e}）；请先缩小")) from None
    return image


def smart_resize(height: int, width: int, s: ImageSettings) -> tuple[int, int]:
    """The (height, width) the image is resized to: multiples of s.factor, nearest to the original, inside the pixel
    budget. Python's round (halves to even) as in the reference; the budget scales both sides by the same beta."""
    f = s.factor
    if max(height, width) > 200 * min(height, width):
        raise ValueError(tr(f"image {width}×{height} is too thin: the processor accepts aspect ratios up to 200:1 "
                            f"(any size is then resized into {s.min_pixels:,} to {s.max_pixels:,} pixels); crop it",
                            f"图片 {width}×{height} 太细长：图像处理器只接受长宽比不超过 200:1 的图片"
                            f"（尺寸不限，之后会缩放到 {s.min_pixels:,} 至 {s.max_pixels:,} 像素）；请先裁剪"))
    h, w = round(height / f) * f, round(width / f) * f
    if h * w > s.max_pixels:  # too many pixels: shrink, rounding down
        beta = math.sqrt(height * width / s.max_pixels)
        h, w = max(f, math.floor(height / beta / f) * f), max(f, math.floor(width / beta / f) * f)
    elif h * w < s.min_pixels:  # too few: enlarge, rounding up
        beta = math.sqrt(s.min_pixels / (height * width))
        h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
    if not s.min_pixels <= h * w <= s.max_pixels:  # only a very thin image under a small budget gets here
        raise ValueError(tr(f"image {width}×{height} cannot fit the pixel budget of {s.min_pixels:,} to "
                            f"{s.max_pixels:,} pixels in multiples of {f}: crop it to a less elongated shape",
                            f"图片 {width}×{height} 的边长取 {f} 的倍数后，无法落进 {s.min_pixels:,} 至 "
                            f"{s.max_pixels:,} 像素的预算：请裁剪成不那么细长的形状"))
    return h, w


def to_rgb(image: Image.Image) -> Image.Image:
    """Pillow image -> RGB; transparent pixels are laid on white, as the reference processor does."""
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        image = Image.alpha_composite(Image.new("RGBA", image.size, (255, 255, 255, 255)), image.convert("RGBA"))
    return image.convert("RGB")


def patchify(x: torch.Tensor, s: ImageSettings) -> tuple[torch.Tensor, int, int]:
    """x (3, H, W) normalised pixels -> (gh·gw, 3·Tp·P·P) patches, each 2 × 2 merge block's four patches in a row."""
    C, H, W = x.shape
    P, m, Tp = s.patch_size, s.merge_size, s.temporal_patch_size
    gh, gw = H // P, W // P  # the patch grid
    x = x.reshape(C, gh // m, m, P, gw // m, m, P)  # (C, block row, row in block, y, block col, col in block, x)
    x = x.permute(1, 4, 2, 5, 0, 3, 6)  # (gh/m, gw/m, m, m, C, P, P): blocks, then the patches inside a block
    x = x[:, :, :, :, :, None].expand(-1, -1, -1, -1, -1, Tp, -1, -1)  # (…, C, Tp, P, P): the image Tp times
    return x.reshape(gh * gw, C * Tp * P * P), gh, gw


def preprocess(image: Image.Image | str | Path,
               settings: ImageSettings | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A Pillow image (or an image file) -> pixel_values (N, 3·2·16·16) float32 and image_grid_thw (1, 3) = [[1, gh,
    gw]], N = gh·gw patches, gh·gw/4 tokens. Settings: `settings` (a checkpoint's: checkpoint.image), else Qwen3.5's."""
    if settings is not None and not isinstance(settings, ImageSettings):
        raise TypeError(tr(f"settings must be an ImageSettings (a checkpoint's: checkpoint.image), got "
                           f"{type(settings).__name__}",
                           f"settings 必须是 ImageSettings（用检查点自己的：checkpoint.image），收到的是 "
                           f"{type(settings).__name__}"))
    s = settings or ImageSettings()
    if not isinstance(image, Image.Image):
        image = load_image(image)
    image = to_rgb(image)
    h, w = smart_resize(image.height, image.width, s)
    image = image.resize((w, h), resample=Image.Resampling.BICUBIC)  # on the 8-bit image, as the reference
    x = torch.from_numpy(np.array(image)).permute(2, 0, 1)  # (3, h, w) uint8
    x = (x.double() * s.rescale_factor).float()  # [0, 1]: scaled in float64, stored in float32, as the reference
    mean = torch.tensor(s.image_mean, dtype=torch.float32)[:, None, None]
    std = torch.tensor(s.image_std, dtype=torch.float32)[:, None, None]
    x = (x - mean) / std  # (3, h, w)
    patches, gh, gw = patchify(x, s)
    return patches, torch.tensor([[1, gh, gw]])
