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

import re
from collections.abc import Iterator
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from mokkafs.errors import Problem, ProfileError
from mokkafs.profile.problems import YamlPath, format_path, line_for
from mokkafs.profile.schema import Profile

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# nvml-mock's largest profile composes to about 700 nodes; a node with 256 HCAs, every GPU and
# root listed, stays far below this.
MAX_YAML_NODES = 100_000
M = TypeVar("M", bound=BaseModel)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_TOKEN = re.compile(r"'<[a-z ]+>'")
_WHAT = {"Profile": "a mokkafs (nvml-mock) profile", "FaultFile": "a fault file"}


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


def _describe(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return ("an unknown key in this section; remove it or check its spelling (see "
                "docs/profiles.md)")
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


def _unquoted(text: str) -> str:
    """A YAML error's words without what it quotes of the document (an alias's name, a tag,
    a character); the tokens it names (``'<scalar>'``) are kept."""
    return _QUOTED.sub(lambda m: m.group(0) if _TOKEN.fullmatch(m.group(0)) else "...", text)


def _top_level(model: type[BaseModel], data: dict[Any, Any],
               lines: dict[YamlPath, int], filename: str) -> list[Problem]:
    """The check that the document is one at all, before anything of it is named: a mapping
    none of whose keys is a section of ``model`` is not such a document (a host file a link
    was pointed at, say), and is refused whole; a key that is not a section, beside some that
    are, is a problem located by its line, not named."""
    sections = _names(model)
    unknown = [key for key in data if not isinstance(key, str) or key not in sections]
    if not unknown:
        return []
    if len(unknown) == len(data):
        raise ProfileError(filename, [Problem("", (
            f"not {_WHAT.get(model.__name__, 'a document of this kind')}: none of its "
            f"top-level keys is a section of one ({', '.join(sorted(sections))}); nothing "
            "of the file is quoted"))])
    return [Problem("", "a top-level key that is not a section (one of "
                    f"{', '.join(sorted(sections))}); remove it or check its spelling",
                    lines.get((str(key),))) for key in unknown]


def _names(model: type[BaseModel]) -> set[str]:
    fields = model.model_fields
    return set(fields) | {f.alias for f in fields.values() if f.alias}


def _models_in(annotation: Any) -> list[Any]:
    """The models and lists an annotation may hold (``X | None``, ``list[X]``)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _models_in(get_args(annotation)[0])
    if origin in (Union, UnionType):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    if origin is list or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return [annotation]
    return []


def schema_path(model: type[BaseModel], path: YamlPath) -> YamlPath:
    """The longest start of ``path`` that names only fields of ``model`` (and list items):
    where a problem is said to be without naming a key the schema does not have."""
    kept: list[str | int] = []
    kinds: list[Any] = [model]
    for part in path:
        nxt: list[Any] = []
        for kind in kinds:
            if isinstance(part, int) and get_origin(kind) is list:
                nxt += _models_in(get_args(kind)[0])
            elif (isinstance(part, str) and isinstance(kind, type)
                  and issubclass(kind, BaseModel) and part in _names(kind)):
                field = kind.model_fields.get(part) or next(
                    f for f in kind.model_fields.values() if f.alias == part)
                nxt += _models_in(field.annotation) or [None]
        if not nxt:
            break
        kept.append(part)
        kinds = [k for k in nxt if k is not None]
    return tuple(kept)


def parse_as(model: type[M], text: str, filename: str) -> tuple[M, dict[YamlPath, int]]:
    """``parse`` for any document model (a profile, a fault file).

    Nothing of a document that is not one (see ``_top_level``) is quoted, and problems name
    only the schema's fields: an unknown key is located by its section and line."""
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
        raise ProfileError(filename, [Problem(
            "", f"YAML syntax error: {_unquoted(detail)}", line)]) from None
    except yaml.YAMLError as exc:
        raise ProfileError(filename, [Problem("", f"YAML error: {_unquoted(str(exc))}")]) \
            from None
    if not isinstance(data, dict):
        raise ProfileError(
            filename, [Problem("", "expected a mapping of sections (system, devices, ...)", 1)]
        )
    lines: dict[YamlPath, int] = {}
    duplicates: list[tuple[YamlPath, int]] = []
    if node is not None:
        for path, line, duplicate in _walk(node):
            lines.setdefault(path, line)
            if duplicate:
                duplicates.append((path, line))
    problems = _top_level(model, data, lines, filename)
    for path, line in duplicates:
        problems.append(Problem(format_path(schema_path(model, path)),
                                "a key appears twice; keep only one", line))
    try:
        document = model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            path = tuple(err["loc"])
            if err["type"] == "extra_forbidden" and len(path) == 1:
                continue  # a top-level key: told above
            problems.append(Problem(format_path(schema_path(model, path)), _describe(err),
                                    line_for(lines, path)))
    if problems:
        raise ProfileError(filename, problems)
    return document, lines
