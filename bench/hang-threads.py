#!/usr/bin/env python3
"""Makes a running Node process hang as spec 3.4 describes (used by recovery.bench.mjs).

    python3 bench/hang-threads.py PID MAX_SECONDS

The threads of libuv's pool (where node-llama-cpp's native work runs: each evaluation of the
model, and file writes) are stopped with ptrace; the event loop and V8's threads run on. The process
keeps its listeners, answers /v1/models and /health, and a chat completion never finishes. The
pool's threads are those waiting on libuv's condition variable, a static of the node executable
(so its address lies in the executable's .bss, unlike V8's, which are on the heap); a thread at
work is waited for (at most 5 s). Prints "frozen N" once the
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


SYS_FUTEX = 202


def static_ranges(pid):
    """The node executable's mappings and the anonymous one right after them (its .bss)."""
    exe = os.readlink(f"/proc/{pid}/exe")
    ranges, after_exe = [], False
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            path = parts[5].strip() if len(parts) == 6 else ""
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if path == exe or (after_exe and path == ""):
                ranges.append((lo, hi))
            after_exe = path == exe
    return ranges


def pool_threads(pid):
    """The threads waiting on one condition variable that is a static of the executable: the
    largest such group is libuv's pool (the inspector's signal thread waits alone on another)."""
    ranges = static_ranges(pid)
    deadline = time.monotonic() + 5
    while True:
        groups, busy = {}, 0
        for t in os.listdir(f"/proc/{pid}/task"):
            tid = int(t)
            if tid == pid:
                continue
            try:
                with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                    fields = f.read().split()
            except OSError:
                continue
            if fields and fields[0] == str(SYS_FUTEX):
                addr = int(fields[1], 16)
                if any(lo <= addr < hi for lo, hi in ranges):
                    groups.setdefault(addr // 64, []).append(tid)
            elif fields and fields[0] == "running":
                busy += 1
        found = max(groups.values(), key=len) if groups else []
        if (len(found) > 1 and busy == 0) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def main():
    pid, max_s = int(sys.argv[1]), float(sys.argv[2])
    tids = pool_threads(pid)
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
