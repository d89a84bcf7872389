"""YAML text -> a validated ``Profile``, or a ``ProfileError`` listing every problem.

Each problem names its YAML path (``devices[3].pci.bus_id``) and, where the document has one,
the line, so the user can go straight to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from pydantic import ValidationError

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile.schema import Profile

YamlPath = tuple[str | int, ...]
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def format_path(path: YamlPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _walk(node: yaml.Node, path: YamlPath) -> Iterator[tuple[YamlPath, int, bool]]:
    """Yield (path, 1-based line, is_duplicate_key) for every node of a composed document."""
    yield path, node.start_mark.line + 1, False
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            yield (*path, name), key.start_mark.line + 1, name in seen
            seen.add(name)
            yield from _walk(value, (*path, name))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _walk(item, (*path, i))


def _line_for(lines: dict[YamlPath, int], path: YamlPath) -> int | None:
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())


def _describe(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key; remove it or check its spelling (see docs/profiles.md)"
    if kind == "missing":
        return "required key is missing"
    msg: str = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "literal_error":
        msg = msg.replace("Input should be", "expected")
    return f"{msg} (got {err['input']!r})" if kind.endswith("_type") else msg


def parse(text: str, filename: str) -> tuple[Profile, dict[YamlPath, int]]:
    """Parse and validate one profile document.

    Returns the model and a map from YAML path to line number (for later semantic errors).
    Raises ``ProfileError`` with one ``Problem`` per defect found.
    """
    try:
        # One parse gives both the node tree (for line numbers) and the data; libyaml's C
        # loader when PyYAML has it, as this runs on every profile change.
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        detail = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise ProfileError(filename, [Problem("", f"YAML syntax error: {detail}", line)]) from None
    except yaml.YAMLError as exc:
        raise ProfileError(filename, [Problem("", f"YAML error: {exc}")]) from None
    lines: dict[YamlPath, int] = {}
    problems: list[Problem] = []
    if node is not None:
        for path, line, duplicate in _walk(node, ()):
            lines.setdefault(path, line)
            if duplicate:
                problems.append(
                    Problem(format_path(path), "key appears twice; keep only one", line)
                )
    if not isinstance(data, dict):
        raise ProfileError(
            filename, [Problem("", "expected a mapping of sections (system, devices, ...)", 1)]
        )
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            path = tuple(err["loc"])
            problems.append(Problem(format_path(path), _describe(err), _line_for(lines, path)))
    if problems:
        raise ProfileError(filename, problems)
    return profile, lines
