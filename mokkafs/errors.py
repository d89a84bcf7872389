"""The exceptions mokkafs raises on purpose.

    MokkafsError                 base; a user-facing message, printed without a traceback
    ├── ProfileError             a profile that cannot be compiled; carries one Problem per defect
    └── MountError               a mountpoint that is missing, busy or cannot be mounted

Everything else that escapes is a bug. Inside FUSE handlers only ``pyfuse3.FUSEError`` may
escape; ``mokkafs.fuse.adapter`` turns anything else into EIO.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_USAGE = 2


class MokkafsError(Exception):
    """An error whose message is meant for the user, as it is."""

    exit_code = 1


@dataclass(frozen=True)
class Problem:
    """One defect in a profile: where it is (YAML path and line) and what was expected."""

    path: str
    message: str
    line: int | None = None

    def render(self, filename: str) -> str:
        where = f"{filename}:{self.line}" if self.line is not None else filename
        field = self.path or "(document)"
        return f"{where}: {field}: {self.message}"


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

    def render(self) -> str:
        head = f"invalid profile {self.filename}: {len(self.problems)} problem(s)"
        return "\n".join([head, *("  " + p.render(self.filename) for p in self.problems)])


class MountError(MokkafsError):
    """The mountpoint cannot be used: missing, not a directory, or already serving."""

    exit_code = EXIT_USAGE
