"""Find a profile by shipped name or path, read it, and compile it (the I/O edge of profiles)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import yaml

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile.compile import Options, compile_profile
from mokkafs.profile.load import parse
from mokkafs.state import State

SHIPPED = Path(__file__).resolve().parent.parent / "profiles"
MAX_PROFILE_BYTES = 1 << 20


def shipped_profiles() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SHIPPED.glob("*.yaml"))}


def describe_shipped(path: Path) -> str:
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


def read_text(path: Path) -> str:
    """The profile's text. Raises ``ProfileError`` for a path that is missing, a loop, not a
    regular file, over ``MAX_PROFILE_BYTES`` or not UTF-8, without reading more than the limit
    (and without blocking on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ProfileError(str(path), [Problem(
            "", "not a regular file (a directory? a device?); point --profile at a YAML file")])
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
            "", f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}; save "
            "the file as UTF-8", line)]) from None


def load_state(path: Path, options: Options) -> State:
    """Read and compile one profile file. Raises ``ProfileError``."""
    return compile_text(read_text(path), str(path), options)


def compile_text(text: str, filename: str, options: Options) -> State:
    """Compile a profile's text (read from ``filename``). Raises ``ProfileError``."""
    profile, lines = parse(text, filename)
    if options.node_index is None and profile.node.index is not None:
        options = Options(**{**options.__dict__, "node_index": profile.node.index})
    return compile_profile(profile, lines, filename, options)
