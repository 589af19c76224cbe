#!/usr/bin/env python3
"""Makes a running Node process hang as spec 3.4 describes (used by recovery.bench.mjs).

    python3 bench/hang-threads.py PID MAX_SECONDS

Every thread of PID but its main thread (the event loop) is stopped with ptrace (the native
generation's threads, libuv's pool and V8's helpers among them): the process keeps its listeners,
answers /v1/models and /health, and a chat completion never finishes. Prints "frozen N" once the
threads are stopped, then reaps them as they end (so that a SIGKILL of PID completes and its
parent sees the exit) and leaves when PID is gone or after MAX_SECONDS (then it lets the threads go
on). Linux only; needs permission to ptrace PID (same user and ptrace_scope 0, or root).
Exit 0 done, 1 could not stop any thread.
"""
import ctypes
import errno
import os
import sys
import time

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000
WNOHANG = 1

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def main():
    pid, max_s = int(sys.argv[1]), float(sys.argv[2])
    tids = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    held = set()
    for tid in tids:
        if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
            sys.stderr.write(f"hang-threads: ptrace {tid}: {os.strerror(ctypes.get_errno())}\n")
            continue
        libc.ptrace(PTRACE_INTERRUPT, tid, None, None)
        os.waitpid(tid, WALL)
        held.add(tid)
    if not held:
        return 1
    print(f"frozen {len(held)}", flush=True)
    deadline = time.monotonic() + max_s
    while held and time.monotonic() < deadline:
        try:
            tid, status = os.waitpid(-1, WALL | WNOHANG)
        except ChildProcessError:
            break
        if tid == 0:
            time.sleep(0.05)
            continue
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            held.discard(tid)
        # Any other stop (a signal for that thread) leaves it stopped: it stays hung.
    for tid in held:
        libc.ptrace(PTRACE_DETACH, tid, None, None)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as err:
        if err.errno == errno.ESRCH:
            sys.exit(1)
        raise
