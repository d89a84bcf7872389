"""``mokkafs capture``: read a machine (the host's /sys and /proc, or a tree below ``--root``)
and print a profile that reproduces it; what it could not capture goes to stderr, one line
per kind of thing."""

from __future__ import annotations

import argparse
import os
import sys

from mokkafs.capture.anonymize import anonymize
from mokkafs.capture.guarded import Root
from mokkafs.capture.node import capture
from mokkafs.capture.profile_writer import render
from mokkafs.capture.reader import PAGE
from mokkafs.errors import UsageError


def run(args: argparse.Namespace) -> int:
    if not 0 < args.time_limit <= 60:
        raise UsageError("--time-limit: expected seconds between 0 and 60")
    try:
        root = Root(args.root, PAGE, args.time_limit)
    except OSError as exc:
        raise UsageError(f"--root {args.root}: not a directory mokkafs can read "
                         f"({exc.strerror}); name the directory that holds sys/ and proc/"
                         ) from None
    with root:
        result = capture(root, args.node_name)
    doc = result.doc
    name = doc["node"]["name"]
    replaced: list[str] = []
    if args.anonymize:
        doc, replaced = anonymize(doc, name)
    header = [f"mokkafs capture of {'a tree' if args.root != '/' else 'this host'}: "
              f"{result.described} PCI functions described ({result.overridden} with their "
              f"captured attributes), {result.kept} kept verbatim"]
    header += [f"anonymized: {line}" for line in replaced]
    text = render(doc, header)
    for line in result.notes.lines():
        print(f"mokkafs capture: {line}", file=sys.stderr)
    for line in replaced:
        print(f"mokkafs capture: anonymized: {line}", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UsageError(f"--output {args.output}: {exc.strerror}; name a new file") from None
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return 0
