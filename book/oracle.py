"""The optional proof: the chapter's module next to transformers' on the same checkpoint.

transformers is the course's oracle, an optional dependency (the `proofs` extra): a learner may not have it. So a
chapter imports it only here and only when asked for (book/diff.py, a command of its own, is the other place); without
it the proof is one line and the chapter goes on. A script runs the proof only with --proof (importing transformers
takes seconds); a notebook runs it whenever transformers is there.
"""
import sys
import warnings

from book.show import in_notebook, note
from qwen.lang import tr


def proof(compare, *args, **kwargs):
    """Run `compare(transformers, *args, **kwargs)` (it prints the differences) and return what it returns; None,
    after one line, when transformers is not installed or (in a script) --proof was not given."""
    if not in_notebook() and "--proof" not in sys.argv[1:]:
        note(tr("the proof against transformers: rerun with --proof (needs pip install transformers)",
                "与 transformers 对照验证：加上 --proof 重新运行（需要先 pip install transformers）"))
        return None
    try:
        with warnings.catch_warnings():  # in a Jupyter kernel without ipywidgets, tqdm (imported with transformers)
            warnings.filterwarnings("ignore", "IProgress not found")  # warns it falls back to text bars: off below
            import transformers
    except ImportError:
        print(tr("transformers is not installed, so the comparison with it is skipped "
                 "(pip install -e '.[proofs]' to see it)",
                 "没有安装 transformers，跳过与它的对照（pip install -e '.[proofs]' 之后就能看到）"))
        return None
    transformers.utils.logging.disable_progress_bar()  # the proof prints differences, not a bar per loaded model
    return compare(transformers, *args, **kwargs)


def bf16_steps(ours, theirs):
    """The largest distance between two tensors in bf16 grid steps (spacing of bf16 numbers where they sit)."""
    import torch

    ours, theirs = ours.float(), theirs.float()
    scale = torch.maximum(ours.abs(), theirs.abs()).clamp_min(torch.finfo(torch.bfloat16).tiny)
    step = torch.pow(2.0, torch.floor(torch.log2(scale)) - 7)  # bf16 keeps 8 significant bits
    return float(((ours - theirs).abs() / step).max())


def difference(label, ours, theirs):
    """Print and return max |ours - theirs| (and, for bf16 tensors, how many bf16 steps that is)."""
    delta = float((ours.float() - theirs.float()).abs().max())
    steps = tr(f" = {bf16_steps(ours, theirs):g} bf16 steps", f" = {bf16_steps(ours, theirs):g} 个 bf16 步长") \
        if "bfloat16" in str(ours.dtype) else ""
    print(tr(f"{label}: max |ours - transformers| = {delta:.3g}{steps}",
             f"{label}：max |本课 − transformers| = {delta:.3g}{steps}"))
    return delta
