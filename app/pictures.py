"""The chat's pictures: /image attaches one to the next message, lists those pending or drops them, and says what
each costs; on the CPU, a picture the vision tower should take seconds to read is announced with the time
(qwen/vision_cost.py) and a smaller pixel budget that would be quick (--max-pixels N, for the chat or one picture).
The pictures themselves are kept by the conversation (qwen/session.py); this module reads the command and prints."""
import dataclasses
import shlex

import torch

from qwen.image import ImageSettings, smart_resize
from qwen.lang import tr
from qwen.mrope import tokens_per_image
from qwen.session import Session
from qwen.vision import load_vision
from qwen.vision_cost import rates, tower_cost

SLOW_TOWER_S = 3  # warn before an image the tower should take longer than this on the CPU
RATES = {}  # (device, dtype) -> the tower's rates, measured on the first image (qwen.vision_cost.rates)


def pending_text(chat: Session) -> str:
    """/image alone: each picture pending for the next message, and their tokens together."""
    if not chat.pending:
        return tr("(no pictures pending: /image PATH attaches one to your next message)",
                  "（没有待发送的图片：/image PATH 可以给你的下一条消息附一张）")
    cfg = chat.model.visual.cfg  # loaded with the first picture
    lines, total = [], 0
    for i, p in enumerate(chat.pending, 1):
        tokens = tokens_per_image(p["image_grid_thw"], cfg.spatial_merge_size)[0]
        h, w = (int(n) * cfg.patch_size for n in p["image_grid_thw"][0, 1:])
        total += tokens
        lines.append(tr(f"  {i}. {p['path']}: {p['size'][0]}×{p['size'][1]}, read as {w}×{h}: {tokens} image tokens",
                        f"  {i}. {p['path']}：{p['size'][0]}×{p['size'][1]}，按 {w}×{h} 读入：{tokens} 个图像 token"))
    n = len(chat.pending)
    head = (tr(f"pending for your next message: {n} pictures, {total} image tokens",
               f"下一条消息待发送：{n} 张图片，共 {total} 个图像 token") if n > 1 else
            tr(f"pending for your next message: {n} picture, {total} image tokens",
               f"下一条消息待发送：{n} 张图片，共 {total} 个图像 token"))
    return "\n".join([head, *lines, tr("(/image drop drops them)", "（/image drop 可以丢弃待发送的图片）")])


def image_args(arg: str) -> tuple[str, int | None]:
    """/image's argument -> (path, --max-pixels or None). A path may come quoted or with escaped spaces (as a
    terminal writes a file dropped on it), or unquoted with spaces."""
    try:
        words = shlex.split(arg)
    except ValueError:
        return arg, None
    budget = None
    if "--max-pixels" in words:
        at = words.index("--max-pixels")
        if at + 1 >= len(words) or not words[at + 1].isdigit():
            raise ValueError(tr("--max-pixels takes a whole number of pixels, e.g. /image photo.jpg --max-pixels "
                                "1000000",
                                "--max-pixels 后面要跟一个整数像素数，例如 /image photo.jpg --max-pixels 1000000"))
        budget, words = int(words[at + 1]), words[:at] + words[at + 2:]
        arg = " ".join(words)
    if not words:
        raise ValueError(tr("no file named: /image PATH --max-pixels N",
                            "没有给出文件名，用法：/image PATH --max-pixels N"))
    return (words[0] if len(words) == 1 else arg), budget


def budget_settings(s: ImageSettings, budget: int | None) -> ImageSettings:
    """The checkpoint's settings with the pixel budget lowered to `budget` (None: as they are)."""
    if budget is None or budget == s.max_pixels:
        return s
    if budget < s.min_pixels:
        raise ValueError(tr(f"--max-pixels {budget:,} is below the smallest picture the processor makes "
                            f"({s.min_pixels:,} pixels, 64 tokens): give at least {s.min_pixels:,}",
                            f"--max-pixels {budget:,} 小于图像处理器能产生的最小图片（{s.min_pixels:,} 像素，"
                            f"64 个 token）：至少要设为 {s.min_pixels:,}"))
    if budget > s.max_pixels:
        raise ValueError(tr(f"--max-pixels {budget:,} is above the checkpoint's budget of {s.max_pixels:,} pixels: "
                            "it can only be lowered",
                            f"--max-pixels {budget:,} 超过了检查点的预算 {s.max_pixels:,} 像素：预算只能调低"))
    return dataclasses.replace(s, max_pixels=budget)


def flop(x: float) -> str:
    return f"{x / 1e12:.2f} TFLOP" if x >= 1e12 else f"{x / 1e9:.1f} GFLOP"


def tower_warning(chat: Session, size: tuple[int, int], grid: torch.Tensor, s: ImageSettings) -> str | None:
    """On the CPU, before an image of `size` (w, h), read as `grid`, that the tower should take more than
    SLOW_TOWER_S seconds to read: how long, from what, and a smaller budget that would be quick. None on other
    devices and for quicker images."""
    tower = chat.model.visual
    p = next(tower.parameters())
    if p.device.type != "cpu":
        return None
    if (p.device, p.dtype) not in RATES:
        RATES[p.device, p.dtype] = rates(tower.cfg, p.dtype, p.device)
    speed = RATES[p.device, p.dtype]
    cost = tower_cost(tower.cfg, grid)
    if cost.seconds(speed) < SLOW_TOWER_S:
        return None
    hint = "/image PATH --max-pixels N"
    for budget in (4_000_000, 2_000_000, 1_000_000, 500_000, 250_000, s.min_pixels):  # the largest that is quick
        if budget < s.max_pixels:
            h, w = smart_resize(size[1], size[0], dataclasses.replace(s, max_pixels=budget))
            smaller = torch.tensor([[1, h // s.patch_size, w // s.patch_size]])
            if tower_cost(tower.cfg, smaller).seconds(speed) < SLOW_TOWER_S or budget == s.min_pixels:
                tokens = tokens_per_image(smaller, s.merge_size)[0]
                seconds = tower_cost(tower.cfg, smaller).seconds(speed)
                hint = tr(f"/image PATH --max-pixels {budget} reads it as {w}×{h}, {tokens} tokens, in about "
                          f"{seconds:.1f} s",
                          f"/image PATH --max-pixels {budget} 会按 {w}×{h} 读入，{tokens} 个 token，"
                          f"约 {seconds:.1f} 秒")
                break
    seconds, linear, attention = cost.seconds(speed), flop(cost.linear_flop), flop(cost.attention_flop)
    fast, slow = speed[0] / 1e9, speed[1] / 1e9
    return tr(f"[warning: on the CPU the vision tower will need at least about {seconds:.0f} s for this picture, when "
              f"your next message is sent: its {cost.patches:,} patches take {linear} in the linear layers and "
              f"{attention} in attention (which grows as the square of the patches), at the {fast:.0f} and "
              f"{slow:.0f} GFLOP/s this CPU just ran the tower's shapes at (norms and copies come on top). A smaller "
              f"pixel budget is quicker: /image drop, then {hint}; or start the chat with --max-pixels N]",
              f"[警告：这张图片要等你发送下一条消息时才由视觉塔读入，在 CPU 上至少要约 {seconds:.0f} 秒："
              f"它的 {cost.patches:,} 个 patch 在线性层里要算 {linear}，在注意力里要算 {attention}"
              f"（注意力的计算量随 patch 数的平方增长）；这是按这台 CPU 刚才跑视觉塔各个形状测得的 "
              f"{fast:.0f} 和 {slow:.0f} GFLOP/s 估算的，归一化和拷贝还不算在内。"
              f"调小像素预算会更快：先 /image drop，再 {hint}；或者启动聊天时加上 --max-pixels N]")


def image_command(chat: Session, arg: str, budget: int | None = None) -> None:
    """/image PATH [--max-pixels N]: attach the picture to the next message and say what it costs; /image alone
    lists the pending pictures, /image drop drops them; one line when it cannot be. The vision tower of the chat's
    checkpoint (chat.checkpoint) is loaded here, on the first image: the one place it is. budget: the chat's
    --max-pixels (None: the checkpoint's)."""
    if chat.draft is not None:
        print(tr("/image: pictures cannot go with --speculative (this chat's speculative decoding takes text only): "
                 "restart the chat without --speculative to attach one",
                 "/image：用了 --speculative 就不能附图片（这个聊天程序的投机解码只接受文本）："
                 "要附图，去掉 --speculative 重新启动聊天"))
        return
    if not arg:
        print(pending_text(chat))
        return
    if arg == "drop":
        n = chat.drop_pending()
        if n == 1:
            print(tr(f"({n} picture dropped; none pending)", f"（已丢弃 {n} 张图片，现在没有待发送的图片）"))
        else:
            print(tr(f"({n} pictures dropped; none pending)", f"（已丢弃 {n} 张图片，现在没有待发送的图片）") if n else
                  tr("(no pictures pending)", "（没有待发送的图片）"))
        return
    try:
        path, one = image_args(arg)
        if chat.model.visual is None:
            p = next(chat.model.parameters())
            chat.model.visual = load_vision(chat.checkpoint, p.dtype, p.device)  # one without a tower says so here
        # the checkpoint's settings (or the values Qwen3.5 publishes), within the budget
        s = budget_settings(chat.checkpoint.image, one if one is not None else budget)
        (w0, h0), grid = chat.attach(path, s)
    except (OSError, ValueError) as e:
        print(f"/image{tr(': ', '：')}{e}")
        return
    h, w = (int(n) * s.patch_size for n in grid[0, 1:])
    tokens = tokens_per_image(grid, s.merge_size)[0]
    if not s.min_pixels <= w0 * h0 <= s.max_pixels:
        how = tr(f"; resized from {w0}×{h0} into the budget of {s.min_pixels:,} to {s.max_pixels:,} pixels",
                 f"；已从 {w0}×{h0} 缩放到 {s.min_pixels:,} 至 {s.max_pixels:,} 像素的预算内")
    else:
        how = tr(f"; resized from {w0}×{h0} to multiples of {s.factor}",
                 f"；已从 {w0}×{h0} 缩放到边长为 {s.factor} 的倍数") if (w, h) != (w0, h0) else ""
    n = len(chat.pending)
    total = sum(tokens_per_image(p["image_grid_thw"], s.merge_size)[0] for p in chat.pending)
    pending = tr("it goes with your next message", "它随你的下一条消息发送") if n == 1 else \
        tr(f"{n} pictures pending for your next message, {total} image tokens (/image lists them, /image drop drops "
           "them)",
           f"下一条消息有 {n} 张待发送的图片，共 {total} 个图像 token（/image 列出它们，/image drop 丢弃它们）")
    print(tr(f"[image {w}×{h} → {tokens} tokens{how}; {pending}]",
             f"[图片 {w}×{h} → {tokens} 个 token{how}；{pending}]"))
    warning = tower_warning(chat, (w0, h0), grid, s)
    if warning:
        print(warning)
