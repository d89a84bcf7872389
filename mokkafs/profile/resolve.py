"""Find a profile by shipped name or path, read it, and compile it (the I/O edge of profiles)."""

from __future__ import annotations

from pathlib import Path

import yaml

from mokkafs.errors import MokkafsError, Problem, ProfileError
from mokkafs.profile.compile import Options, compile_profile
from mokkafs.profile.load import parse
from mokkafs.state import State

SHIPPED = Path(__file__).resolve().parent.parent / "profiles"


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
    if path.exists():
        return path
    names = ", ".join(shipped) or "(none)"
    raise MokkafsError(f"no profile {spec!r}: not a file, and not a shipped profile ({names})")


def load_state(path: Path, options: Options) -> State:
    """Read and compile one profile file. Raises ``ProfileError``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(str(path), [Problem("", f"cannot read: {exc.strerror}")]) from None
    profile, lines = parse(text, str(path))
    if options.node_index is None and profile.node.index is not None:
        options = Options(**{**options.__dict__, "node_index": profile.node.index})
    return compile_profile(profile, lines, str(path), options)
