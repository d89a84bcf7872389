"""YAML text -> a validated ``Profile``, or a ``ProfileError`` listing every problem.

Each problem names its YAML path (``devices[3].pci.bus_id``) and, where the document has one,
the line, so the user can go straight to it.

What a profile may cost is bounded before anything is built from it: the text is read by
``mokkafs.profile.resolve`` (at most ``MAX_PROFILE_BYTES``), and here the document may expand,
aliases included, to at most ``MAX_YAML_NODES`` nodes. A "billion laughs" of nested aliases is
a few hundred bytes of text that would otherwise expand to billions of nodes in every step that
walks the data (validation, line numbers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile.schema import Profile

YamlPath = tuple[str | int, ...]
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# nvml-mock's largest profile composes to about 700 nodes; a node with 256 HCAs, every GPU and
# root listed, stays far below this.
MAX_YAML_NODES = 100_000
M = TypeVar("M", bound=BaseModel)


def format_path(path: YamlPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def expanded_size(root: yaml.Node, limit: int = MAX_YAML_NODES) -> int:
    """How many nodes the document holds once every alias is expanded, computed once per
    distinct node (so in time linear in the text). Stops counting past ``limit``; raises
    ValueError on an alias that contains itself."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in _children(node)), limit + 1)
            continue
        if key in sizes:
            continue
        if key in open_:
            raise ValueError("an alias refers to a node that contains it (a recursive alias)")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _walk(root: yaml.Node) -> Iterator[tuple[YamlPath, int, bool]]:
    """Yield (path, 1-based line, is_duplicate_key) for every node of a composed document,
    each distinct node once: an alias's target is walked where it is defined, not again at
    every use (its paths there have no line of their own)."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, YamlPath]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        yield path, node.start_mark.line + 1, False
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            names: set[str] = set()
            for key, value in reversed(node.value):
                name = str(key.value)
                stack.append((value, (*path, name)))
            for key, _ in node.value:
                name = str(key.value)
                yield (*path, name), key.start_mark.line + 1, name in names
                names.add(name)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in reversed(list(enumerate(node.value))))


def line_for(lines: dict[YamlPath, int], path: YamlPath) -> int | None:
    """The line of ``path``, else of its nearest ancestor that has one."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get(())


class Problems:
    """The problems found in one profile so far, each located by its YAML path."""

    def __init__(self, filename: str, lines: dict[YamlPath, int]) -> None:
        self.filename = filename
        self.lines = lines
        self.items: list[Problem] = []

    def add(self, path: YamlPath, message: str) -> None:
        self.items.append(Problem(format_path(path), message, line_for(self.lines, path)))

    def check(self) -> None:
        """Raise ``ProfileError`` naming every problem, if there is any."""
        if self.items:
            raise ProfileError(self.filename, self.items)


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
    if not kind.endswith("_type"):
        return msg
    got = repr(err["input"])
    return f"{msg} (got {got if len(got) <= 60 else got[:57] + '...'})"


def _check_size(node: yaml.Node | None, filename: str) -> None:
    if node is None:
        return
    try:
        size = expanded_size(node)
    except ValueError as exc:
        raise ProfileError(filename, [Problem("", str(exc), node.start_mark.line + 1)]) from None
    if size > MAX_YAML_NODES:
        raise ProfileError(filename, [Problem(
            "", f"the document expands to more than {MAX_YAML_NODES:,} YAML nodes once its "
            "aliases are expanded; a node's profile needs a few hundred. Write the repeated "
            "parts out, or remove the nested aliases", node.start_mark.line + 1)])


def parse(text: str, filename: str) -> tuple[Profile, dict[YamlPath, int]]:
    """Parse and validate one profile document.

    Returns the model and a map from YAML path to line number (for later semantic errors).
    Raises ``ProfileError`` with one ``Problem`` per defect found.
    """
    return parse_as(Profile, text, filename)


def parse_as(model: type[M], text: str, filename: str) -> tuple[M, dict[YamlPath, int]]:
    """``parse`` for any document model (a profile, a fault file)."""
    try:
        # One parse gives both the node tree (for line numbers) and the data; libyaml's C
        # loader when PyYAML has it, as this runs on every profile change.
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            _check_size(node, filename)
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
        for path, line, duplicate in _walk(node):
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
        document = model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            path = tuple(err["loc"])
            problems.append(Problem(format_path(path), _describe(err), line_for(lines, path)))
    if problems:
        raise ProfileError(filename, problems)
    return document, lines
