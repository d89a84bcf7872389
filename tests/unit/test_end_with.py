"""``linux.end_with``: a process ends when the process it follows ends, and not before, even
when the thread that started it is gone (what PR_SET_PDEATHSIG follows, and trio's worker
threads end when idle)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.mounts import REPO, wait_for

# The parent: starts the follower from a thread that ends once the follower follows, asks it
# to answer once that thread is gone, says its pid if it did, and lives until its stdin closes.
PARENT = textwrap.dedent("""
    import os, subprocess, sys, threading
    started = []
    code = ("import sys, time; from mokkafs.host import linux; "
            "linux.end_with(int(sys.argv[1])); print('following', flush=True); "
            "sys.stdin.readline(); print('here', flush=True); time.sleep(600)")
    def start():  # ends once the follower follows
        follower = subprocess.Popen([sys.executable, "-c", code, str(os.getpid())],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert follower.stdout.readline() == "following\\n"
        started.append(follower)
    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    while len(os.listdir("/proc/self/task")) > 1:  # until the thread is gone from the kernel too
        pass
    follower = started[0]
    follower.stdin.write("?\\n")  # a process killed at the thread's end cannot answer
    follower.stdin.flush()
    print(follower.pid if follower.stdout.readline() == "here\\n" else "killed", flush=True)
    sys.stdin.read()
""")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_follower_outlives_the_thread_that_started_it_and_ends_with_its_parent() -> None:
    with subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, cwd=REPO) as parent:
        try:
            assert parent.stdout is not None and parent.stdin is not None
            answer = parent.stdout.readline()
            assert answer != "killed\n", "ended with the thread that started it"
            follower = int(answer)
            parent.stdin.close()
            assert parent.wait(timeout=30) == 0
            wait_for(lambda: not alive(follower), 30, "the follower's end")
        finally:
            if parent.poll() is None:
                parent.kill()
