"""Chapter 11's figures: the draft–verify loop as it ran, the tiny DeltaNet's state before and after a rollback, and
the expected speed-up of speculative decoding against the acceptance rate; and the closed forms behind the last.

Each figure function takes what the chapter computed and returns a matplotlib Figure; matplotlib is imported inside,
so the chapter script starts without it.
"""
from pathlib import Path

from qwen.checkpoint import Checkpoint
from qwen.hub import ModelNotFound
from qwen.lang import tr
from qwen.mtp import load_mtp

ACCEPTED, REJECTED, UNREAD, MAIN = "#2a9d8f", "#e76f51", "#f1f1f1", "#8ecae6"


def missing_mtp(checkpoint: Checkpoint | str | Path) -> str | None:
    """Why `checkpoint` (opened, qwen/checkpoint.py, or its folder) has no usable MTP block, or None when it has
    one: the block is put through
    qwen.mtp.load_mtp's checks (no mtp.* tensors, some missing or unexpected, a wrong shape, its file not downloaded:
    each error names what), for a text model built on the meta device, so only the block's tensors are read."""
    try:
        load_mtp(checkpoint, device="meta")  # the checks run on the file's headers and tensors; nothing is kept
    except (ValueError, ModelNotFound) as e:
        return str(e)
    return None


def tokens_per_step(alpha, k):
    """Expected new tokens per verify forward when each of the k guesses is accepted with probability alpha,
    independently, until the first rejection: 1 + alpha + ... + alpha^k = (1 − alpha^(k+1)) / (1 − alpha)."""
    return k + 1.0 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def speedup(alpha, k, verify_cost, draft_cost, rollback_cost=0.0):
    """Tokens per unit of time against plain decoding (one token per decode step of cost 1): a step makes
    tokens_per_step(alpha, k) tokens and costs one verify forward (verify_cost decode steps), k drafts (draft_cost
    decode steps each) and, when some guess was rejected (probability 1 − alpha^k), one rollback replay
    (rollback_cost decode steps)."""
    cost = verify_cost + k * draft_cost + (1 - alpha ** k) * rollback_cost
    return tokens_per_step(alpha, k) / cost


def break_even(k, verify_cost, draft_cost, rollback_cost=0.0):
    """The acceptance rate from which speculative decoding pays, speedup(alpha, ...) = 1, found by bisection (the
    speed-up grows with alpha); 1.0 when even an always-right draft does not pay."""
    if speedup(1.0, k, verify_cost, draft_cost, rollback_cost) < 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if speedup(mid, k, verify_cost, draft_cost, rollback_cost) < 1 else (lo, mid)
    return hi


def loop_figure(steps, text=str, title="", glyphs=None):
    """The draft–verify loop as it ran, one row per main-model forward. steps: dicts with 'fed' (the main model's
    last token, fed first), 'drafts' (the k guesses), 'accepted' (how many leading guesses it kept) and 'main' (its
    own token after the last accepted one: the correction, or the bonus when all were kept). text: id -> the token's
    text. glyphs: book.ch02.Glyphs (CJK drawn when a CJK font is installed; chapter 2's rule for the rest)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from book.ch02 import Glyphs

    glyphs = glyphs or Glyphs()

    k = max(len(s["drafts"]) for s in steps)
    fig, ax = plt.subplots(figsize=(2.2 + 1.45 * (k + 2), 0.6 + 0.62 * len(steps)), layout="constrained")
    ax.set(xlim=(-0.1, k + 2.1), ylim=(len(steps) - 0.1, -0.9))
    ax.axis("off")

    def cell(x, y, colour, label, note=""):
        ax.add_patch(Rectangle((x, y), 0.92, 0.8, facecolor=colour, edgecolor="black", linewidth=0.8))
        ax.text(x + 0.46, y + 0.4, glyphs.shown(label, 10), ha="center", va="center", fontsize=8,
                fontfamily=glyphs.families, color="#999999" if colour == UNREAD else "black")
        if note:
            ax.text(x + 0.46, y + 0.74, note, ha="center", va="bottom", fontsize=6)

    ax.text(0.46, -0.35, tr("fed first\n(already chosen)", "先喂入\n（已选定）"), ha="center", fontsize=7)
    for i in range(k):
        ax.text(1.46 + i, -0.35, tr(f"guess d{i + 1}", f"猜测 d{i + 1}"), ha="center", fontsize=7)
    ax.text(k + 1.46, -0.35, tr("main model's\ntoken", "主模型的\ntoken"), ha="center", fontsize=7)
    for row, s in enumerate(steps):
        n = s["accepted"]
        cell(0, row, "white", text(s["fed"]))
        for i, d in enumerate(s["drafts"]):
            colour = ACCEPTED if i < n else REJECTED if i == n else UNREAD
            cell(1 + i, row, colour, text(d))
        cell(1 + k, row, MAIN, text(s["main"]),
             tr("bonus", "额外 token") if n == len(s["drafts"]) else tr(f"replaces d{n + 1}", f"顶替 d{n + 1}"))
        ax.text(k + 2.05, row + 0.4, f"+{n + 1}", va="center", fontsize=9)
    ax.legend(handles=[Patch(facecolor=ACCEPTED, label=tr("accepted: the main model's argmax after the previous token",
                                                          "接受：等于主模型在前一个 token 之后的 argmax")),
                       Patch(facecolor=REJECTED, label=tr("first rejected guess", "第一个被拒绝的猜测")),
                       Patch(facecolor=UNREAD, edgecolor="black",
                             label=tr("after a rejection: discarded", "被拒之后的猜测：丢弃")),
                       Patch(facecolor=MAIN, label=tr("the main model's own token from the same forward",
                                                      "同一次前向里主模型自己选的 token"))],
              loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=2, fontsize=7, frameon=False)
    ax.set_title((title or tr("Speculative decoding: one main-model forward per row, +n new tokens",
                              "投机解码：每行一次主模型前向，产出 +n 个新 token")) + "\n" + glyphs.caption(),
                 fontsize=10)
    return fig


def rollback_figure(states, title=""):
    """The tiny DeltaNet's state (dk, dv) in a few situations, side by side with its numbers: states maps a label to
    a 2-D tensor."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(states), figsize=(3.2 * len(states), 3.2), layout="constrained")
    top = max(float(s.abs().max()) for s in states.values())
    for ax, (label, S) in zip(axes, states.items()):
        ax.imshow(S.numpy(), cmap="RdBu_r", vmin=-top, vmax=top)
        for (i, j), v in zip([(i, j) for i in range(S.shape[0]) for j in range(S.shape[1])], S.flatten().tolist()):
            ax.text(j, i, f"{v:+.3f}", ha="center", va="center", fontsize=9)
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(S.shape[1]))
        ax.set_yticks(range(S.shape[0]))
    fig.suptitle(title or tr("A DeltaNet state cannot be cut back: it has absorbed every token it was fed",
                             "DeltaNet 状态无法截回：喂进去的每个 token 都已吸收进状态"), fontsize=10)
    return fig


def speedup_figure(ks, verify_cost, draft_cost, measured=(), rollback_cost=0.0, compared=None, title=""):
    """Left: expected tokens per main-model forward against the acceptance rate alpha, one curve for each k in `ks`
    and each k a measured point has, with the measured points (alpha, tokens per forward, k, name) on top, each in
    its curve's colour and labelled with its name and k (points of one name that coincide share a label). Right:
    the speed-up over plain decoding for a verify forward costing verify_cost decode steps, a draft step draft_cost
    and a rollback replay rollback_cost; `compared`, another rollback cost, is drawn dashed beside it."""
    import matplotlib.pyplot as plt
    import numpy as np

    alphas = np.linspace(0, 1, 101)
    ks = sorted(set(ks) | {k for _, _, k, _ in measured})
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6), layout="constrained")
    colours = {}
    for k in ks:
        line, = ax.plot(alphas, [tokens_per_step(a, k) for a in alphas], label=f"k = {k}")
        colours[k] = line.get_color()
        bx.plot(alphas, [speedup(a, k, verify_cost, draft_cost, rollback_cost) for a in alphas], label=f"k = {k}",
                color=colours[k])
    if compared is not None:
        for k in ks:
            bx.plot(alphas, [speedup(a, k, verify_cost, draft_cost, compared) for a in alphas], color=colours[k],
                    linestyle="--", linewidth=0.9,
                    label=tr(f"dashed: ρ = {compared:.2f}", f"虚线：ρ = {compared:.2f}") if k == ks[-1] else None)
    places = {}  # (alpha, tokens, name) -> the k of each point drawn there
    for alpha, tokens, k, name in measured:
        ax.scatter([alpha], [tokens], marker="x", color=colours[k], zorder=3)
        places.setdefault((round(alpha, 3), round(tokens, 3), name), []).append(k)
    for (alpha, tokens, name), at in places.items():
        edge = alpha > 0.95  # at α = 1 the label goes above and to the left of its point, elsewhere below and right
        ax.annotate(f"{name}{tr(', ', '，')}k = {', '.join(map(str, at))}", (alpha, tokens), textcoords="offset points",
                    xytext=(-6, 5) if edge else (6, -13), ha="right" if edge else "left", fontsize=7)
    ax.set(xlabel=tr("acceptance rate α", "接受率 α"), ylabel=tr("new tokens per main-model forward",
                                                                  "每次主模型前向产出的新 token 数"),
           title=tr("(1 − α^(k+1)) / (1 − α); crosses: measured, in their k's colour",
                    "(1 − α^(k+1)) / (1 − α)；叉号为测量值，颜色同对应 k 的曲线"))
    bx.axhline(1, color="grey", linewidth=0.8, linestyle="--")
    bx.set(xlabel=tr("acceptance rate α", "接受率 α"),
           ylabel=tr("speed-up over plain decoding", "相对普通解码的加速比"),
           title=tr(f"÷ (c + k·r + (1 − α^k)·ρ), with c = {verify_cost:g}, r = {draft_cost:.2f}, "
                    f"ρ = {rollback_cost:.2f}",
                    f"÷ (c + k·r + (1 − α^k)·ρ)，其中 c = {verify_cost:g}，r = {draft_cost:.2f}，"
                    f"ρ = {rollback_cost:.2f}"))
    ax.legend()
    bx.legend()
    fig.suptitle(title or tr("What speculative decoding can gain", "投机解码能快多少"), fontsize=10)
    return fig
