"""Chapter 9: generation and chat — prefill, decode with the cache, sampling, the chat format.

Run: python chapters/ch09_generate.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch09_generate.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 9 · Generation and chat
#
# The model of chapter 8 maps token ids to next-token logits. To make it talk, a loop reads the prompt once
# (**prefill**), then produces one token at a time (**decode**), feeding each new token back with the **cache**
# so that nothing is computed twice. Between the logits and the next token sit the **sampling rules**; around the
# whole conversation sits the **chat format** the model was trained on. This chapter writes `qwen/sampling.py`,
# `qwen/generate.py`, `qwen/chat.py`, the conversation session and the terminal chat (`bash course.sh chat`), and
# measures why decoding is slow.

# %%

import torch

import book
from book import ch09
from qwen import measure
from qwen.chat import render
from qwen.config import Config
from qwen.course import chapter_args
from qwen.family import cache_bytes
from qwen.fast import load_fast
from qwen.generate import checkpoint_stop_tokens, generate
from qwen.model import load_model
from qwen.sampling import Sampling, filter_logits
from qwen.sizes import REAL_NAME, real_config
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer

args = chapter_args(__doc__)
cfg = Config.load(args.path)
real = real_config()
dev = args.device
dtype = torch.float32 if dev.type == "cpu" else None  # a CPU multiplies fp32 faster than bf16; elsewhere bf16
model = load_model(args.path, dtype=dtype, device=dev)
tok = load_tokenizer(args.path)
SYNTHETIC = " (synthetic weights: random tokens)" if is_synthetic(args.path) else ""
torch.manual_seed(0)

# %%
book.show("ch09-map", book.model_map.draw, "generate")

# %% [markdown]
# ## 1. Prefill once, then one token at a time
# `generate(model, ids, n)` calls the model on the whole prompt with an empty cache, takes the last position's
# logits, picks a token, and from then on calls the model on that single token with the cache. Greedy decoding
# (temperature 0, the default) takes the argmax; sampling draws from the softmax, with the rules and the seed of a
# `Sampling` (`qwen/sampling.py`) given as `generate(model, ids, n, sampling)`. A seed makes a draw repeatable.

# %%
prompt = "The capital of France is"
ids = tok.encode(prompt)
stop = checkpoint_stop_tokens(args.path)
greedy = list(generate(model, ids, 8, stop=stop))
print(f"prompt {prompt!r} = {len(ids)} tokens {ids}")
print(f"greedy {SYNTHETIC}: {tok.decode(greedy)!r}")
card = Sampling.card(thinking=True)  # the model card's settings with thinking: T 1.0, top-k 20, top-p 0.95, ...
sampled = {seed: list(generate(model, ids, 8, card.but(seed=seed), stop=stop)) for seed in (1, 2)}
for seed, out in sampled.items():
    print(f"sampled, seed {seed}{SYNTHETIC}: {tok.decode(out)!r}")
print(f"seed 1 again gives the same tokens: {list(generate(model, ids, 8, card.but(seed=1), stop=stop)) == sampled[1]}")

# %% [markdown]
# ## 2. The sampling rules
# Each rule reshapes the next-token distribution before the draw, in this order (`qwen/sampling.py`: `penalise`,
# then `filter_logits`):
#
# - the **presence penalty** subtracts a constant from the logit of every token already generated, once however
#   often it appeared. transformers has no presence penalty (its `repetition_penalty` divides instead); the rule and
#   its place, before the others, are vLLM's and OpenAI's;
# - then transformers' order of its sampling warpers: **temperature** T divides the logits (T < 1 sharpens, T > 1
#   flattens, T → 0 is greedy); **top-k** keeps the k most likely tokens; **top-p** keeps the most likely tokens
#   until their mass reaches p (the token that crosses p stays); **min-p** keeps the tokens whose probability is at
#   least min_p times the most likely one's.
#
# Cut tokens get logit −inf, and a single softmax at the end renormalises what is left. One difference from
# transformers remains: when several tokens have exactly the same probability at the top-p boundary, which of them
# survive depends on the sort, and ours (descending) can keep a different one than transformers' (ascending).
# The Qwen3.5 model card recommends, without thinking, T = 1.0, top-p 1.0, top-k 20, min-p 0, presence penalty 2.0;
# with thinking, T = 1.0, top-p 0.95, top-k 20, min-p 0, presence penalty 1.5; with thinking for precise coding,
# T = 0.6, top-p 0.95, top-k 20, min-p 0, presence penalty 0. `Sampling.card(thinking)` holds the first two.

# %%
with torch.no_grad():
    logits = model(torch.tensor([ids], device=dev), last_only=True)[0, -1].float().cpu()  # (V,)
for name, kw in (("original", {}), ("+ top-k 20", dict(top_k=20)), ("+ top-p 0.95", dict(top_k=20, top_p=0.95)),
                 ("T = 0.6 too", dict(temperature=0.6, top_k=20, top_p=0.95))):
    p = filter_logits(logits[None], **kw).softmax(-1)[0]
    print(f"{name:12s}: {int((p > 0).sum()):7,} tokens left, most likely {tok.decode([int(p.argmax())])!r} "
          f"at {p.max():.1%}{SYNTHETIC}")

# %%
book.show("ch09-sampling", ch09.sampling_rules, logits, lambda i: tok.decode([i]),
          title=f"The next token after {prompt!r}, with the model card's settings{SYNTHETIC}")

# %% [markdown]
# **Try it first:** exercise 214 asks for the rules as one function, and the presence penalty. Start it with
# `python practice/judge.py start 214`, or write the two functions in the cell below (in the notebook) and run it.


# %%
def sampling_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    raise NotImplementedError  # your code here


def presence_penalty(logits: torch.Tensor, generated: list[list[int]], penalty: float) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(214, sampling_probs, presence_penalty)

# %% [markdown]
# ### The finished modules: `qwen/sampling.py` and `qwen/generate.py`
# One `Picker` turns a step's logits into a token for plain decoding here and for speculative decoding in chapter 11.

# %%
book.listing("qwen/sampling.py")

# %%
book.listing("qwen/generate.py")

# %% [markdown]
# Two details matter for batches. Prompts of different lengths are **left**-padded, so every row's last token sits
# in the last column, and a mask (1 = real token) tells the model to skip the pads: attention masks them out,
# DeltaNet zeroes them (so its state stays exactly 0 until the real text starts), and positions count real tokens
# only. Each row then produces exactly the tokens it would produce alone (tests/test_generate.py checks this
# against transformers' `generate`). And streaming: a Chinese character is 3 UTF-8 bytes and an emoji 4, which
# byte-level BPE may split across tokens; `TextStream` holds text back while it ends in a half-made character.

# %%
from qwen.generate import TextStream  # noqa: E402  (shown where it is explained)

stream = TextStream(tok)
pieces = [stream.push(i) for i in tok.encode("你好 👍🏽")] + [stream.flush()]
print(f"'你好 👍🏽' is {len(tok.encode('你好 👍🏽'))} tokens; streamed pieces: {pieces}")

# %% [markdown]
# ## 3. The chat format
# A chat model reads a conversation as one text with markers: each turn is `<|im_start|>role\n…<|im_end|>\n`, and
# the prompt ends with `<|im_start|>assistant\n` plus a thinking block — empty and closed when thinking is off,
# just opened when it is on. Earlier replies keep only their answer: their reasoning is dropped. The markers are
# single special tokens (ids 248044 and up), marked [like this] below.

# %%
chat = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nA greeting.\n</think>\n\nHello! How can I help?"},
        {"role": "user", "content": "What is 2 + 2?"}]
text = render(chat)
chat_ids = tok.encode(text)
print(text)
print(f"{len(chat_ids)} tokens:", " ".join(f"[{tok.decode([i])}]" if i >= 248044 else repr(tok.decode([i]))[1:-1]
                                          for i in chat_ids))
print("thinking on, the prompt ends with:", repr(render(chat, thinking=True)[-30:]))

# %% [markdown]
# **Try it first:** exercise 215 asks for the format by hand. Start it with `python practice/judge.py start 215`.


# %%
def render_chat(messages: list[dict], add_generation_prompt: bool = True, thinking: bool = False) -> str:
    raise NotImplementedError  # your code here


book.attempt(215, render=render_chat)  # the starter calls it render: qwen.chat.render is imported above

# %%
book.listing("qwen/chat.py")

# %% [markdown]
# The conversation session, `qwen/session.py`, puts it together: it renders the conversation, keeps the cache
# across turns — up to and including the last `<|im_start|>assistant\n`, the part of the prompt that stays the
# same in the next turn — and decodes with the model card's settings. The terminal chat, `app/chat.py` (outside the
# model package: a program, not a part of the model), drives it: `bash course.sh chat` (or `python main.py chat`)
# streams replies and prints tokens per second. `/think on|off|hide`,
# `/reset`; Ctrl-C stops the reply and drops the unanswered message from the conversation, without leaving.
#
# ## 4. Prefill against decode
# A prefill multiplies every weight matrix by T token vectors at once: each weight read from memory serves T tokens,
# so the processor's arithmetic is the limit. A decode step multiplies every weight by **one** vector: each weight
# is read for a single multiply-add, so the time is set by how fast memory delivers the weights — and the caches:
# each step also reads every cached key and value and every DeltaNet state. Bytes read divided by the rate at which
# this machine reads memory estimates the floor of one step: an estimate, because the measured rate is one stream's
# (a sum over 256 MiB), and real kernels read at their own rates (below). The clocks and the rates are
# `qwen/measure.py`'s: a GPU runs behind the Python that queues its work, so every timing waits for the device
# (`measure.sync`) before the clock starts and before it stops.

# %%
T, n = 64, 8
x = torch.randint(0, 248044, (1, T), device=dev)
prefill_s, decode_s = measure.time_model(model, x, n)  # each timed with the device synchronised
weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
copy, read = measure.copy_bandwidth(dev), measure.read_bandwidth(dev)  # bytes moved (read + written) / s; read / s
step_cache = sum(cache_bytes(cfg, 8 + n // 2, next(model.parameters()).element_size()))  # mid-decode
print(f"this checkpoint on {dev}{' (synthetic: narrow, so overheads dominate)' if SYNTHETIC else ''}: prefill "
      f"{prefill_s / T * 1e3:.2f} ms per token, decode {decode_s / n * 1e3:.2f} ms per token")
print(f"this machine copies 1 GB (reads 1 GB and writes 1 GB) in {2e9 / copy * 1e3:.0f} ms, and reads 1 GB in "
      f"{1e9 / read * 1e3:.0f} ms")
print(f"weights {weight_bytes / 1e6:.1f} MB + caches {step_cache / 1e6:.2f} MB read per decode step: at least "
      f"{(weight_bytes + step_cache) / read * 1e3:.2f} ms (an estimate)")
real_bytes = 752_393_024 * 2  # the real 0.8B's text parameters in bf16 (the tied head read once)
real_cache = sum(cache_bytes(real, 1024))  # K, V of 1,024 tokens and the DeltaNet states
rate = measure.matmul_rate(dev)  # FLOPs per second of a (64, 1024) @ (1024, 3584) fp32 product, the MLP's shape
layer_weights = 752_393_024 - 248_320 * 1_024  # all but the embedding table: a prefill's head sees one position
print(f"real Qwen3.5-0.8B in bf16: {real_bytes / 1e9:.2f} GB of weights + {real_cache / 2 ** 20:.1f} MiB of caches "
      f"at 1,024 tokens per decode step, so here a step takes at least {(real_bytes + real_cache) / read * 1e3:.0f} ms "
      f"(an estimate), however fast the arithmetic")
print(f"a prefill needs about 2 FLOPs per layer weight per token (the head runs for the last position only): at the "
      f"rate of an fp32 product of the MLP's shape, {2 * layer_weights / rate * 1e3:.1f} ms per token here "
      f"(an estimate)")

# %%
book.show("ch09-prefill-decode", ch09.prefill_vs_decode,
          {f"prefill\n({T} tokens in one call)": prefill_s / T, f"decode\n({n} calls of 1 token)": decode_s / n,
           "read bound\n(weights + caches)": (weight_bytes + step_cache) / read},
          {"prefill\n(2 FLOPs per layer weight ÷ rate)": 2 * layer_weights / rate,
           "decode floor, bf16\n(weights + caches ÷ read rate)": (real_bytes + real_cache) / read},
          title=f"Time per token on {dev}{' (synthetic weights: narrow, so overheads dominate)' if SYNTHETIC else ''}")

# %% [markdown]
# ### The teaching model and the fast path
# The modules of chapters 2–8 say one equation per line, and a processor pays for that: every line is a separate
# call, and a decode step makes a few hundred of them. `qwen/fast.py` runs the same weights with fewer and cheaper
# calls: the projections that read the same input joined into one matrix, stacked from the checkpoint's tensors
# when `load_fast` reads them (a model of its own: it shares no tensor with `model`, so an experiment on one never
# reaches the other); bf16 prompts multiplied in fp32 on a CPU without bf16 instructions, where bf16 products
# are several times slower; torch's fused attention; the DeltaNet state updated in place; and with `last_only`, the
# last layer computed for the last position only. `tests/test_fast.py` proves it equal to transformers with the
# teaching model's tolerances, and greedy generation through it gives transformers' tokens. The chat uses it.

# %%
fast = load_fast(args.path, dtype=dtype, device=dev)  # the same checkpoint, loaded once more: its own weights
fast_prefill_s, fast_decode_s = measure.time_model(fast, x, n)
print(f"this checkpoint on {dev}{' (synthetic)' if SYNTHETIC else ''}, per token, teaching / fast: prefill "
      f"{prefill_s / T * 1e3:.2f} ms / {fast_prefill_s / T * 1e3:.2f} ms, decode {decode_s / n * 1e3:.2f} ms / "
      f"{fast_decode_s / n * 1e3:.2f} ms (one run each: timings on a shared machine are noisy)")

# %% [markdown]
# `bench/bench_model.py` measures both at the real 0.8B's shapes against transformers, and reports decode as a
# fraction of the bound. It also measures the ceiling that matters more: a single large matrix-vector product, the
# kernel a decode step is made of, does not always read memory as fast as a copy does. Which kernel the CPU library
# picks for a given processor and dtype can set the decode speed more than the model code does.
#
# ## 5. The cache as the conversation grows
# The full-attention layers (6 of 24) keep keys and values for every token: they grow linearly. The DeltaNet layers
# (18 of 24) keep a fixed (Hv, dk, dv) state and a K−1 conv window, whatever the length: this is why Qwen3.5 can hold
# long conversations in little memory (chapter 7).

# %%
cache = model.new_cache()
with torch.no_grad():
    model(torch.tensor([chat_ids], device=dev), cache=cache)
held = ch09.held_bytes(cache)  # the keys and values written so far, the conv windows and the states
reserved = ch09.held_bytes(cache, buffers=True)  # the KV buffers keep room for more tokens (chapter 6)
kv, state = cache_bytes(cfg, len(chat_ids), next(model.parameters()).element_size())
print(f"this checkpoint after {len(chat_ids)} tokens: cache holds {held / 1024:.1f} KiB (in buffers of "
      f"{reserved / 1024:.1f} KiB, room to grow without copying); by the formula {kv / 1024:.1f} KiB of keys and "
      f"values + {state / 1024:.1f} KiB of DeltaNet state")
for tokens in (1_000, 32_000, 262_144):
    kv, state = cache_bytes(real, tokens)
    print(f"real Qwen3.5-0.8B, {tokens:7,} tokens: KV {kv / 2 ** 20:8.1f} MiB (bf16) + DeltaNet state "
          f"{state / 2 ** 20:.1f} MiB")

# %%
book.show("ch09-cache", ch09.cache_growth, [(REAL_NAME, real)])

# %% [markdown]
# ## Try this
#
# - Generate with `Sampling(temperature=0.3, seed=1)` and then `temperature=1.5`: how quickly do the texts part ways?
# - Put `top_p=0.5` on a prompt whose next token is nearly certain, then on an open one: count the tokens left.
# - In the chat (`bash course.sh chat`), say something, then `/think on`, then ask again: the generation prompt
#   shrinks from 4 tokens (`<think>`, `\n\n`, `</think>`, `\n\n`: an empty, closed block) to 2 (`<think>`, `\n`),
#   and the tokens read from the cache are printed after each reply.
#
# ## Show the proof
# Greedy decoding of this checkpoint against transformers' `generate(do_sample=False)` on the same weights: the
# same token ids, one by one (tests/test_generate.py does this alone and in left-padded batches).


# %%
def compare(transformers, path):
    # transformers' notices: its fused kernels (flash-linear-attention, causal-conv1d) are not installed, so it runs
    # its reference PyTorch code — the one compared here — and says so; and a progress bar while loading
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    want = hf.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, eos_token_id=sorted(stop),
                       pad_token_id=248044)[0, len(ids):].tolist()
    ours = list(generate(load_model(path, dtype=torch.float32), ids, 8, stop=stop))
    print(f"greedy 8 tokens: transformers {want}\n                 ours         {ours}\n"
          f"identical: {want[:len(ours)] == ours}")


book.proof(compare, args.path)

# %% [markdown]
# ## Summary
#
# - Generation is prefill once, then one token per call with the cache: DeltaNet layers carry a fixed state, the
#   full-attention layers their growing keys and values.
# - Temperature divides the logits; top-k, top-p and min-p cut tokens to −inf; one softmax renormalises; the presence
#   penalty discourages repeats. Greedy is the argmax. A seed makes sampling repeatable.
# - The chat format: `<|im_start|>role\n…<|im_end|>\n` turns, a generation prompt with a thinking block, old
#   reasoning dropped; stop at `<|im_end|>` (248046) and `<|endoftext|>` (248044).
# - Decode reads every weight and every cache per token: its speed is at most the memory's read rate over those
#   bytes (an estimate: real kernels read slower than a plain stream).
# - The fast path (`qwen/fast.py`) computes the same model with fewer, cheaper calls, proven equal.
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | prompt ids | (B, T) | |
# | prefill logits (last position) | (B, 1, V) | (B, 1, 248320) |
# | decode input | (B, 1) | |
# | KV cache, per full-attention layer | 2 × (B, Hkv, S, D) | 2 × (B, 2, S, 256) |
# | DeltaNet state, per linear layer | (B, Hv, dk, dv) fp32 | (B, 16, 128, 128) |
# | mask for left-padded batches | (B, S) | |

# %%
book.notation(args.path)

# %% [markdown]
# ### Exercises
# 214 · sampling (renormalising before the cut, temperature after the softmax, top-p keeping one token too few);
# 215 · the chat format (missing generation prompt, the thinking block on the wrong turn).

# %%
book.attempt(214)
book.attempt(215)

# %% [markdown]
# ## How to explain it
#
# 1. **The loop.** A language model only scores the next token. Generation asks it again and again, each time with
#    one more token; the cache keeps what the layers computed for earlier tokens so each step costs one token.
# 2. **Sampling.** Greedy text is repetitive; sampling from the full softmax wanders into nonsense. Temperature,
#    top-k and top-p trim the unlikely tail and set how adventurous the draw is; a presence penalty keeps it from
#    repeating itself.
# 3. **Speed.** Prefill is compute-bound (many tokens share each weight read); decode is memory-bound (every token
#    reads every weight). Smaller weights (bf16, quantisation) make each step faster. Decoding several streams at
#    once (batching) shares each weight read among them: it raises the total tokens per second, not the speed of
#    one stream.
#
# ## Files
#
# ```
# qwen/
# ├── …               (chapters 1–8)
# ├── sampling.py     + the sampling rules, one picker, the model card's settings
# ├── generate.py     + the generation loop, streaming text
# ├── fast.py         + the fast path: the same model with fewer, cheaper calls
# ├── kernels.py      + its in-place kernels (the DeltaNet conv and decode step, grouped attention)
# ├── measure.py      + timings that wait for the device, the memory-bandwidth probes
# ├── chat.py         + the chat format
# ├── chat_tools.py   + tools and tool calls in the chat format
# └── session.py      + the conversation session: the cache kept across turns
# app/
# └── chat.py         + the terminal chat (bash course.sh chat)
# book/
# └── ch09.py         + this chapter's figures
# bench/
# └── bench_model.py  + the whole model against transformers, and the bandwidth bound
# chapters/
# └── ch09_generate.py + this chapter's script
# practice/
# ├── 214_sampling/   + exercise 214
# └── 215_chat_format/ + exercise 215
#
# + new in this chapter · unmarked: from an earlier chapter
# ```
