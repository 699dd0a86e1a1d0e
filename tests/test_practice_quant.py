"""Exercises 222–224 as a learner meets them, graded both ways: by the child process the command line grades in
(`python practice/judge.py 222 --file ...` calls practice.child.run_file) and by a notebook's grading of the file's
functions (practice.notebook.grade_in_process with a namespace, what check() calls). Each file is one of the
problem's known mistakes or accepted forms (mistakes.toml: the wrong answer written once, with the verdict and hint
the judge owes it), chosen for the ways of getting these problems wrong that a judge can miss: another way of
computing a scale or a quotient, a rounding at a half, a floor on a scale, a tie, a dtype of a fraction. And an
all-zero answer, which must get no mistake's hint. tests/test_practice.py grades every known mistake in this process
too, and proves the cases against gguf, numpy and float64."""

import pytest

from helpers import assert_graded_as_its_entry_says, graded_both_ways
from practice.judge import problems

PROBLEMS = problems()

# the known mistakes and accepted forms of 222–224 that close a gap of the judge, by problem
FILES = {
    222: ["divided_by_d", "scale_another_way", "scale_times_reciprocal", "codes_in_fp64", "scale_to_fp16_halves_up",
          "scale_clamped", "scale_packed_with_struct"],
    223: ["halves_up", "times_inverse_scale", "scale_times_fifteenth", "quotient_in_fp64", "fifteen_over_range",
          "q4_1_rounding", "in_input_dtype_returned_fp32", "integer_zero_point", "signed_scale_q4", "scale_clamped"],
    224: ["kl_the_wrong_way", "top1_of_probabilities", "top1_of_fp32_probabilities", "last_on_tie", "topk_on_tie",
           "sort_on_tie", "fraction_as_tensor", "fraction_as_fp32_tensor", "fraction_in_fp32"],
}
WAYS = [(n, key) for n, keys in FILES.items() for key in keys]


@pytest.mark.slow
@pytest.mark.parametrize("number,key", WAYS, ids=[f"{n}-{k}" for n, k in WAYS])
def test_graded_both_ways_as_its_entry_says(number, key, tmp_path):
    """The verdict the entry expects, both ways; a rejected file shows the entry's hint on the case that rejects it
    first, and at least two cases reject it (one for a Runtime Error)."""
    assert_graded_as_its_entry_says(PROBLEMS[number], key, tmp_path)


ZEROS = {
    214: '''import torch


def sampling_probs(logits, temperature=1.0, top_k=None, top_p=None):
    return torch.zeros(logits.shape, dtype=torch.float32)


def presence_penalty(logits, generated, penalty):
    return torch.zeros(logits.shape, dtype=torch.float32)
''',
    224: '''import torch


def next_token_kl(ref_logits, logits):
    return torch.zeros(ref_logits.shape[:-1], dtype=torch.float64)


def top1_agreement(ref_logits, logits):
    return 0.0
''',
}


@pytest.mark.slow
@pytest.mark.parametrize("number", sorted(ZEROS))
def test_an_all_zero_answer_is_named_no_mistake(number, tmp_path):
    """Zeros in the shape and dtype of every result: rejected, and no case that rejects it names a known mistake,
    though some mistaken results there are so small that zeros lie within their tolerance (224's KL averaged over the
    vocabulary of two close models, about 1e-12)."""
    prob = PROBLEMS[number]
    path = tmp_path / f"{number}_zeros.py"
    path.write_text(ZEROS[number], encoding="utf-8")
    for way, report in graded_both_ways(prob, path).items():
        assert report.verdict == "WA", (way, report.verdict)
        named = {r.case.label: r.hints for r in report.results if r.hints}
        assert not named, (way, named)
