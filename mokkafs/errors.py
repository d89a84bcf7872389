"""The exceptions mokkafs raises on purpose.

    MokkafsError                 base; a user-facing message, printed without a traceback
    ├── UsageError               arguments that cannot work together                    (exit 2)
    ├── ProfileError             a profile that cannot be compiled; one Problem per defect (2)
    │   └── FaultError           faults that cannot apply to the node, or clear unknown names (2)
    ├── MountError               a mountpoint that is missing, busy or cannot be mounted  (3)
    ├── CdiError                 a CDI spec that cannot be published, or an unsafe place  (4)
    ├── MetricsError             a metrics or health address that cannot be served        (5)
    ├── ControlError             a control socket that cannot be served or reached        (6)
    └── InternalError            a bug met while applying an update (its traceback is logged)

Each kind exits with its own status (README, "Exit status"); 1 is left for the unexpected.

Everything else that escapes is a bug. Inside FUSE handlers only ``pyfuse3.FUSEError`` may
escape; ``mokkafs.fuse.adapter`` turns anything else into EIO.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_MOUNTPOINT = 3
EXIT_CDI = 4
EXIT_METRICS = 5
EXIT_CONTROL = 6
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it

# What each status means, for ``mokkafs --help`` (README's "Exit status" table says more).
EXIT_STATUSES = {
    EXIT_OK: "done; for mount, stopped by SIGINT/SIGTERM and unmounted cleanly",
    EXIT_INTERNAL: "an unexpected error: a bug (the traceback is printed), or a first "
                   "compile whose process failed",
    EXIT_USAGE: "a bad profile, or arguments that cannot work; for fault, faults that "
                "cannot apply",
    EXIT_MOUNTPOINT: "the mountpoint is missing and cannot be made, busy, a link, holds "
                     "files, or cannot be mounted; an unsafe --runtime-dir",
    EXIT_CDI: "the CDI spec cannot be published, or its directories are unsafe",
    EXIT_METRICS: "the metrics or health address cannot be served",
    EXIT_CONTROL: "the control socket or --state-dir cannot be served (or, for fault, "
                  "reached)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C) before serving",
}


EXIT_STATUS_HEAD = "exit status:"


def exit_status_text(width: int = 79) -> str:
    """The statuses and their meanings, each wrapped below its own (``--help``'s epilog)."""
    lines = [EXIT_STATUS_HEAD]
    for code, meaning in EXIT_STATUSES.items():
        lines += textwrap.wrap(meaning, width, initial_indent=f"  {code:<4} ",
                               subsequent_indent=" " * 7)
    return "\n".join(lines)


class MokkafsError(Exception):
    """An error whose message is meant for the user, as it is."""

    exit_code = EXIT_INTERNAL


class UsageError(MokkafsError):
    """Arguments or settings that cannot work (a cache mode the installed pyfuse3 lacks)."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True)
class Problem:
    """One defect in a profile: where it is (YAML path and line) and what was expected."""

    path: str
    message: str
    line: int | None = None

    def render(self, filename: str) -> str:
        """``file:line: yaml.path: message``; a problem of the file as a whole (unreadable, not
        YAML, not a mapping) names no path."""
        where = f"{filename}:{self.line}" if self.line is not None else filename
        return ": ".join(part for part in (where, self.path, self.message) if part)


class ProfileError(MokkafsError):
    """A profile that cannot be compiled into a State.

    ``problems`` lists every defect found, each naming its YAML path; ``str()`` renders one
    line per problem, prefixed with the file name and line.
    """

    exit_code = EXIT_USAGE

    def __init__(self, filename: str, problems: list[Problem]) -> None:
        self.filename = filename
        self.problems = list(problems)
        super().__init__(self.render())

    def headline(self) -> str:
        return f"invalid profile {self.filename}"

    def render(self) -> str:
        count = len(self.problems)
        head = f"{self.headline()}: {count} problem{'' if count == 1 else 's'}"
        return "\n".join([head, *("  " + p.render(self.filename) for p in self.problems)])


class MountError(MokkafsError):
    """The mountpoint cannot be used: missing, not a directory, already serving, or holding
    files a mount would hide."""

    exit_code = EXIT_MOUNTPOINT


class FaultError(ProfileError):
    """Faults given at run time that cannot apply to the node (a bad fault file, a target the
    node lacks), or a fault to clear that does not exist: nothing changes then."""

    def headline(self) -> str:
        return f"faults from {self.filename} not applied"


class CdiError(MokkafsError):
    """The CDI spec cannot be published, or not safely (its directories)."""

    exit_code = EXIT_CDI


class MetricsError(MokkafsError):
    """The metrics or health address cannot be served (malformed, or in use)."""

    exit_code = EXIT_METRICS


class ControlError(MokkafsError):
    """The control socket cannot be served, or (for a client) reached."""

    exit_code = EXIT_CONTROL


class InternalError(MokkafsError):
    """A bug met while loading or applying an update: reported like a bad input (the last good
    view keeps serving), with the traceback in the log."""


def internal_error(what: str, exc: BaseException) -> InternalError:
    return InternalError(f"{what}: {type(exc).__name__}: {exc} (a mokkafs bug; the "
                         "traceback is in the log)")
