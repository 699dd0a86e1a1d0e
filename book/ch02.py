"""Chapter 2's figures: the lengths of the embedding rows, and what the head scores when fed an embedding row.

Each function takes what it draws and returns a matplotlib Figure (the chapter shows it with book.show). Tokens
are drawn with the first installed CJK font as a fallback; when none is installed, a character no font can draw is
written as its escaped code point (北 as \u5317), so two different characters never look the same, and the caption
says which font to install (Debian: fonts-noto-cjk, or the smaller fonts-wqy-microhei).
"""
import re

import numpy as np
import torch

from book.show import font_families
from qwen.lang import columns, tr


class Glyphs:
    """Which characters the figure fonts can draw, and a token's text as a figure can show it."""

    def __init__(self, families=None):
        from matplotlib.font_manager import FontProperties, findfont
        from matplotlib.ft2font import FT2Font

        self.families = families or font_families()
        self.fonts = [FT2Font(findfont(FontProperties(family=f))) for f in self.families]
        self.cjk = len(self.families) > 1

    def drawable(self, c):
        return c.isprintable() and any(f.get_char_index(ord(c)) for f in self.fonts)

    def shown(self, piece, width=14):
        """A space as ␣, a character no font has as its escaped code point (\u5317), cut to `width` characters."""
        text = "".join("␣" if c == " " else c if self.drawable(c) else ascii(c)[1:-1] for c in piece)
        return text if len(text) <= width else text[:width - 1] + "…"

    def caption(self):
        if self.cjk:
            return tr(f"␣ is a space; CJK characters drawn with {self.families[1]}; a character no font here has is "
                      f"written as its code point, \\uXXXX",
                      f"␣ 表示空格；中日韩字符用 {self.families[1]} 绘制；本机字体都画不出的字符，"
                      f"写成码位 \\uXXXX")
        return tr("␣ is a space; a character the installed fonts cannot draw is written as its code point, \\uXXXX "
                  "(no CJK font found: install Noto Sans CJK, on Debian fonts-noto-cjk or fonts-wqy-microhei, to see "
                  "the characters)",
                  "␣ 表示空格；已安装的字体画不出的字符，写成码位 \\uXXXX（没有找到中日韩字体：装上 Noto Sans CJK "
                  "就能看到这些字符，Debian 上的包是 fonts-noto-cjk 或 fonts-wqy-microhei）")


@torch.no_grad()  # figures want plain tensors
def row_norms(norms, n_plain, n_used, marked, synthetic=""):
    """Histogram of the row lengths |E_v| in three groups: ordinary tokens, added tokens, padding rows.

    norms: (V,) row lengths; n_plain: first added id (248044); n_used: ids the tokenizer has (248077);
    marked: the ids of a text, drawn as ticks; synthetic: a note for the title (empty for real weights).
    """
    import matplotlib.pyplot as plt

    with plt.rc_context({"font.family": font_families()}):  # CJK glyphs for the Chinese labels
        return _row_norms(plt, norms, n_plain, n_used, marked, synthetic)


def _row_norms(plt, norms, n_plain, n_used, marked, synthetic):
    norms = norms.float().cpu()
    groups = {tr(f"ordinary tokens (ids 0–{n_plain - 1:,})", f"普通 token（id 0–{n_plain - 1:,}）"): norms[:n_plain],
              tr(f"added tokens (ids {n_plain:,}–{n_used - 1:,})", f"添加的 token（id {n_plain:,}–{n_used - 1:,}）"):
                  norms[n_plain:n_used],
              tr(f"padding rows (ids {n_used:,}–{len(norms) - 1:,}), never looked up",
                 f"填充行（id {n_used:,}–{len(norms) - 1:,}），永远查不到"): norms[n_used:]}
    values = norms.numpy()
    bins = np.linspace(values.min(), values.max(), 80) if values.max() > values.min() else 80
    fig, ax = plt.subplots(figsize=(11, 5), layout="constrained")
    for (label, group), color, style in zip(groups.items(), ("C0", "C1", "C3"), ("stepfilled", "step", "step")):
        if len(group):
            ax.hist(group.numpy(), bins=bins, color=color, histtype=style, lw=2, alpha=0.8,
                    label=tr(f"{label}: {len(group):,} rows", f"{label}：{len(group):,} 行"))
    ax.plot(norms[list(marked)].numpy(), np.full(len(marked), 0.7), "|", color="black", markersize=14,
            label=tr(f"the {len(marked)} tokens of the text above", f"上面那段文本的 {len(marked)} 个 token"))
    ax.set(yscale="log", xlabel=tr("row length |E_v| (Euclidean norm)", "行长度 |E_v|（欧几里得范数）"),
           ylabel=tr("number of rows (log scale)", "行数（对数刻度）"),
           title=tr(f"Lengths of the {len(norms):,} rows of the embedding table{synthetic}",
                    f"嵌入表全部 {len(norms):,} 行的长度{synthetic}"))
    ax.set_ylim(bottom=0.5)
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    return fig


@torch.no_grad()  # figures want plain tensors
def head_top5(E, ids, decode, head=None, synthetic="", glyphs=None):
    """For each id, the head's five highest logits when h is that token's own embedding row (the token in red).

    E: (V, d) embedding table; head: (V, d) output head (E itself when tied); decode: ids -> text. All panels share
    one x scale, so the bars of different tokens can be compared.
    """
    import matplotlib.pyplot as plt

    from qwen.embedding import head_logits

    head = E if head is None else head
    glyphs = glyphs or Glyphs()
    fig, axes = plt.subplots(1, len(ids), figsize=(3.2 * len(ids), 3.6), layout="constrained", sharex=True,
                             squeeze=False)
    for ax, i in zip(axes[0], ids):
        top = head_logits(E[i].float(), head.float()).topk(5)
        ax.barh(range(5), top.values.cpu().numpy(), color=["C3" if j == i else "C0" for j in top.indices.tolist()])
        ax.set_yticks(range(5), [glyphs.shown(decode([j])) for j in top.indices.tolist()],
                      fontfamily=glyphs.families)
        ax.invert_yaxis()
        ax.set_xlabel("logit h · head_v")
        ax.set_title(f"h = E[{glyphs.shown(decode([i]))}]", fontfamily=glyphs.families)
    fig.suptitle(tr(f"Top 5 tokens of the head for each token's own embedding row{synthetic}\n({glyphs.caption()})",
                    f"把每个 token 自己的嵌入行当作 h：输出头打分最高的 5 个 token{synthetic}\n（{glyphs.caption()}）"),
                 fontfamily=glyphs.families)
    return fig


def merged(before, after, to_bytes):
    """The index in `after` of the symbol one merge made from two symbols of `before` (None if nothing merged)."""
    cuts = set()
    at = 0
    for symbol in before[:-1]:
        at += len(to_bytes(symbol))
        cuts.add(at)  # the byte offsets between symbols
    at = 0
    for k, symbol in enumerate(after):
        end = at + len(to_bytes(symbol))
        if any(at < c < end for c in cuts):  # a former boundary inside it: it is the new symbol
            return k
        at = end
    return None


def bpe_merges(piece, steps, to_bytes, glyphs=None):
    """The symbols of one piece after each merge, one row per step: how byte-level BPE builds the tokens.

    piece: the text; steps: lists of spelled symbols, the first being its single bytes; to_bytes: symbol -> the
    bytes it stands for. The symbol each merge just made is outlined in black. A symbol that is not whole UTF-8
    (part of a CJK character) is drawn as its bytes in hex.
    """
    import matplotlib.pyplot as plt

    glyphs = glyphs or Glyphs()

    def label(symbol):
        raw = to_bytes(symbol)
        try:
            return glyphs.shown(raw.decode("utf-8"), width=12)
        except UnicodeDecodeError:
            return raw.hex(" ")

    n = len(steps[0])
    fig, ax = plt.subplots(figsize=(min(1.0 * n + 1.5, 24), 0.42 * len(steps) + 1.2), layout="constrained")
    for row, symbols in enumerate(steps):
        new = merged(steps[row - 1], symbols, to_bytes) if row else None
        x = 0
        for k, s in enumerate(symbols):
            w = len(to_bytes(s))  # one column per byte, so a token's box spans its bytes
            ax.add_patch(plt.Rectangle((x + 0.05, -row - 0.4), w - 0.1, 0.8, facecolor=f"C{k % 10}",
                                       alpha=0.6 if k == new else 0.25, edgecolor="black" if k == new else "none",
                                       linewidth=2 if k == new else 0))
            ax.text(x + w / 2, -row, label(s), ha="center", va="center", fontsize=8, fontfamily=glyphs.families)
            x += w
    ax.set(xlim=(0, n), ylim=(-len(steps) + 0.5, 0.5), xticks=[])
    ax.set_yticks(-np.arange(len(steps)), [tr("bytes", "字节")] + [tr(f"merge {k}", f"第 {k} 次合并")
                                                                   for k in range(1, len(steps))],
                  fontfamily=glyphs.families)
    ax.set_title(tr(f"Byte-level BPE of '{glyphs.shown(piece, width=40)}': {len(steps[0])} bytes, {len(steps) - 1} "
                    f"merges, {len(steps[-1])} tokens; outlined: the pair each merge joins\n({glyphs.caption()})",
                    f"“{glyphs.shown(piece, width=40)}”的字节级 BPE：{len(steps[0])} 个字节，{len(steps) - 1} 次合并，"
                    f"{len(steps[-1])} 个 token；黑框标出每次合并的那一对\n（{glyphs.caption()}）"),
                 fontfamily=glyphs.families)
    return fig


HAN = re.compile("[\u4e00-\u9fff]")  # a Chinese character (CJK Unified Ideographs)


def chinese_split(sentence, ids, token_bytes):
    """What the Chinese edition prints about one Chinese sentence (the English edition prints none of it, so the
    lines are written in Chinese only): each token of `ids`, the tokenizer's split of `sentence`, with its UTF-8 bytes
    and its id, in columns of equal width; a token that holds only part of a character is named as that character's
    bytes; then the tokens per Chinese character, punctuation left out. token_bytes(id) gives a token's bytes."""
    starts, at = {}, 0  # the byte offset where each character starts -> the character
    for c in sentence:
        starts[at] = c
        at += len(c.encode("utf-8"))
    hanzi = len(HAN.findall(sentence))
    lines = [f"{len(sentence)} 个字符（其中 {hanzi} 个汉字），UTF-8 共 {at} 个字节，切成 {len(ids)} 个 token："]
    rows, at, on_hanzi = [], 0, 0
    for i in ids:
        raw = token_bytes(i)
        end = at + len(raw)
        if at in starts and (end in starts or end == len(sentence.encode("utf-8"))):  # whole characters
            shown = raw.decode("utf-8")
            n = len(HAN.findall(shown))
            note = f"{n} 个汉字" if n else "标点"
        else:  # part of one character: its bytes a to b
            first = max(s for s in starts if s <= at)
            c = starts[first]
            a, b = at - first + 1, end - first
            shown = f"{c}（第 {a}–{b} 字节）" if b > a else f"{c}（第 {a} 字节）"
            note = f"不足一个汉字（“{c}”共 {len(c.encode('utf-8'))} 个字节）"
        on_hanzi += note != "标点"
        rows.append((shown, raw.hex(" "), f"id {i}", note))
        at = end
    width = [max(columns(row[k]) for row in rows) for k in range(3)]
    lines += ["  " + "  ".join(row[k] + " " * (width[k] - columns(row[k])) for k in range(3)) + "  " + row[3]
              for row in rows]
    lines.append(f"不算标点，{hanzi} 个汉字切成了 {on_hanzi} 个 token，平均每个汉字 {on_hanzi / hanzi:.2f} 个 token")
    return lines
