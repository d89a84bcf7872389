"""A mount-relative path resolved as the kernel resolves it through the mount: symbolic links
anywhere in it followed, relative to the link's directory, ``..`` taken after a link's target
is put in place, at most ``MAX_LINKS`` links (the kernel's MAXSYMLINKS). A pure function of
the tree; ``mokkafs tree`` uses it to show ``sys/bus/pci/devices/<bdf>/vendor``."""

from __future__ import annotations

from collections import deque

from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import Dir, Symlink

MAX_LINKS = 40  # include/linux/namei.h, MAXSYMLINKS: more is ELOOP


class PathError(ValueError):
    """A path the view cannot resolve; the message names the component at fault."""


def follow(tree: Tree, path: str) -> str:
    """The path, inside the view, that ``path`` leads to, with no link left in it ("" for the
    root). Raises PathError for a name the view lacks, a name below a file, more than
    ``MAX_LINKS`` links (ELOOP), and a link or ``..`` that leads outside the view."""
    rest = deque(path.split("/"))
    done: list[str] = []
    links = 0
    while rest:
        part = rest.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                raise PathError(f"{path}: '..' leads outside the view")
            done.pop()
            continue
        here = "/".join([*done, part])
        entry = tree.resolve(here)
        if entry is None:
            raise PathError(f"{here}: no such path in the view")
        if isinstance(entry.node, Symlink):
            links += 1
            if links > MAX_LINKS:
                raise PathError(f"{path}: more than {MAX_LINKS} symbolic links (ELOOP)")
            target = entry.node.target
            if target.startswith("/") or _escapes(len(done), target):
                raise PathError(f"{here} -> {target}: the link leads outside the view")
            rest.extendleft(reversed(target.split("/")))
            continue
        if rest and not isinstance(entry.node, Dir):  # (a trailing "/" too, as ENOTDIR)
            raise PathError(f"{here}: not a directory")
        done.append(part)
    return "/".join(done)


def _escapes(depth: int, target: str) -> bool:
    """Whether ``target``, read in a directory ``depth`` levels below the view's root, climbs
    above that root."""
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False
