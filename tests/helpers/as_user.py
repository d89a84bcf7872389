"""``python -m tests.helpers.as_user USER ARGS...``: ``mokkafs ARGS`` run as USER, with the
code loaded first. A checkout in a directory only root may read (a CI's 0700 temporary
directory) cannot be imported by another user, so the command imports everything it runs as
root, then drops to USER's uid, to ``nogroup`` and to no groups, as ``setpriv`` would, before
it reads anything of the machine."""

from __future__ import annotations

import grp
import importlib
import os
import pkgutil
import pwd
import sys

import mokkafs.capture
import mokkafs.cli
import mokkafs.profile
from mokkafs.cli import main as mokkafs_main


def preload() -> None:
    for package in (mokkafs.capture, mokkafs.cli, mokkafs.profile):
        for found in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(found.name)


def main() -> None:
    user, args = sys.argv[1], sys.argv[2:]
    preload()
    os.setgroups([])
    os.setgid(grp.getgrnam("nogroup").gr_gid)
    os.setuid(pwd.getpwnam(user).pw_uid)
    os.chdir("/")
    sys.exit(mokkafs_main(args))


if __name__ == "__main__":
    main()
