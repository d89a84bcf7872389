"""The one walk of a Tree below a mount-relative path, and the view printed from it, one line
per entry (``mokkafs tree``). ``render`` writes the same walk as files."""

from __future__ import annotations

import stat
from collections.abc import Iterator

from mokkafs.errors import UsageError
from mokkafs.tree.build import Entry, Tree
from mokkafs.tree.follow import PathError, follow
from mokkafs.tree.nodes import File, Symlink


def below(tree: Tree, path: str = "") -> Iterator[tuple[str, Entry]]:
    """Every entry at and below ``path``, parents before children, siblings in name order,
    each named below ``path`` as given ("" for the root). Symbolic links in ``path`` are
    followed, as through the mount. Raises ``UsageError`` for a path the view cannot
    resolve, before anything is walked."""
    try:
        prefix = follow(tree, path)
    except PathError as exc:
        raise UsageError(str(exc)) from None
    return _below(tree, prefix, path.strip("/"))


def _below(tree: Tree, prefix: str, shown: str) -> Iterator[tuple[str, Entry]]:
    for path, entry in tree.walk():
        if prefix and path != prefix and not path.startswith(prefix + "/"):
            continue
        yield (shown + path[len(prefix):] if prefix
               else "/".join(filter(None, (shown, path)))), entry


def lines(tree: Tree, path: str, now: float, cat: bool = False) -> Iterator[str]:
    """``mokkafs tree``'s lines: mode and name of each entry below ``path``, a link's target,
    and with ``cat`` a text file's content at ``now`` (newlines as ``\\n``). Raises
    ``UsageError`` as ``below`` does, before the first line."""
    for name, entry in below(tree, path):
        line = f"{stat.filemode(entry.mode)} {name or '.'}"
        node = entry.node
        if isinstance(node, Symlink):
            line += f" -> {node.target}"
        elif isinstance(node, File) and cat and not node.error:
            data = node.read(now)
            if data.isascii():
                line += " = " + data.decode().rstrip("\n").replace("\n", "\\n")
            else:
                line += f" = <{len(data)} bytes of binary>"
        yield line
