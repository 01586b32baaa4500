"""A lock's holder is alive only while its process runs: a zombie (killed, never reaped,
as when its parent died too in a container whose PID 1 reaps nothing) holds nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from governance.apply.journal import _pid_alive


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="zombies are read from /proc")
def test_a_zombie_is_not_alive_and_a_running_process_is() -> None:
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert _pid_alive(running.pid)
        deadline = time.monotonic() + 10
        while _pid_alive(done.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # exited, never waited for: a zombie, which kill(0) finds
        os.kill(done.pid, 0)  # (still there as a zombie)
        assert not _pid_alive(done.pid)
    finally:
        running.kill()
        running.wait()
        done.wait()
    assert not _pid_alive(done.pid)  # reaped: gone
    assert _pid_alive(os.getpid())
