"""Where this exercise's function goes in the whole model (practice/plugin.py, `judge.py 211 --plug-in`): a prefill
runs the chunked delta rule, so the learner's token-by-token rule takes its place."""
import qwen.deltanet
from practice.plugin import delta_rule

PART = "recurrent delta rule"


def swaps(f, cfg):
    """(object, attribute, replacement) for each place the course's code gives way to the learner's `f`."""
    return [(qwen.deltanet, "chunked_delta_rule", delta_rule(f["recurrent_delta_rule"]))]
