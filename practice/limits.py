"""Every limit the judge holds a learner's code to, in one place: time, memory, processes, and how much of what it
prints or returns comes back. A problem's meta.json may set its own "time_limit", "total_time_limit" and
"memory_limit"; the rest hold for every problem. No imports: the sandbox and the runner read these too, and the
sandbox starts in milliseconds.
"""

# ---------------------------------------------------------------- time, in seconds, on the judge's own clock

TIME_LIMIT = 3.0  # per case, unless meta.json says "time_limit"
MAX_TIME_LIMIT = 600.0  # the most --time-limit accepts
STARTUP_LIMIT = 120.0  # to start Python and import torch (and, for --plug-in, the course's model): the judge's cost
LOAD_LIMIT = 10.0  # to import the learner's file (torch is already imported by then)
GRACE = 1.0  # a running case is stopped after its limit plus this; the verdict uses the case's own clock


def total_limit(n, per_case):
    """Seconds that all n cases may take together, unless meta.json says "total_time_limit": a quarter of n times
    the limit per case, at least 3 times it (a file just under the limit on every case must not take minutes)."""
    return max(3.0, n / 4) * per_case


def slack(limit):
    """How far the judge's own clock may run past a case's limit before it overrules the runner's clock (the
    judge's includes the pipe and thread wake-ups; the runner's would miss a learner's tampering)."""
    return 0.5 + 0.2 * limit


# ---------------------------------------------------------------- memory and processes (the sandbox sets them)

MEMORY_LIMIT = 4096  # MiB of memory for the learner's process unless meta.json says "memory_limit": its data segment
# (RLIMIT_DATA) and what its processes hold in memory-backed files together, and any one file (RLIMIT_FSIZE)
EXTRA_PROCESSES = 1024  # processes and threads the runner may add to what its user already runs

# ---------------------------------------------------------------- what comes back from the child

OUTPUT_CAP = 64 * 1024  # bytes of the learner's printed output the judge keeps; the rest is counted and dropped
MAX_EVENT = 1 << 20  # bytes in one line of the runner's events
MAX_TENSOR_BYTES = 256 * 2 ** 20  # a returned tensor larger than this is not sent back (it is surely wrong)
MAX_ITEMS = 100_000  # items in a returned list, tuple or dict
MAX_RESULT = 1 << 30  # bytes in one saved result file (the runner already refuses tensors over MAX_TENSOR_BYTES)
