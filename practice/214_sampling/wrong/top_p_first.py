"""A wrong solution to problem 214. top-p before top-k, on the whole distribution."""
import torch


def sampling_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    """Probabilities (B, V) fp32 after temperature, then top-k, then top-p; cut tokens get exactly 0."""
    logits = logits.float() / temperature  # on the logits: softmax(l / T) sharpens (T < 1) or flattens (T > 1)
    if top_p is not None and top_p < 1:
        p, order = logits.softmax(-1).sort(-1, descending=True)
        cut = p.cumsum(-1) - p >= top_p
        logits = logits.masked_fill(cut.scatter(-1, order, cut), float("-inf"))
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return logits.softmax(-1)  # renormalise once, over what survived every cut


def presence_penalty(logits: torch.Tensor, generated: list[list[int]], penalty: float) -> torch.Tensor:
    """logits (B, V) minus `penalty` at every token id row b has generated, once however often. Returns fp32."""
    out = logits.float().clone()
    for b, ids in enumerate(generated):
        out[b, sorted(set(ids))] -= penalty  # a set: presence, not frequency
    return out
