"""qwen/speculative.py: speculative greedy is plain greedy token for token, whatever the draft (the MTP head, one that
is always right, one that is always wrong); after any accept/reject pattern every cache is what a plain pass over
the accepted tokens leaves; speculative sampling draws from the main model's distribution.

The oracle for the tokens and the caches is qwen.generate's plain loop (itself proven against transformers'
generate in tests/test_generate.py); for the sampling test, the exact distribution computed from the main model's
logits."""
import copy

import pytest
import torch

from hf_checkpoint import SMALL
from qwen import kernel
from qwen.draft import MTPDraft, Scripted, follow
from qwen.fast import load_fast
from qwen.generate import generate, pad_left
from qwen.model import load_model
from qwen.mtp import load_mtp
from qwen.sampling import Picker, Sampling, filter_logits
from qwen.speculative import Rollback, accept, speculate

pytestmark = pytest.mark.usefixtures("one_thread")

N = 48  # new tokens compared
PROMPTS = [[5, 17, 3, 99, 250, 8, 41], [7, 300, 12, 6], [1, 2, 3, 4, 5, 6, 7, 8, 9]]


def models(small, synthetic):
    return {"synthetic": synthetic, **small}


def with_mtp(model, folder):
    model.mtp = load_mtp(folder, model)  # the checkpoint's MTP block, for MTPDraft
    return model


@pytest.fixture(scope="module")
def loaded(small, synthetic):
    out = {}
    for name, folder in models(small, synthetic).items():
        out[name] = load_model(folder, dtype=torch.float32)
        out[name].mtp = load_mtp(folder, dtype=torch.float32)  # attached in the open
    return out


def run(model, prompts, n=N, draft=None):
    """Plain greedy (draft None) or speculative greedy for one prompt (a list) or a left-padded batch (a list of
    lists)."""
    ids, mask = (prompts, None) if isinstance(prompts[0], int) else pad_left(prompts, pad_id=0)
    if draft is None:
        return list(generate(model, ids, n, stop=[], mask=mask))
    return list(speculate(model, ids, n, draft, stop=[], mask=mask))


def drafts(model, plain, kind, k):
    """The draft named `kind`, k guesses per step, for the plain output `plain` (a list of ints or of per-step
    lists)."""
    if kind == "mtp":
        return MTPDraft(model, k)  # the model's MTP head
    reference = torch.tensor(plain).reshape(len(plain), -1).T  # (B, N)
    return Scripted(follow(reference, wrong=(lambda n, i: True) if kind == "wrong" else (lambda n, i: False)), k)


CASES = [pytest.param(name, batch, k, kind, marks=[] if (name, k) == (next(iter(SMALL)), 2) else [pytest.mark.slow])
         for name in ["synthetic", *SMALL] for batch in (False, True) for k in (1, 2, 4)
         for kind in ("mtp", "right", "wrong")
         if name != "synthetic" or (not batch and (k == 2 or kind == "mtp")) or (k == 2 and kind == "mtp")]
# the synthetic checkpoint (its real head, V = 248k, is slow): every kind of draft at k = 2, its MTP head at each k
# and batched; the small ones, everything (the default tier: the first small checkpoint at k = 2, alone and
# batched, each kind of draft; the rest with --all)


@pytest.fixture(scope="module")
def plain_runs():
    return {}  # (model name, batched) -> plain greedy output, computed once for the cases that share it


@pytest.mark.parametrize("name, batch, k, kind", CASES)
def test_greedy_equals_plain_greedy(loaded, plain_runs, name, batch, k, kind):
    model = loaded[name]
    prompts = PROMPTS if batch else PROMPTS[0]
    if (name, batch) not in plain_runs:
        plain_runs[name, batch] = run(model, prompts)
    plain = plain_runs[name, batch]
    assert run(model, prompts, draft=drafts(model, plain, kind, k)) == plain


@pytest.mark.slow
def test_fast_path_greedy_equals_plain(synthetic):
    model = load_fast(synthetic, dtype=torch.float32)
    model.mtp = load_mtp(synthetic, dtype=torch.float32)
    plain = run(model, PROMPTS)
    for k, kind in ((2, "mtp"), (4, "right")):
        assert run(model, PROMPTS, draft=drafts(model, plain, kind, k)) == plain


@pytest.mark.slow
@pytest.mark.parametrize("quant", ["int8", "q8_0", "q4_0"])
def test_quantized_fast_path_greedy_equals_plain(synthetic, quant):
    """The chat's --quant with --speculative: the quantized layers keep the names of the projections a rollback
    replays. One prompt at a time: a padded batch runs attention through the teaching kernel, whose matrix products
    round a verify pass's rows in another order than one row's, and a quantized model rounds each activation to a
    grid, where such a last-bit difference can move a code a whole step (random weights then swap near-tie tokens)."""
    model = load_fast(synthetic, dtype=torch.float32, quant=quant, quiet=True)
    model.mtp = load_mtp(synthetic, dtype=torch.float32)
    for prompt in PROMPTS:
        plain = run(model, prompt)
        for k, kind in ((2, "mtp"), (4, "right")):
            assert run(model, prompt, draft=drafts(model, plain, kind, k)) == plain, (prompt, k, kind)


def test_stop_tokens_end_rows_as_plain_decoding(loaded):
    """A stop token inside an accepted run ends that row there (None afterwards), the others go on."""
    model = loaded[next(iter(SMALL))]
    plain = run(model, PROMPTS, 24)
    stop = [plain[9][0], plain[15][1]]  # the 10th token of row 0, the 16th of row 1
    ids, mask = pad_left(PROMPTS, pad_id=0)
    want = list(generate(model, ids, 24, stop=stop, mask=mask))
    for kind in ("right", "mtp"):
        got = list(speculate(model, ids, 24, drafts(model, plain, kind, 3), stop=stop, mask=mask))
        assert got == want and any(None in step for step in got)


def cache_distance(got, want):
    """The largest difference between two caches relative to the entry's scale, per kind: (KV, DeltaNet). Shapes and
    lengths must match exactly."""
    assert got.length == want.length
    worst = {"kv": 0.0, "deltanet": 0.0}
    for a, b in zip(got.layers, want.layers):
        kind, pairs = ("kv", ((a.k, b.k), (a.v, b.v))) if hasattr(a, "k") else \
            ("deltanet", ((a.conv, b.conv), (a.state, b.state)))
        for x, y in pairs:
            assert x.shape == y.shape
            worst[kind] = max(worst[kind], (x - y).abs().max().item() / y.abs().max().item())
    return worst


def cache_equal(got, want):
    """Whether two caches hold the same tokens and the same entries, bit for bit: each KV layer's length, keys and
    values, each DeltaNet layer's conv window and state."""
    def entries(c):
        return (c.length, c.k, c.v) if hasattr(c, "k") else (c.conv, c.state)
    return got.length == want.length and all(
        x == y if isinstance(x, int) else torch.equal(x, y)
        for a, b in zip(got.layers, want.layers, strict=True) for x, y in zip(entries(a), entries(b), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_caches_after_every_accept_reject_pattern(loaded, name):
    """Each step accepts a scripted number of guesses (0 .. k); stopping after every count of new tokens (so also
    inside a step), every cache must be the one plain decoding leaves after the same tokens: KV and DeltaNet (conv
    window and state) the same shapes, values within 1e-5 of their scale in fp32, the bound tests/test_deltanet.py
    proves between the chunked and recurrent kernels (a verify pass runs the chunked one over k + 1 tokens, plain
    decoding the recurrent one token by token; measured up to 1.6e-6). Keeping a rejected token, or one token too
    few, moves the caches by far more: checked below."""
    model, k = loaded[name], 3
    accepted = [0, 3, 1, 2, 0, 0, 3, 2, 1, 3]  # guesses accepted in step j: every count, every neighbour
    # One plain run of 31 tokens: when it yields its n-th token, its cache holds what generate(n) leaves (the prompt
    # and n - 1 tokens: the last one is never fed), so a copy taken then is that cache; checked below against fresh
    # runs, bit for bit.
    plain, plains, cache = [], [], model.new_cache()
    for token in generate(model, PROMPTS[0], 31, stop=[], cache=cache):
        plain.append(token)
        plains.append(copy.deepcopy(cache))
    for n in (1, 11, 30):
        fresh = model.new_cache()
        assert list(generate(model, PROMPTS[0], n, stop=[], cache=fresh)) == plain[:n]
        assert cache_equal(fresh, plains[n - 1]), n
    reference = torch.tensor([plain])
    worst = {"kv": 0.0, "deltanet": 0.0}
    for n in range(1, 30):
        cache = model.new_cache()
        draft = Scripted(follow(reference, wrong=lambda step, i: i >= accepted[step % len(accepted)]), k)
        got = list(speculate(model, PROMPTS[0], n, draft, stop=[], cache=cache))
        assert got == plain[:n]
        d = cache_distance(cache, plains[n - 1])
        worst = {kind: max(worst[kind], d[kind]) for kind in worst}
    print(f"worst distance from the plain caches: {worst}")
    assert max(worst.values()) <= 1e-5
    one_more = plains[10]  # 11 tokens' cache: a DeltaNet state that kept one token too many
    one_more.length -= 1
    for c in one_more.layers:
        if hasattr(c, "k"):
            c.length -= 1
    assert cache_distance(one_more, plains[9])["deltanet"] > 100 * 1e-5


@pytest.mark.slow
def test_sampling_draws_from_the_main_model(loaded):
    """2,000 rows of one prompt, two tokens each, k = 2 with the (random, so mostly wrong) MTP head as the draft: the
    second token went through the accept / residual rule. The joint (first, second) frequencies against the exact
    p(a) p(b | a) over the top tokens (top_k = 3, so 9 cells): total variation below 0.06, where sampling noise alone
    gives about 0.5 Σ sqrt(2 p (1 − p) / (π n)) ≈ 0.02 (the 2,000 rows cost a chunk of 64 positions each in every
    DeltaNet layer; the rule itself gets 200,000 draws below)."""
    model = loaded[next(iter(SMALL))]
    rows, prompt, rules = 2_000, PROMPTS[1], dict(temperature=1.0, top_k=3)
    out = torch.tensor(list(speculate(model, torch.tensor([prompt] * rows), 2, MTPDraft(model, 2),
                                      Sampling(**rules, seed=0), stop=[]))).T  # (rows, 2)
    with torch.no_grad():
        p1 = filter_logits(model(torch.tensor([prompt]))[:, -1], **rules).softmax(-1)[0]  # (V,)
        firsts = p1.nonzero()[:, 0]
        p2 = filter_logits(model(torch.tensor([prompt + [int(a)] for a in firsts]))[:, -1], **rules).softmax(-1)
    V = p1.shape[0]
    exact = torch.zeros(V, V)
    exact[firsts] = p1[firsts, None] * p2
    counts = torch.zeros(V * V).index_add_(0, out[:, 0] * V + out[:, 1], torch.ones(rows)).view(V, V) / rows
    tv = 0.5 * (counts - exact).abs().sum().item()
    print(f"total variation, joint of the first two tokens, {rows} draws: {tv:.4f}")
    assert tv < 0.06


def test_acceptance_rule_keeps_p():
    """The rule alone: p and q fixed over 5 tokens (q far from p), k = 1, 200,000 rows in one call (each row's first
    new token is its own: the guess if its rule accepted it, else a draw from its residual). Its distribution must
    be p: TV < 0.01, noise ≈ 0.002. The named mistakes move it far more (exact values for these p, q): accepting
    only when p ≥ q gives TV 0.23, drawing the rejected case from p instead of the residual 0.19."""
    rows, pick = 200_000, Picker(Sampling(temperature=1.0, seed=0))
    g = pick.generator  # the call's generator draws the guesses, then the rule's uniforms and residual draws
    p_logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0], [0.0] * 5]).expand(rows, 2, 5)  # (rows, k + 1, V)
    q = torch.tensor([0.05, 0.15, 0.5, 0.2, 0.1]).expand(rows, 1, 5)  # (rows, k, V)
    guesses = torch.multinomial(q[:, 0], 1, generator=g)  # (rows, 1): drawn from q
    first = accept(guesses, p_logits, q, pick, torch.ones(rows, dtype=torch.bool))[:, 0]
    freq = torch.bincount(first, minlength=5).float() / rows
    tv = 0.5 * (freq - p_logits[0, 0].softmax(-1)).abs().sum().item()
    print(f"acceptance rule: TV {tv:.4f}")
    assert tv < 0.01


def test_bad_arguments_are_one_clear_error(loaded, small):
    model = loaded[next(iter(SMALL))]
    for k in (0, -1, 1.5):
        with pytest.raises(ValueError, match="at least 1"):
            MTPDraft(model, k)
        with pytest.raises(ValueError, match="at least 1"):
            Scripted(follow(torch.tensor([[1, 2]])), k)
    with pytest.raises(ValueError, match="presence_penalty"):
        list(speculate(model, [1, 2], 4, MTPDraft(model, 2), Sampling(presence_penalty=1.0)))
    bare = load_model(small[next(iter(SMALL))], dtype=torch.float32)  # no MTP head attached
    assert bare.mtp is None  # generate and speculate read no file to find one
    with pytest.raises(ValueError, match="no MTP head"):
        MTPDraft(bare, 2)
    plain = list(generate(bare, [1, 2], 8))
    assert list(speculate(bare, [1, 2], 8, MTPDraft(bare, 2, mtp=model.mtp))) == plain  # the block given explicitly


class WholeMixerRollback(Rollback):
    """The replay this course used before, kept here as the reference: a pre-hook keeps each DeltaNet mixer's input,
    and keep(m) runs the whole mixer again on its first m rows (every projection, the output included)."""

    def __enter__(self):
        self.inputs = {}

        def recorder(i):
            def record(module, args):
                self.inputs[i] = (args[0], args[2])  # the mixer's input (B, T, d) and its mask (B, T) or None
            return record

        self.hooks = [layer.linear_attn.register_forward_pre_hook(recorder(i))
                      for i, layer in enumerate(self.model.layers) if layer.kind == "linear_attention"]
        return self

    def keep(self, m):
        if m == self.cache.length - self.start:
            return
        for i, (layer, c) in enumerate(zip(self.model.layers, self.cache.layers)):
            if layer.kind == "full_attention":
                c.length = self.start + m
            else:
                c.conv, c.state = self.saved[i]
                h, mask = self.inputs[i]
                if m:
                    layer.linear_attn(h[:, :m].contiguous(), c, None if mask is None else mask[:, :m])
        self.cache.length = self.start + m


def rolled_back(model, rollback, m, calls=None):
    """A padded batch of two prompts, a verify pass of 5 tokens, `rollback`(...).keep(m), then one more token: (the
    cache, the next logits). calls, a list, gets one entry per projection (nn.Linear) run inside keep."""
    ids, mask = pad_left(PROMPTS[:2], pad_id=0)
    cache = model.new_cache()
    model(ids, cache=cache, mask=mask)
    verify = torch.tensor([[12, 6, 1, 2, 3], [7, 7, 40, 9, 11]])
    mask = torch.cat([mask, mask.new_ones(2, 5)], 1)
    with rollback(model, cache) as saved:
        model(verify, cache=cache, mask=mask)
    hooks = [module.register_forward_hook(lambda *_: calls.append(1)) for module in model.modules()
             if isinstance(module, torch.nn.Linear)] if calls is not None else []
    saved.keep(m)
    for hook in hooks:
        hook.remove()
    mask = torch.cat([mask[:, :-5], mask.new_ones(2, m + 1)], 1)
    return cache, model(torch.tensor([[77], [78]]), cache=cache, mask=mask)[:, -1]


@pytest.mark.slow
@pytest.mark.parametrize("path, dtype", [("teaching", torch.float32), ("fast", torch.float32),
                                         ("teaching", torch.bfloat16), ("fast", torch.bfloat16)])
def test_replay_equals_the_whole_mixer_rerun(synthetic, shallow, path, dtype):
    """The replay runs only each DeltaNet layer's memory on the projections the verify pass computed; re-running
    the whole mixer on the kept inputs (the reference above, the course's earlier rollback, itself held to plain
    decoding by the tests above) must leave the same conv windows and states and give the same next logits, for
    every count kept (0 .. 5, a padded batch): bit for bit in bf16 (on the 4-layer copy: a bit is equal or not at
    any depth), within 1e-5 of the entry's scale in fp32 (on the 24 layers, which carry a small difference on: the
    verify pass's products over 5 rows and the reference's over m rows may sum in another order; measured up to
    7e-6 there, 1.8e-6 on the 4 layers). A replay that skipped the kept tokens or kept a rejected one is off by far
    more: checked below."""
    model = (load_model if path == "teaching" else load_fast)(synthetic if dtype == torch.float32 else shallow,
                                                              dtype=dtype)
    for m in range(6):
        (ours, got), (theirs, want) = (rolled_back(model, R, m) for R in (Rollback, WholeMixerRollback))
        assert ours.length == theirs.length
        pairs = [(a.conv, b.conv) for a, b in zip(ours.layers, theirs.layers) if hasattr(b, "conv")] + \
                [(a.state, b.state) for a, b in zip(ours.layers, theirs.layers) if hasattr(b, "state")] + [(got, want)]
        for x, y in pairs:
            if dtype == torch.bfloat16:
                assert torch.equal(x, y), m
            else:
                assert (x - y).abs().max() <= 1e-5 * y.abs().max(), m
    short, _ = rolled_back(model, Rollback, 2)
    longer, _ = rolled_back(model, Rollback, 3)
    state = next(c.state for c in longer.layers if hasattr(c, "state"))
    assert (next(c.state for c in short.layers if hasattr(c, "state")) - state).abs().max() > 1e-2 * state.abs().max()


@pytest.mark.slow
@pytest.mark.parametrize("path", ["teaching", "fast"])
def test_replay_runs_no_projection(shallow, path):
    """A rollback's replay reads no projection weight (ρ in chapter 11): no nn.Linear runs inside keep(m) for any
    m, where the whole-mixer rerun runs 5 per DeltaNet layer on the teaching path (in_proj_qkv, z, b, a, out_proj)
    and 2 on the fast one (the joined in_proj, out_proj)."""
    model = (load_model if path == "teaching" else load_fast)(shallow, dtype=torch.float32)
    linear = model.cfg.layer_types.count("linear_attention")
    for m in (1, 3):
        ours, theirs = [], []
        rolled_back(model, Rollback, m, ours)
        rolled_back(model, WholeMixerRollback, m, theirs)
        assert len(ours) == 0 and len(theirs) == linear * (5 if path == "teaching" else 2)


@pytest.mark.slow
@pytest.mark.parametrize("quant", ["q8_0", "q4_0"])
def test_kernel_verify_pass_is_decode_bit_for_bit(synthetic, quant):
    """Chapter 13's model: a verify pass of 3 tokens after a cache gives each position the logits 3 decode steps
    give, bit for bit: its products, norms and DeltaNet steps take each row alone, and attention reads each query
    over its own keys, as decode does (one masked call over the 3 rows rounded some of them otherwise: measured
    0.006 apart on q4_0, enough to move an activation's code and swap a near-tie token)."""
    model = load_fast(synthetic, dtype=torch.float32, quant=quant, quiet=True)
    if not any(getattr(m, "fused", False) for m in model.modules()):
        pytest.skip("the C++ kernel is not built here: " + str(kernel.why_not()))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(16):
            ids = torch.randint(0, 240000, (1, 12), generator=g)
            cache = model.new_cache()
            model(ids[:, :9], cache=cache)
            verify = model(ids[:, 9:], cache=cache)
            cache = model.new_cache()
            model(ids[:, :9], cache=cache)
            decode = torch.cat([model(ids[:, t:t + 1], cache=cache) for t in range(9, 12)], dim=1)
            assert torch.equal(verify, decode), (verify - decode).abs().max()
