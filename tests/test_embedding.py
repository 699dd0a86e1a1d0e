"""qwen/embedding.py against transformers' embedding and lm_head on the same checkpoint (fp32 and bf16)."""
import pytest
import torch

from qwen.config import Config
from qwen.embedding import Embedding, head_logits
from qwen.weights import Weights, fill


@pytest.fixture(scope="module")
def ours(synthetic):
    cfg = Config.load(synthetic)
    return fill(Embedding(cfg.vocab_size, cfg.hidden_size), Weights(synthetic), "embed_tokens.")


def test_lookup_equals_transformers(ours, hf_model):
    ids = torch.tensor([[0, 1, 248044, 248319], [5, 5, 100000, 7]])
    assert torch.equal(ours(ids), hf_model.get_input_embeddings()(ids))


def test_tied_head_equals_transformers(ours, hf_model):
    h = torch.randn(2, 3, ours.weight.shape[1], generator=torch.Generator().manual_seed(0))
    got, want = head_logits(h, ours.weight), hf_model.lm_head(h)
    print(f"fp32 logits max |diff| = {(got - want).abs().max():.2e}")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


def test_bf16_head_equals_transformers(ours, hf_model):
    h = torch.randn(4, ours.weight.shape[1], generator=torch.Generator().manual_seed(1)).bfloat16()
    got = head_logits(h, ours.weight.bfloat16())
    want = torch.nn.functional.linear(h, hf_model.lm_head.weight.bfloat16())  # what the bf16 model's head computes
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)


def test_by_hand():
    """Hand math: with E = [[1, 0], [0, 2], [1, 1]], the row of id 1 is (0, 2) and h = (1, 1) scores (1, 2, 2)."""
    emb = Embedding(3, 2)
    with torch.no_grad():
        emb.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]))
    assert emb(torch.tensor([1])).tolist() == [[0.0, 2.0]]
    assert head_logits(torch.tensor([1.0, 1.0]), emb.weight).tolist() == [1.0, 2.0, 2.0]


def test_out_of_range_id_is_a_clear_error(ours):
    with pytest.raises(IndexError, match=r"token ids must lie in \[0, 248320\), got 3\.\.248320"):
        ours(torch.tensor([3, 248320]))


def test_negative_id_is_caught(ours):
    """The reason for the check: torch indexing wraps a negative id to a row from the end, with no error."""
    assert torch.equal(ours.weight[torch.tensor([-1])][0], ours.weight[ours.weight.shape[0] - 1])
    with pytest.raises(IndexError, match=r"got -1\.\.3"):
        ours(torch.tensor([3, -1]))


def test_untied_head_is_the_same_product():
    """An untied lm_head (2B and up) goes through the same function: logits = h · lm_headᵀ, as nn.Linear computes."""
    g = torch.Generator().manual_seed(2)
    head, h = torch.randn(50, 8, generator=g), torch.randn(3, 8, generator=g)
    torch.testing.assert_close(head_logits(h, head), torch.nn.functional.linear(h, head), rtol=1e-6, atol=1e-6)


def test_padding_rows_get_a_logit(ours):
    """The 243 rows past the tokenizer's 248,077 ids are never looked up, but the head scores them at every position."""
    h = torch.randn(2, 5, ours.weight.shape[1], generator=torch.Generator().manual_seed(3))
    logits = head_logits(h, ours.weight)
    assert logits.shape[-1] == 248320 and logits[..., 248077:].shape[-1] == 243
    assert (logits[..., 248077:] != 0).all()


@pytest.mark.parametrize("tied", [True, False])
def test_which_rows_training_updates(tied):
    """The claim of chapter 2: with a tied head every row gets a gradient at every step (through the softmax), even
    rows never looked up or predicted; with an untied head an input row of a token absent from the batch gets none."""
    g = torch.Generator().manual_seed(4)
    E = torch.randn(10, 4, generator=g, requires_grad=True)
    head = E if tied else torch.randn(10, 4, generator=g, requires_grad=True)
    ids, targets = torch.tensor([1, 2, 3]), torch.tensor([2, 3, 4])  # rows 0 and 5..9 are never used
    loss = torch.nn.functional.cross_entropy(head_logits(E[ids], head), targets)
    loss.backward()
    touched = (E.grad.abs().sum(-1) > 0).tolist()
    assert touched == ([True] * 10 if tied else [False, True, True, True] + [False] * 6)

