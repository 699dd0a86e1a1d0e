"""A kernel forked from the warm server (web/warm.py) is a fresh kernel: a process of its own, an empty namespace, the
environment and working folder its spec gives, the modules the server imported already loaded; and one that is
stopped leaves no process behind."""
import json
import os
import time

import pytest

from helpers import notebook_of_cells, stdout_of
from web import execute, warm

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not warm.supported(), reason="kernels fork only on Linux")]


def test_each_kernel_is_a_fresh_process(tmp_path, synthetic):
    kernels = execute.kernel_spec(tmp_path / "kernels", synthetic, "zh")
    argv = json.loads((tmp_path / "kernels" / execute.KERNEL / "kernel.json").read_text())["argv"]
    assert argv[1:3] == [warm.__file__, "connect"], argv
    probe = notebook_of_cells(tmp_path / "probe.ipynb",
                     "import os, sys\n"
                     "print(os.getpid(), 'seen' in globals(), os.environ['QWEN_LANG'], os.getcwd(),\n"
                     "      os.path.basename(sys.argv[0]), 'torch' in sys.modules)",
                     "seen = True")
    runs = []
    for _ in range(2):
        nb, error = execute.execute(probe, kernels)
        assert error is None, error
        runs.append(stdout_of(nb.cells).split())
    (pid1, *rest1), (pid2, *rest2) = runs
    assert pid1 != pid2 and str(os.getpid()) not in (pid1, pid2)
    folder = str(execute.ROOT / "notebooks")
    assert rest1 == rest2 == ["False", "zh", folder, "ipykernel_launcher.py", "True"]  # warm: torch already there


def test_signals_reach_the_kernel_and_a_killed_one_leaves_no_process(tmp_path, synthetic):
    """Jupyter interrupts a kernel and stops it by signalling the process it started (here the client): the
    interrupt reaches the kernel, and killing the client takes the kernel with it."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    kernels = execute.kernel_spec(tmp_path / "kernels", synthetic)
    km = KernelManager(kernel_name=execute.KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        said = []
        kc.execute_interactive("import os; print(os.getpid())", timeout=60,
                               output_hook=lambda m: said.append(m["content"].get("text", "")))
        pid = int("".join(said))
        assert pid != km.provisioner.process.pid  # the kernel is not the process Jupyter started
        msg_id = kc.execute("import time; time.sleep(600)")
        time.sleep(1)
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=60)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["ename"] == "KeyboardInterrupt"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)  # kills the client
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    pytest.fail(f"the kernel {pid} is still running after Jupyter killed it")
