"""Helpers that several test files use (no test imports another test file): the repository root, work shared by
the test workers, running a chapter script, a problem's functions, a synthetic picture, the tokenizer's sample
texts, the official chat templates, and the small checkpoints' numerics.

Fixtures live in conftest.py; what is plain Python lives here (`from helpers import ...`)."""
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from official_templates import TEMPLATES, TEMPLATES_VAR

ROOT = Path(__file__).resolve().parent.parent
WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1" under pytest -n; None in a plain run


# ---------------------------------------------------------------- work shared by the workers, chapter scripts

@contextlib.contextmanager
def locked(path):
    """An exclusive lock on the file `path` while the block runs, across processes: fcntl on Linux and macOS,
    msvcrt on Windows (which it retries: msvcrt gives up after 10 s, and a chapter run takes longer)."""
    with open(path, "a+b") as f:
        if os.name == "nt":
            import msvcrt  # Windows only

            while True:
                try:
                    f.seek(0)
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl  # POSIX only

            fcntl.flock(f, fcntl.LOCK_EX)
            yield  # closing the file releases the lock


def shared_once(tmp_path_factory, key, make):
    """make() run once per test run, its JSON-able result shared by every worker: the first worker to ask makes it
    under a lock, the others wait for the lock and read the file. Without workers it is simply made once."""
    root = tmp_path_factory.getbasetemp()
    root = root.parent if WORKER else root  # each worker's folder sits in the run's folder
    file = root / "shared" / f"{key}.json"
    file.parent.mkdir(exist_ok=True)
    with locked(file.with_suffix(".lock")):
        if not file.exists():
            file.write_text(json.dumps(make()))
    return json.loads(file.read_text())


def run_chapter(script, *args):
    """Run chapters/<script> as a learner would: (exit code, stdout, stderr)."""
    r = subprocess.run([sys.executable, str(ROOT / "chapters" / script), *args], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    return r.returncode, r.stdout, r.stderr


def fewer_layers(checkpoint, out, layers):
    """A copy of the checkpoint folder `checkpoint` (the synthetic one) at `out` that keeps only its first `layers`
    decoder layers: config.json's text config cut to match (the pattern unchanged), the other layers' tensors left
    out; the widths, the vocabulary and head, the MTP block, the tower and the tokenizer are the same. For claims that
    do not depend on depth, at a fraction of the cost (deriving it takes well under a second, where
    qwen.synthetic.generate(layers=...) draws every tensor and writes the tokenizer again)."""
    from safetensors.torch import load_file, save_file

    checkpoint, out = Path(checkpoint), Path(out)
    out.mkdir(parents=True)
    config = json.loads((checkpoint / "config.json").read_text())
    text = config["text_config"]
    text.update(num_hidden_layers=layers, layer_types=text["layer_types"][:layers])
    (out / "config.json").write_text(json.dumps(config, indent=2))

    def kept(name):
        deeper = re.match(r"model\.language_model\.layers\.(\d+)\.", name)
        return not deeper or int(deeper.group(1)) < layers
    index = json.loads((checkpoint / "model.safetensors.index.json").read_text())
    index["weight_map"] = {k: f for k, f in index["weight_map"].items() if kept(k)}
    total = 0
    for file in sorted(checkpoint.iterdir()):
        if file.suffix == ".safetensors":
            tensors = {k: v for k, v in load_file(file).items() if kept(k)}
            total += sum(v.numel() * v.element_size() for v in tensors.values())
            save_file(tensors, out / file.name, metadata={"format": "pt"})
        elif file.name not in ("config.json", "model.safetensors.index.json"):
            shutil.copy(file, out / file.name)
    index["metadata"] = dict(index.get("metadata", {}), total_size=total)
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return out


def functions(path, *names):
    """The functions `names` of the Python file at `path` (a problem's solution or a wrong one), imported by path."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [getattr(module, n) for n in names]


def mistake_file(number, key, folder):
    """Practice problem `number`'s known mistake `key` (an entry of its mistakes.toml), written out as a learner's
    file in `folder`: the path."""
    from practice.problems import problems

    (mistake,) = [m for m in problems()[number].mistakes if m.key == key]
    path = Path(folder) / f"{number}_{key}.py"
    path.write_text(mistake.source(), encoding="utf-8")
    return path


def graded_both_ways(prob, path):
    """{"command line": report, "notebook": report}: the learner's file at `path` graded by the judge in a child
    process, and as a notebook cell that holds the file's code (the problem's functions, nothing else of it)."""
    from practice.child import run_file
    from practice.judge import grade_in_process

    cell = types.ModuleType("notebook")
    exec(compile(Path(path).read_text(encoding="utf-8"), "<cell>", "exec"), vars(cell))
    functions = {name: getattr(cell, name) for name in prob.functions}
    return {"command line": run_file(prob, path), "notebook": grade_in_process(prob, functions)}


def assert_graded_as_its_entry_says(prob, key, folder, at_least=0):
    """Known mistake `key` of problem `prob`, written out in `folder` and graded both ways (`graded_both_ways`): the
    verdict its entry expects; a rejected file is rejected by at least `at_least` cases and by as many as a
    "cases>=N" mark asks, and shows every hint the entry names on the case that rejects it first."""
    (mistake,) = [m for m in prob.mistakes if m.key == key]
    verdict, marks = mistake.expectation()
    for way, report in graded_both_ways(prob, mistake_file(prob.number, key, folder)).items():
        failure = report.failure
        assert report.verdict == verdict, (way, report.verdict, failure and (failure.case.label, failure.hints))
        if verdict == "AC":
            continue
        rejecting = [r.case.label for r in report.results if r.verdict != "AC"]
        assert len(rejecting) >= at_least, (way, rejecting)
        for mark in marks:
            if mark.startswith("cases>="):
                assert len(rejecting) >= int(mark[7:]), (way, rejecting)
            elif not mark.startswith("!"):
                assert mark in failure.hints, (way, failure.case.label, failure.hints)


# ---------------------------------------------------------------- pictures and text the tests read

def picture(width, height, mode="RGB", seed=0):
    """A synthetic photo: gradients plus noise, so resampling and channel order both show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([255 * x / max(width - 1, 1), 255 * y / max(height - 1, 1), 128 + 0 * x], -1)
    rgb = np.clip(rgb + rng.normal(0, 30, rgb.shape), 0, 255).astype(np.uint8)
    if mode == "RGBA":
        rgb = np.concatenate([rgb, rng.integers(0, 256, (height, width, 1), dtype=np.uint8)], -1)
    return Image.fromarray(rgb, "RGBA" if mode == "RGBA" else "RGB").convert(mode)


# Text the tokenizer tests encode (test_tokenizer, test_bpe): scripts, combining marks, code, digits and emoji
SAMPLES = [
    # English, contractions (the regex splits 's 'll 're case-insensitively)
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, isn't it? WE'RE DONE.",
    # Chinese and other scripts
    "你好，世界！今天天气很好。",
    "我们去加拿大旅游吧",
    "加拿大",  # one token, yet no merge builds it: only a whole-piece vocabulary lookup finds it
    "こんにちは、世界 안녕하세요 Привет, мир مرحبا بالعالم",
    # combining marks: the Qwen3.5 regex keeps \p{M} inside words
    "नमस्ते दुनिया Tiếng Việt",
    "e\u0301cole a\u0323\u0306",  # decomposed; NFC composes them
    "\u0b94\u0325\u0c3c",  # marks out of canonical order; Python's NFC sorts them, tokenizers' NFC does not
    # code
    'def f(x):\n    return {"a": [1, 2]}  # comment\n',
    "for (int i = 0; i < n; ++i) { s += a[i]; }",
    # digits: one token each
    "12345", "3.14159", "1,000,000 on 2024-06-01",
    # emoji: skin tone, ZWJ family, flags, variation selector
    "👍🏽 ok", "👩‍👩‍👧‍👦", "🇯🇵🇫🇷", "❤️‍🔥",
    # whitespace runs and newlines
    "a  b   c\n\n\nd\t\te \r\n", "   leading", "trailing   ", "\n\n", " \n \n ",
    # added-token text is parsed as the token
    "<|im_start|>user\nhi<|im_end|>",
    "<think>\nreasoning\n</think>\n\nanswer",
    "<|endoftext|>", "<tool_call>{}</tool_call>",
]


# ---------------------------------------------------------------- the official chat templates



def _local_checkpoints():
    """Real checkpoints already on this machine (never downloaded here): $QWEN_MODEL when it is a folder,
    data/Qwen3.5-*/, and the Qwen3.5 snapshots in the Hugging Face cache."""
    found = []
    if os.environ.get("QWEN_MODEL") and Path(os.environ["QWEN_MODEL"]).expanduser().is_dir():
        found.append(Path(os.environ["QWEN_MODEL"]).expanduser())
    found += sorted((ROOT / "data").glob("Qwen3.5-*"))
    cache = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME") or Path.home() / ".cache" /
                                                       "huggingface") / "hub")
    found += sorted(cache.glob("models--Qwen--Qwen3.5-*/snapshots/*"))
    return found


def chat_template(name):
    """The official chat template `name` (a key of TEMPLATES) as text, checked against its sha256. Found in the
    folder $QWEN_CHAT_TEMPLATES (.ci/run sets it where the course's test fixtures are at hand), else in a real
    checkpoint already on this machine that ships it; otherwise the test is skipped, saying how to provide it. A
    folder named by $QWEN_CHAT_TEMPLATES that lacks the file fails the test: the setting is wrong, not absent."""
    digest = TEMPLATES[name][0]
    folder = os.environ.get(TEMPLATES_VAR)
    if folder:
        path = Path(folder).expanduser() / name
        assert path.is_file(), f"${TEMPLATES_VAR} is {folder}, which has no {name}"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} is not the official template"
        return path.read_text(encoding="utf-8")
    from qwen.checkpoint import checkpoint_template

    for checkpoint in _local_checkpoints():
        text = checkpoint_template(checkpoint)
        if text is not None and hashlib.sha256(text.encode("utf-8")).hexdigest() == digest:
            return text
    pytest.skip(f"the official chat template {name} is not here: set {TEMPLATES_VAR} to a folder that holds it, or "
                f"download a real Qwen3.5 checkpoint that ships it ({'0.8B or 2B' if '0.8b' in name else '4B+'})")


# ---------------------------------------------------------------- the small checkpoints' numerics

B, T = 2, 150  # longer than two DeltaNet chunks of 64


def fp32_tol(reference):
    """1e-4, or 1e-5 of the logits' scale when they are larger: fp32 rounding is relative."""
    return max(1e-4, 1e-5 * reference.abs().max().item())


def bf16_steps(got, want):
    """Per row (the last dim), max |got − want| in bf16 steps at the row's scale: 2^(⌊log2 max|want|⌋ − 7), the
    spacing of bf16 numbers as large as the row's largest (for logits: per position, (B, T))."""
    scale = want.abs().amax(-1, keepdim=True)
    return ((got - want).abs() / 2.0 ** (torch.floor(torch.log2(scale)) - 7)).amax(-1)


def ids_for(vocab, seed=0, shape=(B, T)):
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def run_in_pieces(model, ids, pieces, mask=None):
    cache, out, start = model.new_cache(), [], 0
    for n in pieces:
        m = None if mask is None else mask[:, :start + n]
        out.append(model(ids[:, start:start + n], cache=cache, mask=m))
        start += n
    assert start == ids.shape[1] and cache.length == start
    return torch.cat(out, 1)


def left_padded(rows, pad=0):
    """Left-pad token lists into one batch, as generate does: (ids, mask)."""
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def left_padding_error(ours, theirs):
    """Max |diff| of the real tokens' logits, and its tolerance, for a left-padded batch run by `ours` and by
    transformers with the same mask and generate's positions (cumsum(mask) - 1)."""
    ids, mask = left_padded([ids_for(512, seed=5, shape=(1, 100))[0].tolist(), [7, 8, 9, 10, 11]])
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        got = ours(ids, mask=mask)
        want = theirs(ids, attention_mask=mask, position_ids=positions).logits
    real = mask.bool()
    err = (got[real] - want[real]).abs().max().item()
    print(f"left-padded batch vs transformers: max |diff| on real tokens = {err:.2e}")
    return err, fp32_tol(want[real])


# the figures each notebook draws: the name given to book.show -> whether its title says "synthetic weights" on the
# synthetic checkpoint: only where random weights would give the figure another shape than the real model's
FIGURES = {
    "ch01_weights": {"ch01-map": False, "ch01-layers": True, "ch01-params": True},
    "ch02_embedding": {"ch02-map": False, "ch02-bpe-cjk": False, "ch02-row-norms": True,
                       "ch02-head": True},
    "ch03_norm": {"ch03-map": False, "ch03-rms": True, "ch03-scales": True, "ch03-bf16": False, "ch03-gate": False},
    "ch04_rope": {"ch04-map": False, "ch04-angles": False, "ch04-score": False, "ch04-mrope": False},
    "ch05_mlp": {"ch05-map": False, "ch05-activations": False, "ch05-gates": True},
    "ch06_attention": {"ch06-map": False, "ch06-maps": True, "ch06-gate": True, "ch06-kv-bytes": False},
    "ch07_deltanet": {"ch07-map": False, "ch07-memory": False, "ch07-gates": True, "ch07-state": True,
                      "ch07-chunk": True, "ch07-toy-gamma": False, "ch07-bill": False},
    "ch08_model": {"ch08-map": False, "ch08-pattern": False, "ch08-residual": True, "ch08-lens": True,
                   "ch08-shares": True},
    "ch09_generate": {"ch09-map": False, "ch09-sampling": True, "ch09-prefill-decode": True, "ch09-cache": False},
    "ch10_vision": {"ch10-map": False, "ch10-patches": False, "ch10-positions": False, "ch10-mrope": False,
                    "ch10-bill": False},
    "ch11_mtp": {"ch11-map": False, "ch11-loop": False, "ch11-rollback": False, "ch11-speedup": True},
    "ch12_quant": {"ch12-map": False, "ch12-bound": False, "ch12-bits": True, "ch12-classes": True,
                   "ch12-output": True, "ch12-decode": False},
    "ch13_kernel": {"ch13-map": False, "ch13-steps": False},
}
# a notebook cell whose output differs from the script's by design: a figure, a listing, an exercise, the proof
MODE_DEPENDENT = re.compile(r"\bbook\.(show|listing|attempt|proof)\(")


def stdout_of(cells):
    """What the code cells of an executed notebook printed."""
    return "".join(o.text for c in cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def notebook_of_cells(path, *cells):
    """A notebook at `path` whose code cells are `cells` (source text), written out: the path."""
    import nbformat

    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    return path


def shared_stdout(nb):
    """What the cells a script runs too printed (not a MODE_DEPENDENT one, which a script shows as one NOTE line)."""
    return stdout_of([c for c in nb.cells if not MODE_DEPENDENT.search(c.source)])


# what differs from run to run: a time, a rate measured on the machine, a measured share of a bound, a thread count
TIMING = re.compile(r" *\d+(\.\d+)?\s*(ms\b|毫秒|s\b|秒|tok/s|token/s|tokens/s|GB/s)"  # with the spaces that pad it
                    r"|\d+% of (it|the stream|the read probe)\b|(达到|是数据流的|是读带宽探测值的) \d+%"
                    r"|\d+ threads\b|\d+ 个线程")  # chapter 13: a share of the read probe, torch's thread count


def masked(text):
    """`text` with its timings (TIMING) masked: they differ from run to run."""
    return TIMING.sub("_", text)


def speaking(code, text, **kwargs):
    """text(**kwargs) as the course says it in the language `code`."""
    from qwen import lang

    spoken = lang.language()
    try:
        lang.use(code)
        return text(**kwargs)
    finally:
        lang.use(spoken)


def as_the_script_prints(nb, code):
    """What an executed notebook printed in the language `code`, as its script prints it: shared_stdout, with the
    notebook's banner (it says how a notebook picks the model) in the script's words."""
    from qwen.synthetic import banner

    return shared_stdout(nb).replace(speaking(code, banner, notebook=True), speaking(code, banner, notebook=False))


# English a Chinese run may keep: the glossary's kept terms, the names of tools and formats, units, language codes,
# the chat roles, and the commands a line tells the learner to type
KEPT_ENGLISH = set("""
token tokens logits logit lens kernel kernels patch patches teacher forcing top-k top-p min-p softmax silu relu swiglu
rmsnorm layernorm l2norm delta transformers safetensors torch pytorch numpy gguf ninja pip python bash git jupyter
colab chromium matplotlib modelscope huggingface hf synthetic bf16 bfloat16 fp32 fp16 float32 float64 int8 int4 cpu
cuda mps ms en zh locale cos sin max min argmax vs dk dv user assistant system think on off hide lab test list show
start chat help quit reset limit history image drop all config id ids nat traceback one-hot in out rotate-half
""".split())
CODE_IN_A_LINE = re.compile(
    r"`[^`]*`|'[^'\n]*'|\"[^\"\n]*\"|“[^”]*”|‘[^’]*’|https?://\S+|(?<![\w-])--?[A-Za-z][\w-]*"  # code, quotes, a flag
    r"|\bfrom \S+ import \S+|\b(?:git|pip install) \S+|^\s*def .*|.*<\|im_.*|Ġ.*"  # code, a command, a template
    r"|\S*[/\\_.=<>\[\]{}()|#:]\S*|\b[\w-]*[A-Z0-9][\w-]*\b"  # a path or an identifier, a name, a number
    r"|\b[0-9a-f]{2}\b|\b[thw]{3,}\b")  # bytes in hex, M-RoPE's axes (t, h, w) spelled out
TRACEBACK = re.compile(r'\s*File ".*", line \d+')
ENGLISH_RUN = re.compile(r"\b[a-z][a-z-]+(?:\s+[a-z][a-z-]+)*\b")


def english_left(text):
    """The English a Chinese run left in its lines: each run of English words outside code, quotes, identifiers,
    names written with a capital or a digit, a traceback's frames, and the words a Chinese line keeps
    (KEPT_ENGLISH). [(run, line)]."""
    left, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if TRACEBACK.match(line) or (i and TRACEBACK.match(lines[i - 1])):
            continue  # a traceback's frame and its line of code
        for run in ENGLISH_RUN.findall(CODE_IN_A_LINE.sub(" 。 ", line)):
            if any(word.lower() not in KEPT_ENGLISH for word in run.split()):
                left.append((run, line.strip()[:160]))
    return left


def kernel_under_test():
    """The compiled C++ kernels to test: qwen/kernel.py's build, or, with KERNEL_UNDER_TEST set to the path of a
    copy of one of qwen/csrc's files with a bug planted in it (the copy's name ending in the name of the file it
    replaces: /tmp/swap_rows8.cpp replaces rows8.cpp), that copy built with the other files and qwen/kernel.py's
    flags as an extension of its own. Skips the calling test where no build works."""
    from torch.utils import cpp_extension  # imports setuptools: only where a kernel is tested

    from qwen import kernel

    planted = os.environ.get("KERNEL_UNDER_TEST")
    if not planted:
        module = kernel.load(quiet=True)
        if module is None:
            pytest.skip(kernel.why_not())
        return module
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]  # the venv's ninja
    _, cflags, ldflags = kernel.BUILDS[0]
    sources = [planted if planted.endswith(p.name) else str(p) for p in kernel.SOURCES]
    assert planted in sources, f"name the copy after the file it replaces, one of {[p.name for p in kernel.SOURCES]}"
    return cpp_extension.load(f"kernel_planted_{Path(planted).stem}", sources, extra_cflags=cflags,
                              extra_ldflags=ldflags)
