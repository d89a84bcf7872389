"""Write a Tree to a directory as plain files: the same view, for hosts without FUSE and for
side-by-side benchmarks. There is no second renderer: the content comes from the same Tree.

Rendering over an existing directory replaces files atomically (temp file + rename) and then
removes what the new tree no longer has, so a reader never sees a half-written file.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import CharDevice, Dir, File, Symlink


def render(tree: Tree, dest: Path, now: float) -> int:
    """Write ``tree`` below ``dest`` (created if missing). Dynamic files are rendered at
    ``now``. Returns the number of entries written."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted: set[str] = set()
    count = 0
    for path, entry in tree.walk():
        if not path:
            continue
        wanted.add(path)
        target = dest / path
        node = entry.node
        if isinstance(node, Dir):
            if target.is_symlink() or (target.exists() and not target.is_dir()):
                target.unlink()
            target.mkdir(exist_ok=True)
            os.chmod(target, node.mode)
        elif isinstance(node, Symlink):
            tmp = target.with_name(f".{target.name}.mokkafs-tmp")
            tmp.unlink(missing_ok=True)
            os.symlink(node.target, tmp)
            _replace(tmp, target)
        elif isinstance(node, CharDevice):
            target.unlink(missing_ok=True)
            try:
                os.mknod(target, stat.S_IFCHR | node.mode, os.makedev(node.major, node.minor))
            except PermissionError:  # not root: an empty stand-in keeps the name
                target.touch()
            os.chmod(target, node.mode)  # mknod and touch apply the umask
        elif isinstance(node, File):
            tmp = target.with_name(f".{target.name}.mokkafs-tmp")
            tmp.write_bytes(b"" if node.error else node.read(now))
            os.chmod(tmp, node.mode)
            _replace(tmp, target)
        count += 1
    _prune(dest, wanted)
    return count


def _replace(tmp: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    os.replace(tmp, target)


def _prune(dest: Path, wanted: set[str]) -> None:
    for root, dirs, files in os.walk(dest, topdown=False):
        for name in files + dirs:
            full = Path(root) / name
            rel = full.relative_to(dest).as_posix()
            if rel in wanted:
                continue
            if full.is_dir() and not full.is_symlink():
                shutil.rmtree(full)
            else:
                full.unlink()


def mode_string(mode: int) -> str:
    return stat.filemode(mode)
