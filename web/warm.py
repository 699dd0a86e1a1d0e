"""Start each notebook's kernel from a warm process, so that a chapter does not spend its first seconds importing.

A chapter's kernel spends about 8 s of a 20 s run importing torch, transformers' Qwen3.5 model and matplotlib
before its first line does anything, and the book runs 24 of them. On Linux a process can fork: a server imports
those modules once, and each kernel is a fork of it, a process of its own with an empty namespace, started from the
modules already in memory. To Jupyter it is an ordinary kernel: the kernel spec's command is a small client that
asks the server for a kernel on its connection file, passes on the signals Jupyter sends it (interrupt, stop) and
exits with the kernel's exit status; if the client is killed, the server kills its kernel.

Where fork is not safe or not there (macOS, Windows), web/execute.py's kernel_spec starts kernels the usual way.
"""
import json
import os
import signal
import socket
import sys
import tempfile
import threading

PRELOAD = ("numpy", "torch", "safetensors", "matplotlib", "PIL.Image", "ipykernel.kernelapp",
           "transformers", "transformers.models.qwen3_5.modeling_qwen3_5")  # what a chapter's kernel imports


def supported():
    """Fork a process that has imported torch: Linux only (macOS forbids it once its frameworks are loaded)."""
    return sys.platform == "linux" and hasattr(os, "fork")


def serve(address, parent):
    """The server: import PRELOAD, then fork a kernel for each client, until the process that started it is gone."""
    import importlib
    import warnings

    with warnings.catch_warnings():  # what an import says here, the kernel's own import would have said
        warnings.simplefilter("ignore")
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 (transformers is a dev extra; a kernel meets any error in its own import)
                pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen()
    listener.settimeout(1.0)
    while os.getppid() == parent:
        try:
            client, _ = listener.accept()
        except socket.timeout:
            continue
        request = json.loads(client.makefile().readline())
        with warnings.catch_warnings():  # Python 3.12+ warns of fork with threads: ours only wait on a kernel
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the kernel
            listener.close()
            client.close()
            _kernel(request)
        client.sendall(f"{pid}\n".encode())
        threading.Thread(target=_watch, args=(client, pid), daemon=True).start()


def _kernel(request):
    """In the forked child: become the kernel the client asked for, with its environment and working folder."""
    os.setsid()  # its own process group: a signal to the server's group does not reach it
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    import ipykernel_launcher
    from ipykernel.kernelapp import IPKernelApp

    sys.argv = [ipykernel_launcher.__file__, *request["argv"]]  # what a kernel started the usual way sees

    code = 0
    try:
        app = IPKernelApp.instance()
        # its parent is this server: the kernel stops if the server goes (and, given a parent, prints no banner)
        app.initialize([*request["argv"], f"--IPKernelApp.parent_handle={os.getppid()}"])
        app.start()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 (the kernel's own error, already printed to its stderr)
        code = 1
    finally:
        os._exit(code)


def _watch(client, pid):
    """Tell the client how its kernel ended; kill the kernel if the client goes first (Jupyter killed it)."""
    def client_gone():
        try:
            client.recv(1)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    threading.Thread(target=client_gone, daemon=True).start()
    _, status = os.waitpid(pid, 0)
    try:
        client.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    except OSError:
        pass
    client.close()


def connect(address, argv):
    """The client Jupyter starts: ask for a kernel, pass signals on to it, exit as it exits."""
    import time

    started = time.monotonic()
    while not os.path.exists(address):  # the socket appears once the server has imported PRELOAD
        if time.monotonic() - started > SECONDS:
            sys.exit(f"no warm kernel server at {address} after {SECONDS} s")
        time.sleep(0.05)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(address)
    client.sendall((json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}) + "\n").encode())
    lines = client.makefile()
    pid = int(lines.readline())
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, lambda number, _: os.kill(pid, number))
    code = lines.readline().strip()
    sys.exit(int(code) if code.lstrip("-").isdigit() else 1)


_server = {}
SECONDS = 300  # how long a client waits for the server to finish importing


def command(env):
    """The kernel spec's command: a kernel forked from this process's server. The server starts on first use and
    imports in the background, with the kernels' environment `env`; it stops when this process exits."""
    import atexit
    import shutil
    import subprocess

    if "address" not in _server:
        folder = tempfile.mkdtemp(prefix="qwen-kernels-")
        address = os.path.join(folder, "server")
        # a session of its own: Ctrl-C in the terminal stops the build, which stops the server
        process = subprocess.Popen([sys.executable, __file__, "serve", address, str(os.getpid())],
                                   env={**os.environ, **env}, start_new_session=True)

        def stop():
            process.terminate()
            process.wait()
            shutil.rmtree(folder, ignore_errors=True)
        atexit.register(stop)
        _server["address"] = address
    return [sys.executable, __file__, "connect", _server["address"]]


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        connect(sys.argv[2], sys.argv[3:])
