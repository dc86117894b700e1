"""Cap a process at a fixed share of the CPU with a Linux control group of its own.

For the scale-out benchmark on a small machine: with every worker capped at the same
``cores`` (say 0.5), one worker and two workers each get a fixed CPU budget per worker,
and the broker keeps the rest of the machine, as it would with one worker per host. The
cap is the kernel's CFS bandwidth control: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``
on cgroup v1, ``cpu.max`` on cgroup v2. Needs write access to the cgroup tree (root, or
a delegated subtree); :meth:`CpuCap.check` says why not in one line.

    cap = CpuCap(0.5)
    cap.add(pid)              # the whole process, threads included, from now on
    cap.usage(pid)            # {"periods": ..., "throttled_periods": ..., "throttled_s": ...}
    cap.close()               # removes the groups (their processes must have exited)
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

PERIOD_US = 100_000
V1 = Path("/sys/fs/cgroup/cpu")
V2 = Path("/sys/fs/cgroup")


class CpuCapError(RuntimeError):
    """The machine cannot cap processes here (no writable cpu controller)."""


class CpuCap:
    def __init__(self, cores: float, root: Path | None = None) -> None:
        if not 0.01 <= cores <= (os.cpu_count() or 1):
            raise ValueError(f"cores: expected 0.01 to {os.cpu_count()}, got {cores}")
        self.cores = cores
        self.root, self.v2 = self.check(root)
        self.tag = f"sift-bench-{uuid.uuid4().hex[:6]}"
        self.groups: dict[int, Path] = {}
        for stale in self.root.glob("sift-bench-*"):  # left by a benchmark killed earlier
            with contextlib.suppress(OSError):  # only empty groups can be removed
                stale.rmdir()

    @staticmethod
    def check(root: Path | None = None) -> tuple[Path, bool]:
        """The cgroup directory to create groups under, and whether it is cgroup v2."""
        if root is not None:
            return root, (root / "cgroup.controllers").exists()
        if (V1 / "cpu.cfs_quota_us").exists():
            if not os.access(V1, os.W_OK):
                raise CpuCapError(f"{V1} is not writable (run as root to cap workers)")
            return V1, False
        controllers = V2 / "cgroup.subtree_control"
        if controllers.exists():
            if "cpu" not in controllers.read_text().split():
                raise CpuCapError(f"the cpu controller is not enabled in {controllers}")
            if not os.access(V2, os.W_OK):
                raise CpuCapError(f"{V2} is not writable (run as root to cap workers)")
            return V2, True
        raise CpuCapError("no cgroup cpu controller mounted at /sys/fs/cgroup")

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into a new group capped at ``cores``."""
        group = self.root / f"{self.tag}-{pid}"
        group.mkdir()
        quota = round(self.cores * PERIOD_US)
        if self.v2:
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
        (group / "cgroup.procs").write_text(str(pid))
        self.groups[pid] = group

    def usage(self, pid: int) -> dict[str, float]:
        """How often the cap held the group back (``cpu.stat``): periods throttled, of
        how many with demand, and the seconds lost waiting for the next period."""
        stat = dict(line.split() for line in
                    (self.groups[pid] / "cpu.stat").read_text().splitlines() if line)
        lost = (int(stat["throttled_usec"]) / 1e6 if self.v2
                else int(stat["throttled_time"]) / 1e9)
        return {"periods": int(stat["nr_periods"]),
                "throttled_periods": int(stat["nr_throttled"]), "throttled_s": lost}

    def close(self) -> None:
        """Remove the groups whose processes have exited (the others are left, named)."""
        for pid, group in list(self.groups.items()):
            try:
                group.rmdir()
                del self.groups[pid]
            except OSError:
                pass
