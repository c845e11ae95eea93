"""Contract of the tests' process check: a process a test started is found by the run marker in its
environment even after its parent exited and it was re-parented, and `end` leaves it gone."""

from __future__ import annotations

import os
import subprocess
import uuid

from tests import processes


def test_an_orphaned_child_is_found_by_its_marker_and_ended() -> None:
    run_id = f"test-{uuid.uuid4().hex}"
    env = {**os.environ, processes.RUN_MARKER: run_id}
    # The shell starts `sleep` in the background and exits: the sleep is re-parented, no longer our child.
    subprocess.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 &"], env=env, check=True, timeout=30)
    orphans = processes.survivors(run_id, grace_seconds=0.5)
    try:
        assert [p.name() for p in orphans] == ["sleep"]
        assert all(p.ppid() != os.getpid() for p in orphans)
    finally:
        processes.end(orphans, timeout=10)
    assert processes.survivors(run_id, grace_seconds=0) == []
