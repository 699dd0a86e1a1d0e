"""The vision tower: patches of an image -> tokens of the text width, and where those tokens sit in the prompt.

Qwen3.5 reads pictures with a ViT stored beside the text model (`model.visual.*`, about 100 M parameters in the 0.8B):
1. patch embedding: each patch (3 channels × 2 frames × 16 × 16 pixels, see qwen/image.py) times one matrix. The
   checkpoint stores it as a Conv3d whose stride equals its kernel, so every output sees exactly one patch: it is
   the product patches (N, 1536) · W(C, 1536)ᵀ + b, with W the kernel flattened in (channel, frame, row, col) order;
2. a learned position table: a 48 × 48 grid of C-vectors (num_position_embeddings = 2304), resampled bilinearly (corners
   aligned) to each image's gh × gw patch grid and added, so any image size gets a position for every patch;
3. `depth` pre-norm blocks (LayerNorm, attention, LayerNorm, GELU MLP, all with biases). Attention is bidirectional and
   stays inside one image (one frame); it carries a 2-D rotary embedding: the first half of the rotated angles
   follow the patch's row, the second half its column (the same frequencies for both);
4. the patch merger: LayerNorm on each patch, then each 2 × 2 block of neighbours (consecutive rows, by the patch
   order of qwen/image.py) is concatenated (4C) and sent through Linear, exact GELU, Linear to the text width d.
No deepstack: unlike Qwen3-VL, Qwen3.5's tower hands only its last layer to the text model (real configs list
`deepstack_visual_indexes: []` and transformers' Qwen3_5VisionModel reads none).

In the prompt an image is `<|vision_start|>`, one `<|image_pad|>` per merged token, `<|vision_end|>`; the pads'
embeddings are replaced by the merger's outputs. Their 3-D M-RoPE positions (time, row, column) all start where the
text stopped; the text after the image continues from the image's largest position + 1, not from its token count.
Source: transformers' Qwen3_5VisionModel, Qwen3_5Model.get_rope_index and get_placeholder_mask.
"""
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open

from qwen.hub import part_files
from qwen.image import preprocess  # noqa: F401 (qwen.vision.preprocess: pixels -> patches)
from qwen.rope import rotate_half
from qwen.weights import read_header

PREFIX = "model.visual."


@dataclass
class VisionConfig:
    """config.json's vision_config (defaults: transformers' Qwen3_5VisionConfig) and the placeholder token ids."""
    depth: int = 27  # blocks; 12 in the 0.8B
    hidden_size: int = 1152  # C, the tower's width; 768 in the 0.8B
    intermediate_size: int = 4304  # MLP width; 3072 in the 0.8B
    num_heads: int = 16  # 12 in the 0.8B: head size 64
    in_channels: int = 3
    patch_size: int = 16  # P
    temporal_patch_size: int = 2  # Tp
    spatial_merge_size: int = 2  # m
    out_hidden_size: int = 3584  # the text width d; 1024 in the 0.8B
    num_position_embeddings: int = 2304  # a 48 × 48 learned grid
    hidden_act: str = "gelu_pytorch_tanh"  # the blocks' MLP; the merger uses the exact GELU
    rope_theta: float = 10000.0
    image_token_id: int = 248056  # <|image_pad|>
    vision_start_token_id: int = 248053  # <|vision_start|>
    vision_end_token_id: int = 248054  # <|vision_end|>

    @classmethod
    def load(cls, path):
        """From a checkpoint folder's config.json; a clear error when it describes no vision tower."""
        file = Path(path) / "config.json"
        raw = json.loads(file.read_text()) if file.is_file() else {}
        if not isinstance(raw.get("vision_config"), dict):
            raise ValueError(f"{path} has no vision tower (no vision_config in config.json): use a multimodal "
                             f"Qwen3.5 checkpoint such as Qwen/Qwen3.5-0.8B")
        v = raw["vision_config"]
        fields = {k: v[k] for k in cls.__dataclass_fields__ if k in v}
        ids = ("image_token_id", "vision_start_token_id", "vision_end_token_id")  # top-level keys
        fields.update({k: raw[k] for k in ids if k in raw})
        if "rope_theta" in (v.get("rope_parameters") or {}):
            fields["rope_theta"] = v["rope_parameters"]["rope_theta"]
        if fields.get("hidden_act", cls.hidden_act) not in ACT:
            raise ValueError(f"{file}: vision hidden_act {fields['hidden_act']!r} is not one of {sorted(ACT)}")
        return cls(**fields)


ACT = {"gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu}


def merge_order(x, m):
    """(h, w, …) in raster order -> (h·w, …) with each m × m block's entries consecutive (the merger's groups)."""
    h, w = x.shape[:2]
    return x.reshape(h // m, m, w // m, m, *x.shape[2:]).transpose(1, 2).reshape(h * w, *x.shape[2:])


class PatchProjection(nn.Module):
    """The checkpoint's Conv3d (kernel = stride = (Tp, P, P)) as what it computes: one matrix product per patch."""

    def __init__(self, cfg):
        super().__init__()
        C, Tp, P = cfg.hidden_size, cfg.temporal_patch_size, cfg.patch_size
        self.weight = nn.Parameter(torch.empty(C, cfg.in_channels, Tp, P, P))  # the stored Conv3d kernel
        self.bias = nn.Parameter(torch.empty(C))

    def forward(self, patches):  # (N, 3·Tp·P·P) -> (N, C)
        return F.linear(patches, self.weight.flatten(1), self.bias)  # patches · Wᵀ + b: the kernel flattened


class PatchEmbed(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.proj = PatchProjection(cfg)  # key patch_embed.proj.*

    def forward(self, patches):
        return self.proj(patches)


class VisionAttention(nn.Module):
    """Multi-head attention over the patches of one image at a time, with the 2-D rotary embedding on q and k."""

    def __init__(self, cfg):
        super().__init__()
        self.H = cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)  # [q | k | v], head-major in each
        self.proj = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, x, cos, sin, lengths):  # x (N, C); cos, sin (N, Dh); lengths: patches per image frame
        N, C = x.shape
        q, k, v = self.qkv(x).view(N, 3, self.H, C // self.H).unbind(1)  # each (N, H, Dh)
        cos, sin = cos[:, None], sin[:, None]  # (N, 1, Dh): every head turns by the same angles
        q, k = ((t.float() * cos + rotate_half(t.float()) * sin).to(x.dtype) for t in (q, k))  # rotated in fp32
        out = []
        for qi, ki, vi in zip(*(t.transpose(0, 1).split(lengths, dim=1) for t in (q, k, v))):  # (H, n, Dh) each
            # softmax(q kᵀ / √Dh) v over this image's patches only; the fused kernel never stores the n × n scores
            # (a 4096² image has 65 536 patches)
            out.append(F.scaled_dot_product_attention(qi, ki, vi).transpose(0, 1).reshape(-1, C))  # (n, C)
        return self.proj(torch.cat(out))  # (N, C)


class VisionMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.linear_fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.linear_fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.act = ACT[cfg.hidden_act]

    def forward(self, x):
        return self.linear_fc2(self.act(self.linear_fc1(x)))


class VisionBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.hidden_size, eps=1e-6)
        self.attn = VisionAttention(cfg)
        self.norm2 = nn.LayerNorm(cfg.hidden_size, eps=1e-6)
        self.mlp = VisionMLP(cfg)

    def forward(self, x, cos, sin, lengths):  # (N, C) -> (N, C)
        x = x + self.attn(self.norm1(x), cos, sin, lengths)
        return x + self.mlp(self.norm2(x))


class PatchMerger(nn.Module):
    """Norm each patch, then join each 2 × 2 block (4 consecutive rows) into one vector and map it to the text width."""

    def __init__(self, cfg):
        super().__init__()
        self.m2 = cfg.spatial_merge_size ** 2
        self.norm = nn.LayerNorm(cfg.hidden_size, eps=1e-6)  # before the merge, on each patch
        self.linear_fc1 = nn.Linear(self.m2 * cfg.hidden_size, self.m2 * cfg.hidden_size)
        self.linear_fc2 = nn.Linear(self.m2 * cfg.hidden_size, cfg.out_hidden_size)

    def forward(self, x):  # (N, C) -> (N/4, d)
        x = self.norm(x).reshape(-1, self.m2 * x.shape[-1])  # (N/4, 4C): rows 4k … 4k+3 side by side
        return self.linear_fc2(F.gelu(self.linear_fc1(x)))  # exact GELU here, not the blocks' tanh one


class VisionTower(nn.Module):
    """pixel_values (N, 3·Tp·P·P) and image_grid_thw (n, 3) -> (N/4, d) merged image tokens, images one after another.
    Attribute names are the checkpoint's, minus "model.visual."."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.patch_embed = PatchEmbed(cfg)
        self.pos_embed = nn.Embedding(cfg.num_position_embeddings, cfg.hidden_size)  # a side × side grid
        self.side = int(cfg.num_position_embeddings ** 0.5)
        self.blocks = nn.ModuleList(VisionBlock(cfg) for _ in range(cfg.depth))
        self.merger = PatchMerger(cfg)

    def positions(self, h, w):
        """The learned grid resampled to h × w patches (bilinear, corners aligned), in patch order: (h·w, C) fp32."""
        grid = self.pos_embed.weight.float().T.reshape(1, -1, self.side, self.side)  # (1, C, side, side)
        grid = F.interpolate(grid, size=(h, w), mode="bilinear", align_corners=True)  # (1, C, h, w)
        return merge_order(grid[0].permute(1, 2, 0), self.cfg.spatial_merge_size)  # (h·w, C)

    def rotary(self, h, w, device):
        """cos, sin (h·w, Dh) of the 2-D rotary embedding: Dh/4 frequencies, angles [row·f, col·f] twice, fp32."""
        Dh = self.cfg.hidden_size // self.cfg.num_heads
        f = 1.0 / self.cfg.rope_theta ** (torch.arange(0, Dh // 2, 2, device=device).float() / (Dh // 2))  # (Dh/4,)
        rows, cols = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
        rc = merge_order(torch.stack((rows, cols), -1), self.cfg.spatial_merge_size).float()  # (h·w, 2) patch order
        angle = torch.cat((rc[:, :1] * f, rc[:, 1:] * f), -1)  # (h·w, Dh/2): row angles, then column angles
        angle = torch.cat((angle, angle), -1)  # (h·w, Dh): dims i and i + Dh/2 share an angle (rotate half)
        return angle.cos(), angle.sin()

    def forward(self, pixel_values, image_grid_thw):
        c = self.cfg
        width = c.in_channels * c.temporal_patch_size * c.patch_size ** 2
        grids = [tuple(g) for g in image_grid_thw.tolist()]
        N = sum(t * h * w for t, h, w in grids)
        if pixel_values.shape != (N, width):
            raise ValueError(f"pixel_values must be (patches of image_grid_thw, {width}) = ({N}, {width}), got "
                             f"{tuple(pixel_values.shape)}: pass preprocess()'s outputs together")
        x = self.patch_embed(pixel_values.to(self.pos_embed.weight.dtype))  # (N, C)
        pos, cos, sin, lengths = [], [], [], []
        for t, h, w in grids:  # a video's t frames share the image grid; each frame attends on its own
            cs = self.rotary(h, w, x.device)
            pos.append(self.positions(h, w).repeat(t, 1))
            cos.append(cs[0].repeat(t, 1))
            sin.append(cs[1].repeat(t, 1))
            lengths += [h * w] * t
        x = x + torch.cat(pos).to(x.dtype)  # (N, C)
        cos, sin = torch.cat(cos), torch.cat(sin)  # (N, Dh) each
        for block in self.blocks:
            x = block(x, cos, sin, lengths)
        return self.merger(x)  # (N/4, d)


def vision_files(path):
    """{name without "model.visual.": (file, key)} for the checkpoint folder at `path`, from the headers of the files
    that hold the tower only (one the folder lacks is a clear error: qwen/hub.py part_files)."""
    return {key[len(PREFIX):]: (file, key) for file in part_files(path, PREFIX, "the vision tower")
            for key in read_header(file) if key.startswith(PREFIX)}


def load_vision(path, dtype=None, device=None):
    """The vision tower of checkpoint folder `path`, in `dtype` (default: as stored) on `device`. Built on the meta
    device, then each parameter becomes its tensor read from the file: only model.visual.* is read."""
    cfg = VisionConfig.load(path)
    where = vision_files(path)
    if not where:
        raise ValueError(f"{path} has no vision tower (no model.visual.* tensors): use a multimodal Qwen3.5 "
                         f"checkpoint such as Qwen/Qwen3.5-0.8B")
    with torch.device("meta"):
        tower = VisionTower(cfg)
    params = dict(tower.named_parameters())
    missing, unexpected = sorted(set(params) - set(where)), sorted(set(where) - set(params))
    if missing or unexpected:
        raise ValueError(f"{path}: model.visual.* does not match its vision_config (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]}): download the checkpoint again")
    handles = {}
    for name, p in params.items():
        file, key = where[name]
        if file not in handles:
            handles[file] = safe_open(file, framework="pt")
        t = handles[file].get_tensor(key)
        if t.shape != p.shape:
            raise ValueError(f"{path}: {key} has shape {tuple(t.shape)}, its vision_config implies {tuple(p.shape)}")
        module, _, leaf = name.rpartition(".")
        setattr(tower.get_submodule(module), leaf, nn.Parameter(t.to(device=device, dtype=dtype or t.dtype),
                                                                  requires_grad=False))
    return tower.eval()


def tokens_per_image(image_grid_thw, merge_size=2):
    """Merged tokens of each image: t·h·w / m²."""
    return [t * h * w // merge_size ** 2 for t, h, w in image_grid_thw.tolist()]


def expand_image_tokens(ids, image_grid_thw, image_token_id=248056, merge_size=2):
    """A rendered prompt's ids (a list, one `<|image_pad|>` per image) -> the same with each pad repeated as many
    times as its image has merged tokens. Ids: the checkpoint's (VisionConfig.image_token_id, spatial_merge_size)."""
    counts = tokens_per_image(image_grid_thw, merge_size)
    pads = [i for i, t in enumerate(ids) if t == image_token_id]
    if len(pads) != len(counts):
        raise ValueError(f"the prompt has {len(pads)} <|image_pad|> tokens for {len(counts)} images: render one pad "
                         f"per image (chat render writes <|vision_start|><|image_pad|><|vision_end|>)")
    out, start = [], 0
    for i, n in zip(pads, counts):
        out += list(ids[start:i]) + [image_token_id] * n
        start = i + 1
    return out + list(ids[start:])


def position_ids(input_ids, image_grid_thw=None, mask=None, image_token_id=248056, merge_size=2):
    """The (t, h, w) M-RoPE positions (3, B, T) of a prompt whose ids hold one <|image_pad|> per merged token.
    Text tokens: p on all three rows, p counting on from where the last text or image stopped. An image of gh × gw
    patches starting at p: rows p + (0, …), p + i, p + j for merged token (i, j), row-major; the text after it
    continues from p + max(gh, gw)/m, its largest position + 1. Images are taken from image_grid_thw in order,
    batch row by batch row. With a (B, T) mask (left padding), pads are skipped and get position 0."""
    B, T = input_ids.shape
    grids = iter([] if image_grid_thw is None else image_grid_thw.tolist())
    out = torch.zeros(3, B, T, dtype=torch.long, device=input_ids.device)
    for b in range(B):
        keep = torch.ones(T, dtype=torch.bool) if mask is None else mask[b].bool().cpu()
        ids = input_ids[b].cpu()[keep].tolist()
        rows, p, i = [], 0, 0
        while i < len(ids):
            if ids[i] != image_token_id:  # a run of text: the same position on the three axes
                j = i
                while j < len(ids) and ids[j] != image_token_id:
                    j += 1
                rows.append(torch.arange(p, p + j - i).expand(3, -1))  # (3, j − i)
                p, i = p + j - i, j
                continue
            t, h, w = next(grids, (0, 0, 0))
            h, w = h // merge_size, w // merge_size  # merged tokens per column and per row
            n = t * h * w
            if n == 0 or ids[i:i + n] != [image_token_id] * n:
                raise ValueError(f"batch row {b}: the <|image_pad|> tokens at {i} do not match image_grid_thw "
                                 f"(expand each image's pad with expand_image_tokens first)")
            tt, hh, ww = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
            rows.append(torch.stack((tt, hh, ww)).reshape(3, n) + p)  # (3, n): time, row, column
            p, i = p + max(h, w), i + n  # text resumes after the image's largest position
        if rows:
            out[:, b, keep.to(out.device)] = torch.cat(rows, 1).to(out.device)
    return out


def rope_delta(positions, mask=None):
    """(B, 1): how far each row's next position is ahead of its token count (max position + 1 − real tokens). The
    tokens generated after the prompt take position (count of real tokens so far) + delta on all three rows."""
    n = positions.shape[-1] if mask is None else mask.long().sum(-1)
    return (positions.amax(dim=(0, 2)) + 1 - torch.as_tensor(n, device=positions.device)).view(-1, 1)


def place_images(embeds, input_ids, image_embeds, image_token_id=248056):
    """embeds (B, T, d) with the rows at <|image_pad|> positions replaced by image_embeds (n, d), in reading order
    (batch row by batch row), as transformers' masked_scatter. The count must match exactly."""
    pads = input_ids == image_token_id  # (B, T)
    if int(pads.sum()) != image_embeds.shape[0]:
        raise ValueError(f"the prompt has {int(pads.sum())} <|image_pad|> tokens but the images give "
                         f"{image_embeds.shape[0]} merged tokens: expand the pads with expand_image_tokens")
    out = embeds.clone()
    out[pads] = image_embeds.to(embeds.dtype)
    return out
