"""practice/plugin.py: the whole model with a learner's part in place of the course's. A reference part gives the
same top-5; a wrong part changes it."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import qwen.norm
from helpers import ROOT, functions, mistake_file
from practice.plugin import plug_in

pytestmark = pytest.mark.slow  # every test runs the synthetic model or the judge's child process

NORMS = ("rms_norm", "gated_rms_norm", "l2norm")


@pytest.fixture(scope="module")
def loaded(synthetic):
    """What practice.plugin.course_model() returns (the synthetic checkpoint's model in fp32, its tokenizer, the
    prompt's ids, the course model's top-5), made once for the module, and a copy of the model's weights."""
    from practice import plugin

    made = plugin.course_model()
    return made, {k: v.clone() for k, v in made[1].state_dict().items()}


@pytest.fixture
def course_model(loaded, monkeypatch):
    """plug_in on the module's one course model instead of loading it (its tokenizer takes seconds) at each call;
    test_reference_norms_give_the_same_prediction and the judge's children load their own. After the test the
    model's weights are still the ones loaded: no part changed them for the next test. Gives what course_model()
    returns."""
    from practice import plugin

    made, weights = loaded
    load = plugin.course_model
    monkeypatch.setattr(plugin, "course_model", lambda path=None: made if path is None else load(path))
    yield made
    changed = [k for k, v in made[1].state_dict().items() if not torch.equal(v, weights[k])]
    assert changed == [], f"the test changed the course model's weights: {changed}"


def test_reference_norms_give_the_same_prediction(synthetic, capsys):
    assert plug_in(204, *functions(ROOT / "practice/204_rmsnorm/solution.py", *NORMS)) == "same prediction"
    assert "same prediction" in capsys.readouterr().out
    assert qwen.norm.RMSNorm.forward.__module__ == "qwen.norm", "the course's module is restored afterwards"


def test_wrong_norm_diverges(course_model, capsys, tmp_path):
    wrong = functions(mistake_file(204, "plain_weight", tmp_path), *NORMS)
    assert plug_in(204, *wrong) == "diverges"
    assert "diverges" in capsys.readouterr().out


def swiglu_mlp(x, gate_weight, up_weight, down_weight):
    return F.linear(F.silu(F.linear(x, gate_weight)) * F.linear(x, up_weight), down_weight)


def gelu_mlp(x, gate_weight, up_weight, down_weight):
    return F.linear(F.gelu(F.linear(x, gate_weight)) * F.linear(x, up_weight), down_weight)


@pytest.mark.parametrize("part, verdict", [(swiglu_mlp, "same prediction"), (gelu_mlp, "diverges")])
def test_mlp(course_model, part, verdict):
    assert plug_in(207, swiglu_mlp=part) == verdict


def test_wrong_attention_diverges(course_model, tmp_path):
    """A wrong 208 (the gate without its sigmoid) changes the prediction: the plug-in reaches the learner's code
    (the reference keeps it: test_every_reference_part_plugs_in)."""
    from practice.judge import problems

    prob = problems()[208]
    wrong = functions(mistake_file(208, "missing_sigmoid", tmp_path), *prob.meta["functions"])
    assert plug_in(208, *wrong) == "diverges"


def test_delta_rule(course_model, tmp_path):
    from qwen.deltanet import recurrent_delta_rule

    def no_decay(q, k, v, g, beta, state=None):
        return recurrent_delta_rule(q, k, v, torch.zeros_like(g), beta, state)

    assert plug_in(211, recurrent_delta_rule=recurrent_delta_rule) == "same prediction"
    assert plug_in(211, recurrent_delta_rule=no_decay) == "diverges"


def test_a_part_that_raises_is_one_line(course_model, capsys):
    def broken(x, gate_weight, up_weight, down_weight):
        raise RuntimeError("oops")

    assert plug_in(207, swiglu_mlp=broken) == "diverges"
    assert "raised RuntimeError inside the model: oops" in capsys.readouterr().out


def test_judge_flag_runs_the_learner_file_in_a_child(synthetic):
    r = subprocess.run([sys.executable, "practice/judge.py", "204", "--file", "practice/204_rmsnorm/solution.py",
                        "--plug-in"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert "same prediction" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def gone(pid, seconds=10.0):
    """True once process `pid` has exited (or is a zombie waiting to be reaped)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's limits and /proc are Linux's")
def test_judge_flag_runs_the_file_under_the_time_limit(synthetic, tmp_path, monkeypatch, capsys):
    """A part that hangs inside the model is stopped after the problem's time limit for one call (+ GRACE), with one
    line saying so, and the child is gone."""
    from practice import judge
    from practice.problems import Problem

    learner = tmp_path / "hangs.py"
    learner.write_text(f"import os\nimport time\n\nimport torch\n\nopen({str(tmp_path / 'pid')!r}, 'w').write("
                       "str(os.getpid()))\nsilu = torch.nn.functional.silu\n\n\n"
                       "def swiglu_mlp(x, gate_weight, up_weight, down_weight):\n    time.sleep(600)\n")
    monkeypatch.setattr(Problem, "time_limit", property(lambda self: 0.5))
    started = time.monotonic()
    assert judge.plug_in_file(207, learner) == 1
    assert time.monotonic() - started < 120
    err = capsys.readouterr().err
    assert "plug-in stopped: one call of your swiglu_mlp inside the model ran over 0.5 s, exercise 207's time " \
           "limit" in err, err
    assert gone(int((tmp_path / "pid").read_text()))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA counts mmap'd memory on Linux only")
def test_judge_flag_runs_the_file_under_the_memory_limit(synthetic, tmp_path, monkeypatch, capsys):
    """A part that asks for more memory than the problem allows fails inside the model: one line, naming the limit.
    (torch.empty only reserves its 4 GiB: were the limit not applied, no memory would be used.)"""
    from practice import judge
    from practice.problems import Problem

    learner = tmp_path / "greedy.py"
    learner.write_text("import torch\nsilu = torch.nn.functional.silu\n\n\n"
                       "def swiglu_mlp(x, gate_weight, up_weight, down_weight):\n    return torch.empty(2 ** 30)\n")
    monkeypatch.setattr(Problem, "memory_limit", property(lambda self: 1536))
    assert judge.plug_in_file(207, learner) == 1
    out = capsys.readouterr().out
    assert "your SwiGLU MLP ran out of memory inside the model: it asked for more than the judge allows (1.5 GiB)" \
        in out, out


@pytest.mark.parametrize("number", [206, 208, 212])
def test_every_reference_part_plugs_in(course_model, number):
    """The reference solution of each model-part problem, put in the model, keeps the course model's prediction
    (204, 207 and 211 are checked above, with wrong parts too)."""
    from practice.judge import problems

    prob = problems()[number]
    parts = functions(prob.folder / "solution.py", *prob.meta["functions"])
    assert plug_in(number, *parts) == "same prediction"


def test_the_prompt_crosses_a_chunk_boundary(course_model, tmp_path):
    """The prompt is longer than one DeltaNet chunk (64 tokens) and not a multiple of it, so the chunked rule carries
    a state from one chunk to the next and pads the last: 212 answers that get a chunk boundary wrong change the
    prediction (the reference keeps it: test_every_reference_part_plugs_in)."""
    _, _, _, ids, _ = course_model  # the prompt's ids, as the plug-in runs them
    T = ids.shape[1]
    assert T > 64 and T % 64, T
    for name in ("state_not_carried", "decay_not_reset"):
        (wrong,) = functions(mistake_file(212, name, tmp_path), "chunked_delta_rule")
        assert plug_in(212, wrong) == "diverges", name


def test_a_non_part_is_refused_before_grading(tmp_path, capsys):
    """--plug-in on an exercise that is not a part of the model: exit 2 before grading, with the parts; in a
    notebook one line and None."""
    r = subprocess.run([sys.executable, "practice/judge.py", "214", "--file", "practice/214_sampling/solution.py",
                        "--plug-in"], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "PRACTICE_PROGRESS": str(tmp_path / "p.json")})
    assert r.returncode == 2 and r.stdout == "", r
    assert "exercise 214 is not one (the parts: 204, 206, 207, 208, 211, 212)" in r.stderr, r.stderr
    assert not (tmp_path / "p.json").exists()
    assert plug_in(214, lambda logits: logits) is None
    assert "exercise 214 is not a part of the model" in capsys.readouterr().out


def test_plug_in_takes_what_check_takes(course_model):
    """A namespace (globals(), a dict, a module), as check() takes it."""
    assert plug_in(207, {"swiglu_mlp": swiglu_mlp, "silu": F.silu}) == "same prediction"
    assert plug_in(207, sys.modules[__name__]) == "same prediction"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's limits and /proc are Linux's")
def test_a_forged_done_is_garbled(synthetic, tmp_path, capsys):
    """A file that writes the child's last event ("done", same prediction) to its pipes while it is imported gets
    no exit 0: the event is out of order, so the run stops there, as the runner's events would."""
    from practice import judge

    learner = tmp_path / "forges_done.py"
    learner.write_text("import os\nimport stat\n\nimport torch.nn.functional as F\n\nfor fd in range(3, 256):\n"
                       "    try:\n        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
                       "            os.write(fd, b'{\"ev\": \"done\", \"same\": true}\\n')\n    except OSError:\n"
                       "        pass\n\n\ndef silu(x):\n    return F.gelu(x)\n\n\n"
                       "def swiglu_mlp(x, gate_weight, up_weight, down_weight):\n"
                       "    return F.linear(F.gelu(F.linear(x, gate_weight)) * F.linear(x, up_weight), down_weight)\n")
    assert judge.plug_in_file(207, learner) == 1
    err = capsys.readouterr().err
    assert "plug-in stopped: the runner's messages to the judge were garbled (an event 'done' where the judge " \
           "expected 'loaded')" in err, err


def test_test_command_honours_plug_in(synthetic, tmp_path):
    """`judge.py test N --plug-in` runs the plug-in after Accepted, as `judge.py N --plug-in` does."""
    r = subprocess.run([sys.executable, "practice/judge.py", "test", "207", "--file",
                        "practice/207_swiglu/solution.py", "--plug-in"], capture_output=True, text=True, cwd=ROOT,
                       timeout=600, env={**os.environ, "PRACTICE_PROGRESS": str(tmp_path / "p.json")})
    assert r.returncode == 0 and "Accepted" in r.stdout and "same prediction" in r.stdout, r.stdout + r.stderr
