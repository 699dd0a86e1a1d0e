"""qwen.generate: the loop against transformers' generate, the sampling rules against transformers' logits warpers,
seeds, stop tokens, batching and streaming text.

The loop is exercised on two models with the pinned API (model(ids, cache, mask, last_only), new_cache()):
transformers' own model behind a thin adapter (so the loop is proven on its own), and qwen.model.
Run: pytest -q tests/test_generate.py (about a minute)."""
import json

import pytest
import torch

from qwen.checkpoint import open_checkpoint
from qwen.fast import load_fast
from qwen.generate import END_OF_TEXT, IM_END, TextStream, generate, pad_left
from qwen.model import load_model
from qwen.sampling import CARD, Sampling, filter_logits

N = 24  # new tokens compared with transformers

pytestmark = pytest.mark.usefixtures("one_thread")


class HFCache:
    def __init__(self, config):
        from transformers import DynamicCache

        self.hf, self.length = DynamicCache(config=config), 0


class HFAdapter(torch.nn.Module):
    """transformers' Qwen3.5 behind the course's model API: positions from the mask as transformers' generate
    computes them (cumsum of the mask minus one), the cache counted in tokens."""

    def __init__(self, hf):
        super().__init__()
        self.hf, self.cfg = hf, hf.config

    def new_cache(self):
        return HFCache(self.hf.config)

    def forward(self, input_ids, cache=None, mask=None, last_only=False):
        B, T = input_ids.shape
        past = cache.length if cache is not None else 0
        full = mask if mask is not None else torch.ones(B, past + T, dtype=torch.long)
        positions = (full.cumsum(-1) - 1).masked_fill(full == 0, 1)[:, -T:]
        out = self.hf(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=cache is not None,
                      past_key_values=None if cache is None else cache.hf, logits_to_keep=1 if last_only else 0)
        if cache is not None:
            cache.length += T
        return out.logits


@pytest.fixture(scope="module")
def adapter(hf_model):
    return HFAdapter(hf_model)


SMALL = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
             linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, tie_word_embeddings=True,
             rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                                  mrope_section=[1, 1, 0], mrope_interleaved=True))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 4-layer [L,L,L,F] transformers model with every parameter random (norms, A_log, dt_bias included), saved
    as a flat qwen3_5_text checkpoint so that qwen.model can load the same numbers."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(0)
    hf = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**SMALL)).float().eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name or "dt_bias" in name:
                p.normal_(0.3, 0.2)
            elif "A_log" in name:
                p.uniform_(0, 2)
            else:
                p.normal_(0, 1 / p.shape[-1] ** 0.5)
    path = tmp_path_factory.mktemp("small")
    hf.save_pretrained(path)
    return hf, path


@pytest.fixture(scope="module")
def small_adapter(small):
    return HFAdapter(small[0])


def hf_greedy(hf, prompts, n=N, pad_id=END_OF_TEXT):
    """transformers' generate(do_sample=False) on left-padded prompts: each row's new ids, cut after a stop token."""
    ids, mask = pad_left(prompts, pad_id)
    out = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, do_sample=False, pad_token_id=END_OF_TEXT,
                      eos_token_id=[IM_END, END_OF_TEXT])[:, ids.shape[1]:]
    rows = []
    for row in out.tolist():
        stops = [i for i, t in enumerate(row) if t in (IM_END, END_OF_TEXT)]
        rows.append(row[:stops[0] + 1] if stops else row)
    return rows


def ours_batched(model, prompts, n=N, pad_id=END_OF_TEXT, **kw):
    ids, mask = pad_left(prompts, pad_id)
    rows = [[] for _ in prompts]
    for step in generate(model, ids, n, mask=mask, **kw):
        for row, t in zip(rows, step):
            if t is not None:
                row.append(t)
    return rows


PROMPTS = [[248045, 846, 198, 9419, 11, 1814, 0], [5834, 248046, 198, 248045, 77091, 198, 248068, 271, 248069, 271]]
SMALL_PROMPTS = [[3, 17, 250, 9, 1, 400, 33], [1, 2, 3], list(range(100, 140)), [77]]


@pytest.fixture(scope="module")
def synthetic_want(hf_model):
    return hf_greedy(hf_model, PROMPTS)


@pytest.fixture(scope="module")
def small_want(small):
    return hf_greedy(small[0], SMALL_PROMPTS, pad_id=0)


def qwen_model(who, folder):
    """qwen.model as it is ("qwen"), or its fast path, qwen/fast.py ("fast"), in fp32."""
    return load_fast(folder, dtype=torch.float32) if who == "fast" else load_model(folder, dtype=torch.float32)


@pytest.mark.slow
@pytest.mark.parametrize("who", ["adapter", "qwen", "fast"])
def test_greedy_equals_transformers_generate(who, hf_model, adapter, synthetic, synthetic_want):
    """24 greedy tokens, token for token: our loop on transformers' model (the loop alone), then on qwen.model and
    on its fast path."""
    model = adapter if who == "adapter" else qwen_model(who, synthetic)
    for p, w in zip(PROMPTS, synthetic_want):
        assert list(generate(model, p, N)) == w  # one prompt at a time
    assert ours_batched(model, PROMPTS) == synthetic_want  # left-padded batch with a mask
    assert any(len(w) == N for w in synthetic_want)  # the comparison ran the full length on some prompt


@pytest.mark.parametrize("who", ["adapter", "qwen", "fast"])
def test_greedy_equals_transformers_generate_small(who, small, small_adapter, small_want):
    """Small random config (every parameter random), prompts of 1 to 40 tokens, alone and as a batch."""
    model = small_adapter if who == "adapter" else qwen_model(who, small[1])
    for p, w in zip(SMALL_PROMPTS, small_want):
        assert list(generate(model, p, N)) == w
    assert ours_batched(model, SMALL_PROMPTS, pad_id=0) == small_want
    assert all(len(w) == N for w in small_want)  # the small vocabulary has no stop token: full length everywhere


def test_stop_and_limits(small_adapter):
    adapter = small_adapter
    first = list(generate(adapter, SMALL_PROMPTS[0], 5, stop=[]))
    assert len(first) == 5
    # stops after yielding the stop id
    assert list(generate(adapter, SMALL_PROMPTS[0], 5, stop=[first[2]])) == first[:3]
    with pytest.raises(ValueError, match="max_new_tokens=0"):  # as transformers' generate: at least one new token
        list(generate(adapter, SMALL_PROMPTS[0], 0))
    with pytest.raises(ValueError, match="empty"):
        list(generate(adapter, [], 3))


def test_seed_is_reproducible(small_adapter):
    adapter = small_adapter
    rules = Sampling(temperature=1.0, top_k=50, top_p=0.9, seed=7)
    a = list(generate(adapter, SMALL_PROMPTS[1], 12, rules, stop=[]))
    assert a == list(generate(adapter, SMALL_PROMPTS[1], 12, rules, stop=[]))
    assert a != list(generate(adapter, SMALL_PROMPTS[1], 12, rules.but(seed=8), stop=[]))
    # top_k=1 leaves one token: sampling becomes greedy
    assert list(generate(adapter, SMALL_PROMPTS[1], 8, Sampling(temperature=0.7, top_k=1, seed=1), stop=[])) == \
        list(generate(adapter, SMALL_PROMPTS[1], 8, stop=[]))


def test_presence_penalty(small_adapter):
    """A huge penalty forbids repeats: every token of the reply is new (greedy, so nothing else changes)."""
    out = list(generate(small_adapter, SMALL_PROMPTS[1], 16, Sampling(presence_penalty=1e4), stop=[]))
    assert len(set(out)) == len(out) == 16


class Fixed(torch.nn.Module):
    """A model whose next-token logits are `logits` (B, V) at every step, whatever it reads (fewer rows: the first
    ones): only the sampling rules move the pick."""

    def __init__(self, logits):
        super().__init__()
        self.logits, self.cfg = torch.nn.Parameter(logits, requires_grad=False), None

    def new_cache(self):
        return None

    def forward(self, input_ids, cache=None, mask=None, last_only=False):
        return self.logits[:len(input_ids), None].expand(-1, input_ids.shape[1], -1)  # one prompt: the first row


def penalised_greedy(logits, n, penalty):
    """The oracle, by hand: at each step the argmax of the logits minus `penalty` at every token this call has already
    produced, once however often; the prompt counts for nothing."""
    out = []
    for _ in range(n):
        scores = [x - penalty * (i in out) for i, x in enumerate(logits)]
        out.append(scores.index(max(scores)))
    return out


def test_presence_penalty_against_a_hand_oracle():
    """A flat penalty on each token already generated in this call, however often, never on the prompt's tokens. The
    logits 5.0 (token 1) and 4.6 (token 2) with a penalty of 0.5: 1, then 2 (4.5 < 4.6), then 1 for good (4.5 > 4.1).
    Counting each occurrence (a frequency penalty) gives 1, 2, 1, 2, ...; counting the prompt's token 1 starts with 2.
    With temperature 1 and top-k 1 the draw keeps only the penalised argmax: the penalty comes before top-k."""
    logits = torch.tensor([[0.0, 5.0, 4.6, 1.0, 0.0, 0.0], [3.0, 0.0, 0.5, 3.3, 0.0, 0.0]])
    want = [penalised_greedy(row.tolist(), 8, 0.5) for row in logits]
    assert want == [[1, 2, 1, 1, 1, 1, 1, 1], [3, 0, 3, 3, 3, 3, 3, 3]]  # worked out above; row 1: 3.3, 3.0, 2.8
    model = Fixed(logits)
    prompts = torch.tensor([[1, 1, 2, 3], [3, 3, 3, 0]])  # the prompts hold the tokens the replies pick
    for sampling in (Sampling(presence_penalty=0.5), Sampling(temperature=1.0, top_k=1, presence_penalty=0.5, seed=0)):
        got = list(generate(model, prompts, 8, sampling, stop=[]))
        assert [list(row) for row in zip(*got, strict=True)] == want
        assert list(generate(model, prompts[0], 8, sampling, stop=[])) == want[0]  # one prompt alone
    assert list(generate(model, prompts[0], 8, stop=[])) == [1] * 8  # greedy, no penalty: the argmax every time


def test_card_settings():
    """The model card's recommendations for Qwen3.5, by mode; greedy is the default."""
    assert Sampling() == Sampling(0.0, None, None, None, 0.0, None) and Sampling().greedy
    assert Sampling.card(False) == Sampling(temperature=1.0, top_k=20, top_p=1.0, min_p=0.0, presence_penalty=2.0)
    assert Sampling.card(True) == Sampling(temperature=1.0, top_k=20, top_p=0.95, min_p=0.0, presence_penalty=1.5)
    assert Sampling.card(True, seed=3).seed == 3 and Sampling.card(True).but(top_k=None, seed=4).top_k == 20
    assert CARD[False]["presence_penalty"] == 2.0


@pytest.mark.parametrize("rule", ["temperature", "top_k", "top_p", "min_p", "all"])
def test_rules_equal_transformers_warpers(rule):
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 1000, generator=g) * 3
    logits[0, :10] = 5.0  # ties at the top
    kw = {"temperature": dict(temperature=0.6), "top_k": dict(top_k=20), "top_p": dict(top_p=0.8),
          "min_p": dict(min_p=0.05), "all": dict(temperature=0.7, top_k=40, top_p=0.95, min_p=0.02)}[rule]
    warpers = []
    if "temperature" in kw:
        warpers.append(TemperatureLogitsWarper(kw["temperature"]))
    if "top_k" in kw:
        warpers.append(TopKLogitsWarper(kw["top_k"]))
    if "top_p" in kw:
        warpers.append(TopPLogitsWarper(kw["top_p"]))
    if "min_p" in kw:
        warpers.append(MinPLogitsWarper(kw["min_p"]))
    want = logits.clone()
    for w in warpers:
        want = w(None, want)
    got = filter_logits(logits, **kw)
    assert torch.equal(torch.isinf(got), torch.isinf(want))  # the same tokens cut
    torch.testing.assert_close(got.softmax(-1), want.softmax(-1), rtol=1e-5, atol=1e-7)


def test_ranges_are_transformers_warpers_ranges():
    """A Sampling takes a value exactly when transformers' warper for it does, but for two values: temperature 0 is
    greedy here (transformers' warper wants T > 0 and leaves greedy to do_sample=False), and top_p 0, which cuts
    every token here (NaN probabilities), is refused as TopPLogitsWarper's message says (> 0; its check lets 0 pass,
    and it then keeps one token)."""
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = {"temperature": TemperatureLogitsWarper, "top_k": TopKLogitsWarper, "top_p": TopPLogitsWarper,
               "min_p": MinPLogitsWarper}
    values = {"temperature": [-1.0, -1e-9, 0.0, 1e-9, 0.7, 1.0, 5.0], "top_k": [-1, 0, 1, 20, 10 ** 6],
              "top_p": [-0.1, 0.0, 1e-9, 0.5, 1.0, 1.0000001, 2.0], "min_p": [-0.1, 0.0, 0.05, 1.0, 1.1]}
    declared = {("temperature", 0.0): True, ("top_p", 0.0): False}  # ours, where the two part

    def accepts(make, *args, **kwargs):
        try:
            make(*args, **kwargs)
            return True
        except ValueError:
            return False

    for name, warper in warpers.items():
        for value in values[name]:
            theirs = declared.get((name, value), accepts(warper, value))
            assert accepts(Sampling, **{name: value}) == theirs, (name, value)


def test_top_p_keeps_the_token_that_crosses():
    """Hand example: p = 0.5, 0.3, 0.2. top_p=0.6 keeps 2 tokens (0.5 < 0.6, 0.5 + 0.3 >= 0.6); top_p=0.5 keeps 1."""
    logits = torch.tensor([[0.5, 0.3, 0.2]]).log()
    assert torch.isinf(filter_logits(logits, top_p=0.6)).tolist() == [[False, False, True]]
    assert torch.isinf(filter_logits(logits, top_p=0.5)).tolist() == [[False, True, True]]
    assert torch.isinf(filter_logits(logits, top_k=2)).tolist() == [[False, False, True]]


def test_checkpoint_stop_tokens(synthetic, tmp_path):
    assert open_checkpoint(synthetic).stop == {IM_END, END_OF_TEXT}
    config = json.loads((synthetic / "config.json").read_text())
    config["text_config"]["eos_token_id"] = 5  # the multimodal layout's own eos, beside the top level's
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [248046, 248044, 7]}')
    assert open_checkpoint(tmp_path).stop == {IM_END, END_OF_TEXT, 5, 7}


TEXTS = ["你好，世界！今天天气很好。", "emoji: 👍🏽 👩‍👩‍👧‍👦 🇯🇵 ❤️‍🔥 done", "混合 text 和 😀 表情\n<|im_end|>"]


@pytest.mark.parametrize("text", TEXTS)
def test_streaming_never_splits_a_character(tok, text):
    ids = tok.encode(text)
    for sequence in (ids, byte_level_ids(tok, text)):
        stream = TextStream(tok)
        pieces = [stream.push(i) for i in sequence] + [stream.flush()]
        assert "".join(pieces) == tok.decode(sequence) == text
        assert not any("\ufffd" in p for p in pieces)


def byte_level_ids(tok, text):
    """The text as one token per UTF-8 byte (byte-level BPE has a token for each of the 256 bytes)."""
    from qwen.make_tokenizer import byte_to_unicode

    table = byte_to_unicode()
    out = []
    for part in text.split("<|im_end|>"):
        out += [tok.token_to_id(table[b]) for b in part.encode("utf-8")] + [IM_END]
    return out[:-1]


def test_inference_mode_only_for_a_cache_of_its_own(small):
    """generate without a cache runs its steps under torch.inference_mode (autograd's bookkeeping skipped), and the
    mode does not leak into the caller between steps; with the caller's cache it runs under no_grad, so that cache
    can be fed again outside it (an inference tensor cannot be updated in place outside the mode)."""
    model = load_fast(small[1], torch.float32)
    seen = []
    hook = model.register_forward_hook(lambda m, a, out: seen.append(torch.is_inference_mode_enabled()))
    steps = generate(model, [1, 2, 3], 3, stop=[])
    for _ in steps:
        assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()  # the caller's own mode
    assert seen == [True] * 3
    seen.clear()
    cache = model.new_cache()
    assert len(list(generate(model, [1, 2, 3], 3, stop=[], cache=cache))) == 3 and seen == [False] * 3
    hook.remove()
    with torch.no_grad():
        model(torch.tensor([[4]]), cache=cache)  # the caller's cache, fed again under no_grad
