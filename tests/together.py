"""Start test processes at one moment: each child prints "ready" once it is set up, then waits for the
line it reads next (`print("ready", flush=True); sys.stdin.readline()`). A fixed moment on the clock
would come before a busy machine had started them all, and the race a test means to cause would then not
happen (the test would still pass, proving nothing)."""

from __future__ import annotations

import select
import subprocess


def popen(args: list[str]) -> subprocess.Popen[str]:
    """A child process with pipes for the ready/go lines and its output."""
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def go(procs: list[subprocess.Popen[str]]) -> list[subprocess.Popen[str]]:
    """Tell processes that said "ready" to go, all at once; the processes."""
    for proc in procs:
        assert proc.stdout is not None
        if not select.select([proc.stdout], [], [], 300)[0]:  # a child stuck before "ready" fails the test
            for other in procs:
                other.kill()
            raise AssertionError(f"no 'ready' from {proc.args!r} in 300 s")
        assert proc.stdout.readline() == "ready\n", proc.communicate(timeout=300)
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


def start_together(procs: list[subprocess.Popen[str]]) -> list[tuple[str, str]]:
    """Tell processes that said "ready" to go, all at once; their (stdout, stderr) once they end."""
    return [proc.communicate(timeout=300) for proc in go(procs)]
