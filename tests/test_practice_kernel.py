"""Exercises 225 (the Q8_0 × Q8_0 dot) and 226 (the Q4_0 unpack), chapter 13's: their cases against oracles
written here from the statements alone (the expected values come from the gguf package; these tests recompute them
with integers, exact fractions and struct, and check each edge case is what its note says), and their known
mistakes graded both ways a learner meets them: by the child process the command line grades in and by a
notebook's grading. tests/test_practice.py grades every known mistake in this process as well."""
import copy
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch

from helpers import assert_graded_as_its_entry_says, graded_both_ways
from practice.judge import problems
from practice.problems import Problem

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: one thread, as in the test workers

PROBLEMS = problems()
HALF = 0.5


def cases_of(number, tmp_path):
    return Problem.cases(PROBLEMS[number], tmp_path)


def _roundf32(y):
    """C's roundf on fp32 numbers, by hand: halves away from zero, decided on the exact fraction."""
    a = np.abs(y)
    return np.copysign(np.trunc(a) + (a - np.trunc(a) >= HALF), y)


def _q8_0_by_hand(x):
    """llama.cpp's quantize_row_q8_0_ref in numpy fp32, step by step: d = max|x| / 127, id = 1/d or 0, q = roundf(x ·
    id); d stored as fp16. Returns (codes (nb, 32) int64, d (nb,) float16, d in fp32 (nb,))."""
    blocks = x.numpy().astype(np.float32).reshape(-1, 32)
    d = np.abs(blocks).max(axis=1) / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    return _roundf32(blocks * inv[:, None]).astype(np.int64), d.astype(np.float16), d


# ---------------------------------------------------------------- 225: the Q8_0 × Q8_0 dot

def test_225_codes_and_scales_equal_the_reference_rule_by_hand(tmp_path):
    """Each quantize case's expected codes and scales are llama.cpp's rule computed here in numpy fp32; the hand
    example's codes are the ones the statement shows."""
    cases = [c for c in cases_of(225, tmp_path) if c.fn == "quantize_row_q8_0"]
    for c in cases:
        q, d = c.expected
        codes, scales, _ = _q8_0_by_hand(c.values()[0])
        assert q.dtype == torch.int8 and d.dtype == torch.float16, c.label
        assert np.array_equal(q.numpy(), codes) and np.array_equal(d.numpy(), scales), c.label
    hand = cases[0].expected
    assert hand[0][0].tolist() == [-127, 127, -3, -2, -1, 1, 2, 3, *range(-12, 12)] and hand[0][1].tolist() == [0] * 32
    assert hand[1].tolist() == [1.0, 0.0]


def _exact_dot(q_w, d_w, x):
    """(Σ_b s_b · d_w · d_x as an exact fraction, Σ_b |s_b · d_w · d_x|): the integer sums from the codes by hand."""
    codes, scales, _ = _q8_0_by_hand(x)
    s = (q_w.numpy().astype(np.int64) * codes).sum(axis=1)
    terms = [int(sb) * Fraction(float(dw)) * Fraction(float(dx)) for sb, dw, dx in zip(s, d_w.numpy(), scales)]
    return sum(terms, Fraction(0)), sum(abs(t) for t in terms)


def test_225_every_dot_equals_exact_integer_arithmetic(tmp_path):
    """Each dot case's expected value is Σ_b s_b · d_w · d_x computed exactly (integers and fractions), rounded to
    fp32; its bound is (nb + 2) · 2⁻²⁴ · Σ_b |s_b · d_w · d_x|; and the statement's example is −6."""
    for c in [c for c in cases_of(225, tmp_path) if c.fn == "q8_0_dot"]:
        q_w, d_w, x = c.values()
        exact, total = _exact_dot(q_w, d_w, x)
        assert c.expected.dtype == torch.float32 and c.expected.shape == ()
        assert c.expected.item() == np.float32(float(exact)), c.label  # float() rounds once to float64: exact here
        bound = c.check.keywords["bound"]
        assert bound == pytest.approx((q_w.shape[0] + 2) * 2.0 ** -24 * float(total), rel=1e-12, abs=0), c.label
    assert cases_of(225, tmp_path)[2].expected.item() == -6.0


def test_225_edge_cases_are_what_their_notes_say(tmp_path):
    """The halves are exact halves and every other rule named moves some code where the weight is ±127; x / d moves
    codes in fp32 (so that mistake is graded); the zero and subnormal blocks have d = 0; the tiny values store d = 0
    with full codes; a leaping block's first value exceeds the block before it; the cancelling blocks keep |s_b| far
    below Σ_j |q_w · q_x|; every block of the negative-extreme rows has its extreme below 0."""
    cases = cases_of(225, tmp_path)
    for c in cases:
        x = c.values()[-1]
        blocks = x.numpy().reshape(-1, 32).astype(np.float32)
        codes, scales, d32 = _q8_0_by_hand(x)
        y = blocks * np.where(d32 == 0, 0, 1 / np.where(d32 == 0, 1, d32)).astype(np.float32)[:, None]
        if c.note.startswith("exact halves"):
            ties = (np.abs(y) - np.floor(np.abs(y))) == HALF
            assert ties.sum() >= 30 and (np.round(y) != codes).sum() >= 4, c.label  # np.round: halves to even
            if c.fn == "q8_0_dot":
                moved = np.round(y) != codes
                assert (np.abs(c.values()[0].numpy()[moved]) == 127).all(), c.label
        if c.note.startswith("values where x / d") or c.note.startswith("more values where x / d"):
            apart = _roundf32(blocks / d32[:, None]) != codes
            assert apart.sum(axis=1).min() >= 2, c.label
            if c.fn == "q8_0_dot":
                assert (np.abs(c.values()[0].numpy()[apart]) == 127).all(), c.label
        if "all-zero blocks" in c.note:
            assert (np.abs(blocks).max(axis=1) == 0).sum() >= 2 and (codes[d32 == 0] == 0).all(), c.label
        if "fp32 subnormals" in c.note:  # not zero, yet d = max|x| / 127 rounds to 0 in fp32: id = 0, codes 0
            assert ((np.abs(blocks).max(axis=1) > 0) & (d32 == 0)).sum() >= 1 and (codes[d32 == 0] == 0).all(), c.label
        if c.note.startswith("tiny values"):
            assert (scales == 0).all() and (np.abs(codes).max(axis=1) == 127).all(), c.label
        if c.note.startswith("a block's first value"):
            odd = np.arange(1, len(blocks), 2)
            assert (np.abs(blocks[odd, 0]) > np.abs(blocks[odd - 1]).max(axis=1)).all(), c.label
        if "nearly cancel" in c.note:
            products = c.values()[0].numpy().astype(np.int64) * codes
            assert (np.abs(products.sum(1)) * 1000 < np.abs(products).sum(1)).all(), c.label
        if c.note.startswith("every block's extreme is negative"):
            assert (blocks.min(axis=1) < 0).all() and (-blocks.min(axis=1) > blocks.max(axis=1)).all(), c.label
    widths = sorted(c.values()[-1].numel() for c in cases if c.fn == "q8_0_dot")
    assert 32 in widths and 1024 in widths and 3584 in widths


# ---------------------------------------------------------------- 226: the Q4_0 unpack

def _q4_0_by_hand(block):
    """One Q4_0 block's 32 values, read byte by byte from the statement: d with struct's '<e' (fp16, little-endian),
    value j from the low nibble of byte 2 + j, value j + 16 from its high nibble, each d · (q − 8)."""
    raw = bytes(block.tolist())
    (d,) = struct.unpack("<e", raw[:2])
    low = [d * ((b & 15) - 8) for b in raw[2:]]
    high = [d * ((b >> 4) - 8) for b in raw[2:]]
    return low + high


def test_226_every_case_equals_a_byte_by_byte_reading(tmp_path):
    """Every expected value is the statement's reading done by hand in Python floats (exact: 14 significant bits);
    the example is the statement's; every byte value appears in the case that says so; the scales are what the
    notes say."""
    cases = cases_of(226, tmp_path)
    for c in cases:
        (blocks,) = c.values()
        assert c.expected.dtype == torch.float32 and c.expected.shape == (blocks.shape[0], 32), c.label
        want = [_q4_0_by_hand(b) for b in blocks]
        assert c.expected.tolist() == want, c.label
    hand = cases[0]
    assert hand.values()[0][0].tolist() == [0x00, 0x38, 0xF0, 0xE1, 0xD2, 0xC3, 0xB4, 0xA5, 0x96, 0x87, 0x78, 0x69,
                                            0x5A, 0x4B, 0x3C, 0x2D, 0x1E, 0x0F]
    assert hand.expected[0].tolist() == [(j - 8) / 2 for j in range(16)] + [(7 - j) / 2 for j in range(16)]
    by_note = {c.note.split(":")[0]: c for c in cases}
    assert sorted(by_note["every byte value 0..255 once"].values()[0][:, 2:].flatten().tolist()) == list(range(256))
    signs = by_note["every value positive"].values()[0][:, :2].contiguous().view(torch.float16)
    assert (signs < 0).all()
    full = by_note["scales with all 11 bits of fp16 in use"].values()[0][:, :2].contiguous().view(torch.int16)
    assert ((full & 1) == 1).sum() >= 3  # the last bit of the significand set: 11 bits in use
    assert [c.values()[0].shape[0] for c in cases if "K = " in c.note] == [32, 224]


# ---------------------------------------------------------------- both ways a learner meets them

FILES = {  # the known mistakes (and an accepted form) graded both ways, by problem: the whole-file ones, the
    # roundings at a half, the one only the tolerance rejects, and the nibble orders
    225: ["no_zero_guard", "block_off_by_one", "round_half_to_even", "divided_by_d", "dequantized_values_dot",
          "blocks_added_in_order"],
    226: ["interleaved", "nibbles_swapped", "bytes_read_signed", "product_in_fp16"],
}
WAYS = [(n, key) for n, keys in FILES.items() for key in keys]


@pytest.mark.slow
@pytest.mark.parametrize("number,key", WAYS, ids=[f"{n}-{k}" for n, k in WAYS])
def test_graded_both_ways_as_its_entry_says(number, key, tmp_path):
    """The verdict the entry expects, both ways; a rejected file shows the entry's hint on the case that rejects it
    first, and at least two cases reject it."""
    assert_graded_as_its_entry_says(PROBLEMS[number], key, tmp_path, at_least=2)


ZEROS = {
    225: '''import torch


def quantize_row_q8_0(x):
    return torch.zeros(x.numel() // 32, 32, dtype=torch.int8), torch.zeros(x.numel() // 32, dtype=torch.float16)


def q8_0_dot(q_w, d_w, x):
    return torch.zeros((), dtype=torch.float32)
''',
    226: '''import torch


def q4_0_values(blocks):
    return torch.zeros(blocks.shape[0], 32, dtype=torch.float32)
''',
}


@pytest.mark.slow
@pytest.mark.parametrize("number", sorted(ZEROS))
def test_an_all_zero_answer_is_named_no_mistake(number, tmp_path):
    """Zeros in the shape and dtype of every result: rejected, and no case that rejects it names a known mistake."""
    path = tmp_path / f"{number}_zeros.py"
    path.write_text(ZEROS[number], encoding="utf-8")
    for way, report in graded_both_ways(PROBLEMS[number], path).items():
        assert report.verdict == "WA", (way, report.verdict)
        named = {r.case.label: r.hints for r in report.results if r.hints}
        assert not named, (way, named)


def test_each_mistake_is_rejected_where_its_note_says(tmp_path):
    """The mistakes the brief names are each rejected, in this process, by the cases built for them: rounding half to
    even by the exact halves, x / d by its planted values, a block one value too wide by the leaping block, no guard
    for d = 0 by the zero blocks; the nibble orders by the statement's example."""
    from practice.grading import grade

    where = {(225, "round_half_to_even"): "exact halves", (225, "divided_by_d"): "values where x / d",
             (225, "block_off_by_one"): "a block's first value", (225, "no_zero_guard"): "two all-zero blocks",
             (226, "interleaved"): "d = 0.5", (226, "nibbles_swapped"): "d = 0.5", (226, "no_minus_eight"): "d = 0.5"}
    for (number, key), note in where.items():
        (mistake,) = [m for m in PROBLEMS[number].mistakes if m.key == key]
        hit = [c for c in cases_of(number, tmp_path) if c.note.startswith(note)]
        assert hit and all(grade(c, mistake.result(c.fn, copy.deepcopy(c.values()))) is not None for c in hit), key


@pytest.mark.parametrize("number", [225, 226])
def test_each_mistake_is_named_alone_where_it_is_first_rejected(number, tmp_path):
    """The judge shows the hints of the first case a file fails: there, each known mistake's own result is named by
    its own hint and by no other (two mistakes can land within a dot's tolerance of each other by chance, as two did
    on an earlier draw of example 4)."""
    from practice.grading import grade
    from practice.mistakes import diagnose

    prob = PROBLEMS[number]
    cases = cases_of(number, tmp_path)
    for m in [m for m in prob.mistakes if m.hint is not None and not m.error]:
        for c in cases:
            got = m.result(c.fn, copy.deepcopy(c.values()))
            if grade(c, got) is not None:
                assert diagnose(prob, c, got) == [m.shown], (m.key, c.label)
                break
        else:
            raise AssertionError(f"{m.key}: no case rejects it")
