"""Where does our model part ways with transformers? Module by module, on one prompt.

本课的模型从哪个模块开始和 transformers 不一致？在同一个提示词上逐个模块对照。

Both models run the same tokens. Each module is compared twice: "alone" (ours is fed transformers' input to that
module, so the number is that module's own error) and "carried" (each model on its own residual stream, so rounding
accumulates). The first module whose own error passes the tolerance is named: a wrong weight, a wrong convention.
It lives in book/, not qwen/, because it imports transformers (the `proofs` extra, inside `compare` only): the qwen
package never does. Run: python -m book.diff --model synthetic [--dtype bf16] [--lang en|zh]
"""
import argparse
import sys

import torch

from qwen import lang
from qwen.checkpoint import open_checkpoint
from qwen.config import DTYPES
from qwen.course import open_model, summary
from qwen.lang import tr
from qwen.model import load_model

PROMPT = "The capital of France is Paris. The capital of Japan is"
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2 ** -6, torch.float16: 2 ** -9}  # relative to the output's max


def prompt_ids(path, text, vocab_size):
    """The prompt's tokens with the checkpoint's tokenizer; fixed pseudo-random ids when it has none."""
    from qwen.tokenizer import Tokenizer

    try:
        return torch.tensor([Tokenizer(path).encode(text)])
    except FileNotFoundError:
        print(tr(f"(no tokenizer in {path}: using 24 fixed pseudo-random token ids instead of the prompt)",
                 f"（{path} 里没有分词器：改用 24 个固定的伪随机 token id 代替提示词）"))
        return torch.randint(0, vocab_size, (1, 24), generator=torch.Generator().manual_seed(0))


def modules(model):
    """name -> module, in the order the data flows, for our model; the same names index transformers' model."""
    out = {"embed_tokens": model.embed_tokens}
    for i, layer in enumerate(model.layers):
        mixer = "linear_attn" if layer.kind == "linear_attention" else "self_attn"
        for part in ("input_layernorm", mixer, "post_attention_layernorm", "mlp"):
            out[f"layers.{i}.{part}"] = getattr(layer, part)
        out[f"layers.{i}"] = layer
    out["norm"], out["lm_head"] = model.norm, model.lm_head
    return out


def record(named):
    """Hooks that keep each module's first input and its output; returns (inputs, outputs, handles)."""
    inputs, outputs, handles = {}, {}, []
    for name, m in named.items():
        def hook(module, args, kwargs, out, name=name):
            inputs[name] = args[0] if args else kwargs["hidden_states"]
            outputs[name] = out[0] if isinstance(out, tuple) else out
        handles.append(m.register_forward_hook(hook, with_kwargs=True))
    return inputs, outputs, handles


def compare(checkpoint, dtype=torch.float32, text=PROMPT, ours=None, theirs=None):
    """Print the table; return the name of the first module beyond tolerance (None when all are within).
    `checkpoint`: opened (qwen/checkpoint.py) or its folder. `ours` / `theirs`: models already loaded from it in
    `dtype` (a test may pass an altered one)."""
    try:
        from transformers import Qwen3_5ForConditionalGeneration
    except ImportError:
        print(tr("transformers is not installed: pip install 'transformers==5.24.0' (or pip install -e '.[proofs]')",
                 "没有安装 transformers：pip install 'transformers==5.24.0'（或 pip install -e '.[proofs]'）"))
        return "transformers missing"
    checkpoint = open_checkpoint(checkpoint)
    ours = ours or load_model(checkpoint, dtype=dtype)
    theirs = theirs or Qwen3_5ForConditionalGeneration.from_pretrained(checkpoint.folder, dtype=dtype,
                                                                       attn_implementation="eager").eval()
    ids = prompt_ids(checkpoint.folder, text, ours.cfg.vocab_size)
    T = ids.shape[1]
    ours_named = modules(ours)
    lm = theirs.model.language_model
    theirs_named = {n: theirs.lm_head if n == "lm_head" else lm.get_submodule(n) for n in ours_named}
    hf_in, hf_out, handles = record(theirs_named)
    _, our_out, handles2 = record(ours_named)
    with torch.no_grad():
        theirs(ids)
        ours(ids)
        for h in handles + handles2:
            h.remove()
        cos, sin = ours.rotary(torch.arange(T)[None], dtype)
        tol, first = TOLERANCE[dtype], None
        print(tr(f"{'module':<34} {'alone':>10} {'carried':>10}   (max |ours - transformers| / max |transformers|)",
                 f"{'模块':<32} {'单独':>8} {'累积':>8}   "
                 "（相对误差：max |本课 − transformers| / max |transformers|）"))
        for name, module in ours_named.items():
            x = hf_in[name]
            if name == "embed_tokens":
                alone = module(ids)
            elif name.endswith("self_attn"):
                alone = module(x, cos, sin)
            elif name.startswith("layers.") and name.count(".") == 1:
                alone = module(x, cos, sin)
            else:
                alone = module(x)
            want = hf_out[name].float()
            scale = want.abs().max().clamp_min(1e-30)
            own = ((alone.float() - want).abs().max() / scale).item()
            carried = ((our_out[name].float() - want).abs().max() / scale).item()
            flag = ""
            if own > tol and first is None:
                first, flag = name, tr("  <- first beyond tolerance", "  <- 第一个超出容差的模块")
            print(f"{name:<34} {own:>10.2e} {carried:>10.2e}{flag}")
    top_ours, top_theirs = our_out["lm_head"][0, -1].argmax().item(), hf_out["lm_head"][0, -1].argmax().item()
    print(tr(f"next token: ours {top_ours}, transformers {top_theirs}",
             f"下一个 token：本课 {top_ours}，transformers {top_theirs}"))
    kind = str(dtype).removeprefix("torch.")
    print(tr(f"tolerance {tol:.1e} ({kind}): ", f"容差 {tol:.1e}（{kind}）：")
          + (tr(f"first module beyond it: {first}", f"第一个超出容差的模块：{first}") if first
             else tr("every module is within it", "每个模块都在容差以内")))
    return first


def main(argv=None):
    lang.use(lang.from_command_line(sys.argv[1:] if argv is None else argv))  # --help in the language asked for
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--model", help=tr("checkpoint folder, hub id, size or 'synthetic'",
                                           "检查点文件夹、Hugging Face 模型名、尺寸或 'synthetic'"))
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES),
                        help=tr("compute dtype (default fp32)", "计算用的 dtype（默认 fp32）"))
    parser.add_argument("--prompt", default=PROMPT, help=tr("the text both models read", "两个模型读入的文本"))
    parser.add_argument("--lang", choices=lang.LANGUAGES,
                        help=tr("the language it speaks: en or zh (default: QWEN_LANG, else the locale)",
                                "输出语言：en 或 zh（默认取 QWEN_LANG，没有则按系统 locale）"))
    args = parser.parse_args(argv)
    lang.use(args.lang)
    try:
        checkpoint = open_model(args.model)
    except (FileNotFoundError, ValueError) as e:
        sys.exit(tr(f"error: {e}", f"错误：{e}"))
    first = compare(checkpoint, DTYPES[args.dtype], args.prompt)
    sys.exit(1 if first else 0)


if __name__ == "__main__":
    main()
