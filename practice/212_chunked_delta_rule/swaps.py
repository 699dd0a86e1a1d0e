"""Where this exercise's function goes in the whole model (practice/plugin.py, `judge.py 212 --plug-in`): the chunked
delta rule of every prefill. The exercise takes q and k with as many heads as v; the model passes its key heads, so
they are repeated first."""
import qwen.deltanet
from practice.plugin import delta_rule

PART = "chunked delta rule"


def swaps(f, cfg):
    """(object, attribute, replacement) for each place the course's code gives way to the learner's `f`."""
    return [(qwen.deltanet, "chunked_delta_rule", delta_rule(f["chunked_delta_rule"], repeat=True))]
