"""A profile's problems, each located by its YAML path (``devices[3].pci.bus_id``) and, where
the document has one, its line. Nothing here needs the schema: the daemon reports problems of
what it is sent at run time without loading pydantic."""

from __future__ import annotations

from mokkafs.errors import Problem, ProfileError

YamlPath = tuple[str | int, ...]


def format_path(path: YamlPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


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
