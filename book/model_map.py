"""A map of Qwen3.5: the tokenizer, the text model's whole stack and one decoder layer of each kind, with the vision
tower (model.visual.*) on the left and the multi-token-prediction head (mtp.*) on top, each part labelled with the
chapter that builds it and arrows along the data flow. Every chapter draws it with its own part highlighted:
draw("norm") and so on. A box can belong to two parts: the caches are written by the mixers (chapters 6 and 7, their
tag) and used by generation (chapter 9), so either highlight lights them; the MTP head's norms light with "norm".
Its words are in the language the course speaks (qwen.lang); the names of the checkpoint's tensors stay as they are."""
from qwen.lang import tr

CHAPTERS = {"weights": 1, "embedding": 2, "norm": 3, "rope": 4, "mlp": 5, "attention": 6, "deltanet": 7,
            "model": 8, "generate": 9, "vision": 10, "mtp": 11, "quant": 12, "kernel": 13}
# The parts whose weights chapter 12 stores in fewer bits: the text model's projections and its embedding/head (not
# its norms, conv kernels, A_log or dt_bias, which stay as they are, nor the tower's or the MTP head's weights).
QUANTIZED = ("embedding", "attention", "deltanet", "mlp")
PARTS = tuple(CHAPTERS)
TAG = 0.3  # width kept free for a box's chapter tag, in map units


def what(part):
    """What a part is, in words (the map's title names the part highlighted)."""
    return {"weights": tr("the checkpoint: every box that holds tensors", "检查点：每个存有张量的框"),
            "embedding": tr("embedding and tied head", "嵌入与共享的输出头"),
            "norm": tr("the norms", "各处的归一化"), "rope": tr("rotary position embedding", "旋转位置编码"),
            "mlp": tr("the SwiGLU MLP", "SwiGLU 结构的 MLP"), "attention": tr("gated full attention", "门控全注意力"),
            "deltanet": tr("Gated DeltaNet (linear attention)", "Gated DeltaNet（线性注意力）"),
            "model": tr("the decoder layers and the stack", "解码层与整个堆叠"),
            "generate": tr("generation: the loop and the caches", "生成：循环与缓存"),
            "vision": tr("the vision tower: an image becomes tokens", "视觉塔：图像变成 token"),
            "mtp": tr("the MTP head, the draft of speculative decoding", "MTP 头，投机解码的草稿"),
            "quant": tr("the weights stored in fewer bits: every projection and the tied head",
                        "用更少比特存储的权重：每个投影和共享的输出头"),
            "kernel": tr("the one-row products: every projection and the tied head, multiplied by the C++ kernel",
                         "单行乘法：每个投影和共享的输出头，由 C++ kernel 相乘")}[part]


COLOURS = {"weights": "#e9c46a", "embedding": "#8ecae6", "norm": "#f4a261", "rope": "#b5e48c", "mlp": "#cdb4db",
           "attention": "#ffafcc", "deltanet": "#90e0ef", "model": "#e9edc9", "generate": "#ffd6a5",
           "vision": "#a0c4ff", "mtp": "#ffadad", "quant": "#b7e4c7", "kernel": "#f7b267"}
S = 3.9  # the text model sits this far right of the vision column


def _layer(x, kind):
    """The boxes of one decoder layer drawn at column x: (x, y, width, height, text, part, holds weights)."""
    mixer = "deltanet" if kind == "L" else "attention"
    boxes = [(x, 1.2, 4.4, 0.45, tr("input_layernorm: RMSNorm, scale 1 + w (d)",
                                    "input_layernorm：RMSNorm，比例 1 + w (d)"), "norm", True),
             (x, 6.95, 4.4, 0.45, "post_attention_layernorm: RMSNorm (d)", "norm", True),
             (x, 7.6, 4.4, 0.6, "mlp: down_proj(silu(gate_proj(x)) · up_proj(x))", "mlp", True)]
    if kind == "L":
        boxes += [(x, 2.0, 1.3, 0.45, "in_proj_qkv", mixer, True), (x + 1.4, 2.0, 1.0, 0.45, "in_proj_z", mixer, True),
                  (x + 2.5, 2.0, 0.9, 0.45, "in_proj_b", mixer, True),
                  (x + 3.5, 2.0, 0.9, 0.45, "in_proj_a", mixer, True),
                  (x, 2.65, 1.6, 0.45, "conv1d, silu", mixer, True),
                  (x + 2.7, 2.65, 1.7, 0.45, tr("β, decay g\n(A_log, dt_bias)", "β，衰减 g\n(A_log, dt_bias)"), mixer,
                   True),
                  (x, 3.3, 1.6, 0.45, tr("l2norm of q, k", "q、k 的 l2norm"), "norm", False),
                  (x, 3.95, 3.0, 0.6, tr("delta rule: state S (Hv, dk, dv)", "delta 规则：状态 S (Hv, dk, dv)"), mixer,
                   False),
                  (x + 3.1, 3.95, 1.3, 0.6, tr("conv and state\ncache", "卷积与状态\n缓存"), (mixer, "generate"),
                   False),
                  (x, 4.75, 4.4, 0.45, tr("norm: gated RMSNorm · silu(z) (dv)", "norm：门控 RMSNorm · silu(z) (dv)"),
                   "norm", True),
                  (x, 5.4, 4.4, 0.45, "out_proj", mixer, True)]
    else:
        boxes += [(x, 2.0, 2.0, 0.45, tr("q_proj (query + gate)", "q_proj（查询 + 门）"), mixer, True),
                  (x + 2.1, 2.0, 1.1, 0.45, "k_proj", mixer, True), (x + 3.3, 2.0, 1.1, 0.45, "v_proj", mixer, True),
                  (x, 2.65, 2.0, 0.45, "q_norm (D)", "norm", True),
                  (x + 2.1, 2.65, 1.1, 0.45, "k_norm (D)", "norm", True),
                  (x, 3.3, 3.2, 0.45, tr("RoPE on q, k (first D/4 dims)", "对 q、k 做 RoPE（前 D/4 维）"), "rope",
                   False),
                  (x, 3.95, 3.2, 0.6, tr("causal attention, GQA", "因果注意力，GQA"), mixer, False),
                  (x + 3.3, 3.95, 1.1, 0.6, tr("KV cache", "键值缓存"), (mixer, "generate"), False),
                  (x, 4.75, 4.4, 0.45, "· sigmoid(gate)", mixer, False),
                  (x, 5.4, 4.4, 0.45, "o_proj", mixer, True)]
    return boxes


# The data flow inside one layer column, bottom to top: (y from, y to) of each arrow, drawn at x + FLOW_X, where
# every row of both layer kinds has a box.
FLOW_X = 0.65
LAYER_FLOW = ((1.0, 1.2), (1.65, 2.0), (2.45, 2.65), (3.1, 3.3), (3.75, 3.95), (4.55, 4.75), (5.2, 5.4),
              (5.85, 6.45), (6.72, 6.95), (7.4, 7.6), (8.2, 8.45))
STACK_FLOW = ((0.5, 0.7), (1.3, 1.53), (8.4, 8.55), (9.0, 9.15))  # tokenizer → embedding → layers; norm → head → out
STACK_X = 3.55
# The vision column runs downwards, from the image at the top to the merger beside embed_tokens: (y from, y to) at
# VISION_X, then the merger's tokens go right into the embedding stream. The MTP strip runs left to right: (x from,
# x to) at height y; its h_t comes up from the final norm.
VISION_X = 3.1
VISION_FLOW = ((8.05, 7.75), (7.15, 6.8), (6.2, 5.85), (5.25, 4.53), (1.53, 1.3))
MTP_FLOW = ((7.0, 7.3, 9.675), (7.0, 7.3, 10.225), (8.8, 9.1, 9.95), (11.6, 11.9, 9.95), (12.9, 13.2, 9.95))


def _vision():
    """The vision tower's boxes, in the column left of the text model: (x, y, width, height, text, part, weights)."""
    boxes = [(0.2, 8.05, 3.3, 0.45, tr("image: RGB pixels (H, W, 3)", "图像：RGB 像素 (H, W, 3)"), "vision", False),
             (0.2, 7.15, 3.3, 0.6, tr("preprocess: resize to multiples of 32,\nnormalise, patches (N, 3·2·16·16)",
                                      "预处理：缩放到 32 的倍数，\n归一化，切成 patch (N, 3·2·16·16)"),
              "vision", False),
             (0.2, 6.2, 3.3, 0.6, tr("patch_embed: a Conv3d, stride = kernel:\none matrix, (N, 1536) → (N, C)",
                                     "patch_embed：Conv3d，步长 = 卷积核大小：\n其实就是一个矩阵，(N, 1536) → (N, C)"),
              "vision", True),
             (0.2, 5.25, 3.3, 0.6, tr("+ pos_embed: a 48 × 48 grid of C,\nresampled bilinearly to the image",
                                      "+ pos_embed：48 × 48 的网格，每格 C 维，\n双线性重采样到图像大小"), "vision",
              True),
             (0.2, 0.7, 3.3, 0.6, tr("merger: 2 × 2 patches → one token (d),\nreplaces an <|image_pad|> embedding",
                                     "merger：2 × 2 个 patch → 一个 token (d)，\n替换一个 <|image_pad|> 的嵌入"),
              "vision", True),
             (0.2, 0.05, 3.3, 0.45, tr("M-RoPE positions: 3 rows t, h, w", "M-RoPE 位置：3 行 t、h、w"),
              ("vision", "rope"), False)]
    for i in range(12):  # block 0 at the top: the column runs downwards
        boxes.append((0.2, 4.3 - i * 0.25, 1.2, 0.21, tr(f"block {i}", f"视觉块 {i}"), "vision", True))
    return boxes


def _mtp():
    """The MTP head's boxes, in the strip above the layer columns (x from the text model's left edge)."""
    return [(S + 4.1, 9.45, 2.9, 0.45, "pre_fc_norm_hidden($h_t$)", ("mtp", "norm"), True),
            (S + 4.1, 10.0, 2.9, 0.45, "pre_fc_norm_embedding(embed $x_{t+1}$)", ("mtp", "norm"), True),
            (S + 7.3, 9.45, 1.5, 1.0, "fc (d, 2d):\n[e | h] → d", "mtp", True),
            (S + 9.1, 9.45, 2.5, 1.0, tr("layers.0: one full-\nattention decoder\nlayer, its own KV cache",
                                         "layers.0：一个全注意力\n解码层，\n有自己的键值缓存"),
             ("mtp", "attention"), True),
            (S + 11.9, 9.45, 1.0, 1.0, "norm\n(d)", ("mtp", "norm"), True),
            (S + 13.2, 9.45, 1.7, 1.0, tr("the stack's lm_head:\nlogits for $x_{t+2}$,\nthe draft",
                                          "主干的 lm_head：\n第 t+2 个 token 的\nlogits，即草稿"), "mtp", False)]


def _boxes():
    stack = [(0.4, 0.05, 3.4, 0.45, tr("tokenizer: text → token ids (B, T)", "分词器：文本 → token id (B, T)"),
              "embedding", False),
             (0.4, 0.7, 3.4, 0.6, "embed_tokens (V, d)", "embedding", True),
             (0.4, 7.95, 3.4, 0.45, tr("norm: final RMSNorm (d)", "norm：最终归一化，RMSNorm (d)"), "norm", True),
             (0.4, 8.55, 3.4, 0.45, tr("lm_head (V, d): embed_tokens if tied", "lm_head (V, d)：共享时即 embed_tokens"),
              "embedding", True),
             (0.4, 9.15, 3.4, 0.4, tr("logits → next token → append", "logits → 下一个 token → 接到末尾"), "generate",
              False)]
    for i in range(24):  # [L, L, L, F] x 6, bottom to top
        kind = "F" if (i + 1) % 4 == 0 else "L"
        stack.append((0.4, 1.55 + i * 0.25, 1.3, 0.21, f"{i} {kind}", "attention" if kind == "F" else "deltanet", True))
    text = stack + _layer(4.8, "L") + _layer(10.3, "F")
    return _vision() + [(x + S, *rest) for x, *rest in text] + _mtp()


def draw(highlight):
    """The map, with the boxes of part `highlight` (one of PARTS) in colour and the rest grey."""
    if highlight not in CHAPTERS:
        raise ValueError(tr(f"unknown part {highlight!r}: one of {', '.join(PARTS)}",
                            f"没有 {highlight!r} 这个部分：可选 {', '.join(PARTS)}"))
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    fig, ax = plt.subplots(figsize=(19, 10.6))
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.95)  # the map is the whole figure
    ax.set(xlim=(0, S + 15), ylim=(0, 11.1))
    ax.axis("off")

    def lit(parts, weights, text=""):
        quantized = parts[0] in QUANTIZED and not text.startswith(("conv1d", "β"))  # the conv, A_log, dt_bias stay
        return highlight in parts or (highlight == "weights" and weights) or \
            (highlight in ("quant", "kernel") and weights and quantized)

    def box(x, y, w, h, text, part, weights, fontsize=8):
        parts = part if isinstance(part, tuple) else (part,)  # the first one builds it and gives the tag
        on = lit(parts, weights, text)
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                                    facecolor=COLOURS[highlight] if on else "#f1f1f1",
                                    edgecolor="black" if on else "#bbbbbb", linewidth=1.6 if on else 0.8))
        tagged = h >= 0.4  # the chapter that builds it, in the top right corner, beside the name
        ax.text(x + (w - TAG * tagged) / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
                color="black" if on else "#888888", weight="bold" if on else "normal")
        if tagged:
            ax.text(x + w - 0.05, y + h - 0.04, f"ch{CHAPTERS[parts[0]]}", ha="right", va="top", fontsize=6,
                    color="black" if on else "#aaaaaa")

    def frame(x, y, w, h, text, part, right=False):
        on = part == highlight
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05,rounding_size=0.1", facecolor="none",
                                    edgecolor="black" if on else "#bbbbbb", linewidth=2 if on else 1,
                                    linestyle="-" if on else "--"))
        ax.text(x + w - 0.05 if right else x + 0.05, y + h + 0.1, f"{text} · ch{CHAPTERS[part]}", fontsize=9,
                va="bottom", ha="right" if right else "left",
                color="black" if on else "#888888", weight="bold" if on else "normal")

    def note(x, y, text):
        ax.text(x, y, text, fontsize=8, va="center", color="#555555")

    for b in _boxes():
        box(*b, fontsize=6 if b[3] < 0.3 else 8)
    frame(S + 0.25, 1.45, 3.7, 6.15, tr("24 decoder layers, [L, L, L, F] × 6", "24 个解码层，[L, L, L, F] × 6"),
          "model")
    note(S + 1.9, 4.5, tr("L: linear attention\n(Gated DeltaNet),\n18 layers\n\nF: full attention,\n6 layers\n\n"
                          "each one:\nh = x + mixer(norm(x)),\nh + mlp(norm(h))",
                          "L：线性注意力\n（Gated DeltaNet），\n18 层\n\nF：全注意力，\n6 层\n\n"
                          "每一层：\nh = x + mixer(norm(x))，\nh + mlp(norm(h))\n（mixer 即混合器）"))
    frame(0.1, 0.65, 3.5, 8.0, tr("model.visual: the vision tower", "model.visual：视觉塔"), "vision")
    frame(0.15, 1.45, 3.4, 3.1, tr("12 blocks (the 0.8B's depth)", "12 个视觉块（0.8B 的深度）"), "vision")
    note(1.55, 3.0, tr("each one:\nh = x + attn(norm(x)),\nh + mlp(norm(h));\n\nattention with a\n"
                       "2-D RoPE (row, col),\nonly within one image",
                       "每个视觉块：\nh = x + attn(norm(x))，\nh + mlp(norm(h))；\n\n注意力用\n2-D RoPE（行、列），\n"
                       "只在同一张图内做"))
    frame(S + 4.0, 9.35, 10.95, 1.2, tr("mtp: multi-token prediction, the draft of speculative decoding",
                                        "mtp：多 token 预测，投机解码的草稿"), "mtp")

    def flow(x, y0, y1, on, x1=None):
        ax.annotate("", xy=(x if x1 is None else x1, y1), xytext=(x, y0),
                    arrowprops=dict(arrowstyle="->", lw=1, color="black" if on else "#999999"))

    for y0, y1 in STACK_FLOW:
        flow(S + STACK_X, y0, y1, highlight == "model")
    flow(S + STACK_X, 7.52, 7.95, highlight == "model")  # out of the last layer, into the final norm
    gated = tr("self_attn: gated attention", "self_attn：门控注意力")
    for x, kind, mixer, name in ((S + 4.8, "L", "deltanet", "linear_attn: Gated DeltaNet"),
                                 (S + 10.3, "F", "attention", gated)):
        count = tr("18 of 24", "24 层中的 18 层") if kind == "L" else tr("6 of 24", "24 层中的 6 层")
        frame(x - 0.2, 0.75, 4.8, 8.05, tr(f"one {kind} layer ({count})", f"一个 {kind} 层（{count}）"), "model")
        frame(x - 0.1, 1.85, 4.6, 4.3, name, mixer, right=True)  # on the right: the flow arrows run on the left
        ax.text(x + 2.2, 0.9, "x (B, T, d)", ha="center", fontsize=8)
        for y0, y1 in LAYER_FLOW:
            flow(x + FLOW_X, y0, y1, highlight == "model")
        for y, (part, text) in ((6.45, ("model", "⊕ x + mixer(input_layernorm(x))")),
                                (8.45, ("model", "⊕ h + mlp(post_attention_layernorm(h))"))):
            ax.text(x + 2.2, y + 0.1, text, ha="center", fontsize=8, color="black" if part == highlight else "#888888",
                    weight="bold" if part == highlight else "normal")
    for y0, y1 in VISION_FLOW:
        flow(VISION_X, y0, y1, highlight == "vision")
    flow(3.5, 0.85, 0.85, highlight == "vision", x1=S + 0.4)  # the image's tokens join the embedding stream
    for x0, x1, y in MTP_FLOW:
        flow(S + x0, y, y, highlight == "mtp", x1=S + x1)
    mtp = "black" if highlight == "mtp" else "#999999"  # h_t: the final norm's output goes up to the MTP head too
    ax.plot([S + 3.8, S + 4.3], [8.17, 8.17], color=mtp, linewidth=1)
    flow(S + 4.3, 8.17, 9.45, highlight == "mtp")
    loop = "black" if highlight == "generate" else "#bbbbbb"  # the generated token goes back in at the bottom
    ax.plot([S + 0.4, S + 0.1, S + 0.1], [9.35, 9.35, 1.15], color=loop, linewidth=1)  # as an id: no tokenizer
    ax.annotate("", xy=(S + 0.4, 1.15), xytext=(S + 0.1, 1.15), arrowprops=dict(arrowstyle="->", color=loop))
    ax.set_title(tr(f"Qwen3.5: the text model, the vision tower and the MTP head. Highlighted: {what(highlight)} "
                    f"(chapter {CHAPTERS[highlight]}). Names are the checkpoint's; chN marks the chapter that builds "
                    f"each part; arrows: the data flow.",
                    f"Qwen3.5：文本模型、视觉塔与 MTP 头。高亮：{what(highlight)}（第 {CHAPTERS[highlight]} 章）。"
                    f"名称取自检查点；chN 表示构建该部分的章；箭头表示数据流向。"), fontsize=10)
    return fig
