"""Find a profile by shipped name or path, read it, and compile it (the I/O edge of profiles).

Finding and reading need no schema; the compiler (and with it pydantic) is imported at the
first compile, so a daemon, whose compiles run in a child process, never loads it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile.options import Options
from mokkafs.state import State

if TYPE_CHECKING:
    from mokkafs.profile.compile import PciCache

SHIPPED = Path(__file__).resolve().parent.parent / "profiles"
MAX_PROFILE_BYTES = 1 << 20


def shipped_profiles() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SHIPPED.glob("*.yaml"))}


def describe_shipped(path: Path) -> str:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return ""
    return str(data.get("description", "")) if isinstance(data, dict) else ""


def resolve(spec: str) -> Path:
    """A shipped profile's name (``h100``) or a path to a YAML file."""
    shipped = shipped_profiles()
    if spec in shipped and "/" not in spec:
        return shipped[spec]
    path = Path(spec)
    if path.exists() or path.is_symlink():  # a broken link is reported by the read
        return path
    names = ", ".join(shipped) or "(none)"
    raise ProfileError(spec, [Problem("", f"no such file, and not a shipped profile ({names})")])


def _unreadable(path: Path, exc: OSError) -> ProfileError:
    reason = {errno.ENOENT: "no such file (or a symlink to nothing)",
              errno.ELOOP: "a loop of symbolic links",
              errno.EACCES: "permission denied"}.get(exc.errno or 0, exc.strerror)
    return ProfileError(str(path), [Problem("", f"cannot read the profile: {reason}")])


_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def trusted_places(path: Path) -> tuple[Path, ...]:
    """Where ``path`` may lead later: its own directory and the directory of the file its
    links lead to now (the chain the operator named; a ConfigMap's ``..data`` swaps stay in
    the first)."""
    here = Path(os.path.realpath(path.parent))
    there = Path(os.path.realpath(path)).parent
    return (here,) if there.is_relative_to(here) else (here, there)


def _inside(path: Path, places: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(place) for place in places)


def _open_regular(path: Path, within: tuple[Path, ...] | None) -> int:
    """A descriptor open for reading on the regular file ``path`` leads to, inside ``within``
    when given. The file is pinned with O_PATH first, which opens nothing (no FIFO's writer
    is woken, no device's open runs), and opened for reading only once it is known to be a
    regular file in its place."""
    real = Path(os.path.realpath(path))
    if within is not None and not _inside(real, within):
        raise ProfileError(str(path), [Problem("", (
            f"leads to {real}, outside the directories it was started with "
            f"({', '.join(map(str, within))}); point it at a file there, or restart mokkafs "
            "to follow a new place"))])
    try:
        pinned = os.open(real, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        mode = os.fstat(pinned).st_mode
        if stat.S_ISLNK(mode):  # a link realpath could not resolve: a loop
            raise _unreadable(path, OSError(errno.ELOOP, os.strerror(errno.ELOOP)))
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise ProfileError(str(path), [Problem("", (
                f"{kind}, not a regular file; point --profile at a YAML file"))])
        # Where the pinned file is, not where the name led a moment ago (a link swapped
        # between the two would otherwise lead out).
        place = Path(os.readlink(f"/proc/self/fd/{pinned}"))
        if within is not None and not _inside(place, within):
            raise ProfileError(str(path), [Problem("", (
                "changed while it was opened, to a place outside the directories it was "
                "started with; it is read again at the next change"))])
        try:
            return os.open(f"/proc/self/fd/{pinned}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise _unreadable(path, exc) from None
    finally:
        os.close(pinned)


def read_text(path: Path, within: tuple[Path, ...] | None = None) -> str:
    """The profile's text. Raises ``ProfileError`` for a path that is missing, a loop, not a
    regular file, leads outside ``within`` (when given: see ``trusted_places``), is over
    ``MAX_PROFILE_BYTES`` or not UTF-8, without reading more than the limit and without
    opening anything but a regular file. No error quotes the file's bytes."""
    fd = _open_regular(path, within)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_PROFILE_BYTES + 1)
        except OSError as exc:
            raise _unreadable(path, exc) from None
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(str(path), [Problem(
            "", f"larger than {MAX_PROFILE_BYTES // 1024} KiB; a node's profile is a few KiB "
            "(nvml-mock's are under 25 KiB)")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ProfileError(str(path), [Problem(
            "", f"not UTF-8 text (at offset {exc.start}); save the file as UTF-8",
            line)]) from None


def load_state(path: Path, options: Options) -> State:
    """Read and compile one profile file. Raises ``ProfileError``."""
    return compile_text(read_text(path), str(path), options)


def compile_text(text: str, filename: str, options: Options,
                 cache: PciCache | None = None) -> State:
    """Compile a profile's text (read from ``filename``), reusing what ``cache`` keeps of the
    compile before. Raises ``ProfileError``."""
    from mokkafs.profile.compile import compile_profile
    from mokkafs.profile.load import parse

    profile, lines = parse(text, filename)
    if options.node_index is None and profile.node.index is not None:
        options = Options(**{**options.__dict__, "node_index": profile.node.index})
    return compile_profile(profile, lines, filename, options, cache)
