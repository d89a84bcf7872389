"""What an ``xid`` fault as written must hold, and the bounds on what a node's Xid faults log
(the lines themselves: ``mokkafs.faults.xid``)."""

from __future__ import annotations

from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import Fault

# Every Xid the faults of one node may log, all counts together: a storm of 1,000 a second
# for 100 s. The log keeps fewer (``mokkafs.faults.kernel_log.RING``), as the kernel's ring does.
MAX_XID_RECORDS = 100_000
MIN_XID_EVERY = 0.0005  # seconds between two Xids of one fault at least (2,000 a second)


def xid_problems(fault: Fault, where: YamlPath, problems: Problems) -> None:
    """What an ``xid`` fault as written gets wrong (its target is checked with gpu-lost's)."""
    if fault.xid is None:
        problems.add((*where, "xid"), "xid needs xid: the Xid the driver logs, e.g. 48 (a "
                     "double bit ECC error), 74 (NVLink) or 119 (GSP RPC timeout)")
    if (fault.every is None) != (fault.count is None):
        problems.add(where, "an xid repeated needs every (seconds between two) and count "
                     "(how many); neither: once")
    if fault.every is not None and fault.every < MIN_XID_EVERY:
        problems.add((*where, "every"), f"{fault.every:g} s is below the floor of "
                     f"{MIN_XID_EVERY:g} s; use every: {MIN_XID_EVERY:g} or more")
