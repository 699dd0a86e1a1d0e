"""qwen/measure.py: every timing waits for the device it runs on, before the clock starts and before it stops, and the
bandwidth probes return rates. No speed is asserted: the checks are which device is synchronised, in which order
around the timed work, and that a timed sleep takes at least its length on the clock (a real check on the CPU)."""
import math
import time

import pytest
import torch

from qwen import measure
from qwen.model import load_model


@pytest.fixture
def synced(monkeypatch):
    """The events of a run, in order: ("cuda", device) or ("mps",) for each device synchronisation (torch's own
    functions replaced by recorders, so that no GPU is needed), and whatever the test appends."""
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append(("cuda", device)))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: events.append(("mps",)))
    return events


def test_sync_waits_on_the_device_it_is_given(synced):
    measure.sync("cpu")
    measure.sync(torch.device("cpu"))
    assert synced == []  # a CPU's work is done when the call returns
    measure.sync("cuda:1")
    measure.sync(torch.device("mps"))
    assert synced == [("cuda", torch.device("cuda:1")), ("mps",)]


def test_sync_on_the_cpu_needs_no_gpu():
    """Without the recorders: on a machine without CUDA, torch.cuda.synchronize raises; measure.sync("cpu") does
    not call it."""
    measure.sync("cpu")
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError)):
            torch.cuda.synchronize()


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_timed_synchronises_before_and_after_the_call(synced, device):
    measure.timed(lambda: synced.append("call"), device)
    assert [e if e == "call" else e[0] for e in synced] == [device, "call", device]


def test_timed_sleep_on_the_cpu():
    """A real clock: a 50 ms sleep takes at least 50 ms of wall time and almost none of this process's CPU time."""
    wall, cpu = measure.timed(lambda: time.sleep(0.05), "cpu")
    assert wall >= 0.05 and 0 <= cpu < 0.04


def test_medians_alternate_after_the_warmup():
    order = []
    fns = [lambda: (order.append("a"), time.sleep(0.05)), lambda: order.append("b")]
    a, b = measure.medians(fns, "cpu", repeats=3, warmup=2)
    assert order == ["a", "b"] * 5  # two warm-up rounds, then three timed, in turn
    assert a >= 0.05 and b < a


def test_time_model_synchronises_around_the_prefill_and_the_decode(synthetic, monkeypatch):
    """The prefill's forward over the whole prompt, and the decode steps after it, each sit between two syncs of the
    prompt's device; the decode's first token (the prompt's own prefill in generate) is outside both."""
    model = load_model(synthetic, dtype=torch.float32)
    events = []
    monkeypatch.setattr(measure, "sync", lambda device: events.append(("sync", torch.device(device))))
    model.register_forward_pre_hook(lambda module, args, kwargs: events.append(("forward", args[0].shape[-1])),
                                    with_kwargs=True)
    ids = torch.randint(0, 1000, (1, 12), generator=torch.Generator().manual_seed(0))
    prefill_s, decode_s = measure.time_model(model, ids, 3)
    cpu = ("sync", torch.device("cpu"))
    assert events[:3] == [cpu, ("forward", 12), cpu]  # the prefill timed, the device synchronised around it
    assert events[3] == ("forward", 8)  # generate's prefill of the first 8 tokens: not timed
    assert events[4:] == [cpu] + [("forward", 1)] * 3 + [cpu]  # the three decode steps
    assert prefill_s > 0 and decode_s > 0


def test_bandwidth_probes_return_rates():
    """copy_bandwidth and read_bandwidth (bench/ and chapter 9 call them by these names and signatures) return bytes
    per second: finite rates, the read of the same order as the copy's (read + written; within 10× either way on
    any memory); the matrix-vector and matrix-product probes return positive finite rates."""
    import inspect

    for probe in (measure.copy_bandwidth, measure.read_bandwidth):
        assert list(inspect.signature(probe).parameters) == ["device", "mib"]
        assert inspect.signature(probe).parameters["mib"].default == 256
    device = torch.device("cpu")
    read, copy = measure.read_bandwidth(device, mib=32), measure.copy_bandwidth(device, mib=32)
    assert 0 < read < math.inf and copy / 10 < read < copy * 10
    for dtype in (torch.float32, torch.bfloat16):
        assert 0 < measure.matvec_bandwidth(device, dtype, mib=8) < math.inf
    assert 0 < measure.matmul_rate(device, tokens=8, d=64, width=96) < math.inf
