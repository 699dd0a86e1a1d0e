"""The vision tower: patches of an image -> tokens of the text width.

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
The tower's tokens take the place of the image's placeholders in the prompt: qwen/mrope.py.
Source: transformers' Qwen3_5VisionModel.
"""
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.config import DEFAULT_MODEL, VisionConfig, dtype_of
from qwen.lang import tr
from qwen.rope import rotate_half
from qwen.weights import Weights, fill

ACT = {"gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu}


def merge_order(x: torch.Tensor, m: int) -> torch.Tensor:
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
        for qi, ki, vi in zip(*(t.transpose(0, 1)[None].split(lengths, dim=2) for t in (q, k, v))):  # (1, H, n, Dh)
            # softmax(q kᵀ / √Dh) v over this image's patches only. torch's fused kernels (flash attention on the
            # CPU; flash or memory-efficient on CUDA) walk the keys in blocks and never hold the n × n scores, but
            # they take only 4-D (batch, heads, n, Dh) inputs: given 3-D (H, n, Dh), torch falls back to the plain
            # kernel, which stores them (a 4096² image: 65,536 patches, 16 GiB of fp32 scores per head)
            o = F.scaled_dot_product_attention(qi, ki, vi)  # (1, H, n, Dh)
            out.append(o[0].transpose(0, 1).reshape(-1, C))  # (n, C): the heads side by side again
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

    def __init__(self, cfg: VisionConfig) -> None:
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

    def forward(self, pixel_values: torch.Tensor, image_grid_thw: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        width = c.in_channels * c.temporal_patch_size * c.patch_size ** 2
        grids = [tuple(g) for g in image_grid_thw.tolist()]
        N = sum(t * h * w for t, h, w in grids)
        if pixel_values.shape != (N, width):
            raise ValueError(f"pixel_values must be (patches of image_grid_thw, {width}) = ({N}, {width}), got "
                             f"{tuple(pixel_values.shape)}: pass preprocess()'s outputs together")
        x = self.patch_embed(pixel_values.to(self.pos_embed.weight.dtype))  # (N, C)
        pos, coss, sins, lengths = [], [], [], []
        for t, h, w in grids:  # a video's t frames share the image grid; each frame attends on its own
            cs = self.rotary(h, w, x.device)
            pos.append(self.positions(h, w).repeat(t, 1))
            coss.append(cs[0].repeat(t, 1))
            sins.append(cs[1].repeat(t, 1))
            lengths += [h * w] * t
        x = x + torch.cat(pos).to(x.dtype)  # (N, C)
        cos, sin = torch.cat(coss), torch.cat(sins)  # (N, Dh) each
        for block in self.blocks:
            x = block(x, cos, sin, lengths)
        return self.merger(x)  # (N/4, d)


def load_vision(checkpoint: Checkpoint | str | Path, dtype: str | torch.dtype | None = None,
                device: str | torch.device | None = None) -> VisionTower:
    """The vision tower of `checkpoint` (opened once, qwen/checkpoint.py, or its folder, opened here), in `dtype`
    (default: as stored) on `device`. Built on the meta device, then filled (qwen/weights.py fill): only
    model.visual.* is read."""
    dtype = dtype_of(dtype)  # an unknown name is refused before any file is opened
    checkpoint = open_checkpoint(checkpoint)
    if checkpoint.vision is None:
        raise ValueError(tr(f"{checkpoint.folder} has no vision tower (no vision_config in config.json): use a "
                            f"multimodal Qwen3.5 checkpoint such as {DEFAULT_MODEL}",
                            f"{checkpoint.folder} 没有视觉塔（config.json 里没有 vision_config）：请用多模态的 Qwen3.5 "
                            f"检查点，例如 {DEFAULT_MODEL}"))
    W = Weights(checkpoint, "vision")
    if not len(W):
        raise ValueError(tr(f"{checkpoint.folder} has no vision tower (no model.visual.* tensors): use a multimodal "
                            f"Qwen3.5 checkpoint such as {DEFAULT_MODEL}",
                            f"{checkpoint.folder} 没有视觉塔（没有 model.visual.* 张量）：请用多模态的 Qwen3.5 检查点，"
                            f"例如 {DEFAULT_MODEL}"))
    with torch.device("meta"):
        tower = VisionTower(checkpoint.vision)
    return fill(tower, W, dtype=dtype, device=device).eval()
