"""The ``mokkafs`` command: argument parsing, wiring and exit statuses; the work happens
elsewhere. ``tree``, ``render`` and ``profiles`` never import pyfuse3."""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mokkafs import __version__, cli_writes
from mokkafs.delivery.cdi import (
    DEFAULT_VERSION,
    KIND,
    VERSIONS,
    build_spec,
    check_parent,
    require_serving,
    served_device_nodes,
    serves_machine,
    spec_file_name,
    validate,
    write_atomically,
)
from mokkafs.delivery.render import mode_string, render
from mokkafs.delivery.share import require_share
from mokkafs.errors import MokkafsError, UsageError
from mokkafs.faults.effects import applied, at
from mokkafs.fuse.cache_mode import CACHE_MODE_ENV
from mokkafs.host.facts import default_node_name, read_host_facts
from mokkafs.profile.compile import Options
from mokkafs.profile.resolve import (
    compile_text,
    describe_shipped,
    read_text,
    resolve,
    shipped_profiles,
)
from mokkafs.state import State
from mokkafs.surfaces import build_tree
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import File, Symlink

if TYPE_CHECKING:
    from mokkafs.serve.daemon import Config, Wiring

DEFAULT_PROFILE = "h100"
log = logging.getLogger("mokkafs")


def _profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=DEFAULT_PROFILE,
                   help=f"shipped profile name or YAML file (default: {DEFAULT_PROFILE})")
    p.add_argument("--node-name", default=None,
                   help="node name for GUIDs, LIDs and node_desc (default: the host name)")
    p.add_argument("--node-index", type=int, default=None,
                   help="this node's index in its fleet: makes IB GUIDs and LIDs unique")
    p.add_argument("--no-infiniband", action="store_true",
                   help="serve no InfiniBand surface, whatever the profile declares")
    p.add_argument("--no-machine", action="store_true",
                   help="serve no CPUs, NUMA nodes, /proc/cpuinfo or /proc/meminfo (the "
                        "host's show through), as machine.show: false does")
    p.add_argument("--counter-staleness-ms", type=float, default=100.0,
                   help="IB counters advance in steps of this many ms (0: exact at every read)")


def _cdi_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--cdi-dir", type=Path, default=None, required=required,
                   help="the CDI spec directory (e.g. /etc/cdi)")
    p.add_argument("--cdi-kind", default=KIND,
                   help=f"CDI kind of the spec (default {KIND}; one per simulated node "
                        "on a machine)")


def _runtime_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime-dir", type=Path, default=Path("/run/mokkafs-runtime"),
                   help="a directory only root can write, where each daemon holds its lock "
                        "and the record of what it made, and mounts sysfs instances for an "
                        "instant")


DESCRIPTION = ("A simulated GPU node's sysfs and /proc/devices, served over FUSE and computed "
               "live from a hardware profile.")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mokkafs", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"mokkafs {__version__}")
    parser.add_argument("--debug", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("profiles", help="list the shipped profiles")

    mount = sub.add_parser("mount", help="serve the view at MOUNTPOINT until SIGINT/SIGTERM; "
                           "profile edits and SIGHUP swap the view live")
    _profile_args(mount)
    mount.add_argument("--host-sysfs", choices=("auto", "none"), default="auto",
                       help="auto: pass the host's sysfs through beneath the simulated nodes "
                            "(a sysfs instance of the daemon's own, without the filesystems "
                            "mounted below /sys), so the view can be a container's whole /sys; "
                            "none: simulated nodes only")
    _runtime_arg(mount)
    mount.add_argument("--metrics", metavar="HOST:PORT", default=None,
                       help="serve /metrics, /healthz and /readyz there (off by default; "
                            "e.g. 127.0.0.1:9464)")
    mount.add_argument("--compile-timeout", type=float, default=None, metavar="SECONDS",
                       help="a profile change's compile (in a child process) that takes longer "
                            "is killed, the last good view kept (default: 30)")
    mount.add_argument("--health", metavar="HOST:PORT", default=None,
                       help="serve /healthz and /readyz alone there, for liveness and "
                            "readiness probes: clients of the metrics port cannot take its "
                            "connection slots (e.g. 127.0.0.1:9465)")
    mount.add_argument("--control", type=Path, default=None, metavar="PATH",
                       help="serve a control socket there (mode 0600, in a directory only "
                            "root may write) for `mokkafs fault`")
    mount.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                       help="keep what changes at run time (faults applied over the control "
                            "socket) there, for the next daemon, in <the mountpoint, "
                            "systemd-escaped>.json (a directory only root may write; default: "
                            "the control socket's directory)")
    _cdi_args(mount)
    mount.add_argument("--cdi-version", default=None,
                       help=f"CDI version of that spec (default {DEFAULT_VERSION})")
    mount.add_argument("--cdi-hook", default=None, metavar="PATH",
                       help="the createContainer hook as the runtime sees it (default: the "
                            "one built into the package; a DaemonSet copies it to the node)")
    mount.add_argument("--cache-mode", choices=("auto", "no-open", "keep-cache"),
                       default=None,
                       help="how the kernel caches the view: no-open (reads served by the "
                            "kernel; needs the patched pyfuse3), keep-cache (every open "
                            f"reaches the daemon), or auto: no-open when possible (default: "
                            f"${CACHE_MODE_ENV} or auto)")
    mount.add_argument("--nonempty", action="store_true",
                       help="mount over a directory that holds files, hiding them (refused "
                            "by default, exit status 3)")
    mount.add_argument("--host-dev", action="store_true",
                       help="also make the NVIDIA driver's device nodes (/dev/nvidia*) in the "
                            "node's own /dev while serving; removed at stop")
    mount.add_argument("--host-dev-root", type=Path, default=Path("/dev"),
                       help=argparse.SUPPRESS)  # tests: a directory standing for /dev
    mount.add_argument("mountpoint", type=Path)

    clean = sub.add_parser("cleanup", help="undo what a daemon that was killed left, as its "
                           "record says: its CDI spec, its dead mount, the share over its parent "
                           "(for ExecStopPost); refused while a daemon serves MOUNTPOINT")
    _cdi_args(clean)
    _runtime_arg(clean)
    clean.add_argument("mountpoint", type=Path)

    cdi = sub.add_parser("cdi", help="print (or write) the CDI spec of a serving mount")
    cdi.add_argument("--mountpoint", type=Path, required=True)
    cdi.add_argument("--cdi-version", default=None,
                     help=f"CDI spec version, {', '.join(VERSIONS)} (default "
                          f"{DEFAULT_VERSION}: the newest podman 4.3 reads)")
    cdi.add_argument("--cdi-kind", default=KIND, help=f"CDI kind (default {KIND})")
    cdi.add_argument("--output", type=Path, default=None,
                     help="write it there atomically instead of to standard output")

    tree = sub.add_parser("tree", help="print the view (or a subtree) without mounting")
    _profile_args(tree)
    tree.add_argument("path", nargs="?", default="", help="mount-relative path, e.g. sys/bus/pci")
    tree.add_argument("--cat", action="store_true", help="print the content of text files")

    pre = sub.add_parser("preload-env", help="print shell exports that point libc consumers "
                         "at a serving mount (LD_PRELOAD shim)")
    pre.add_argument("--mountpoint", type=Path, required=True)

    fault = sub.add_parser("fault", help="apply, clear or list faults of a serving daemon "
                           "(its --control socket); see docs/faults.md")
    fault.add_argument("--control", type=Path, required=True, metavar="PATH")
    verbs = fault.add_subparsers(dest="verb", required=True)
    apply = verbs.add_parser("apply", help="apply the faults of FILE (YAML: a faults: list)")
    apply.add_argument("file", type=Path)
    clear = verbs.add_parser("clear", help="clear faults by name (none: all of them)")
    clear.add_argument("names", nargs="*")
    verbs.add_parser("list", help="one line per fault: name, kind, target, state, source "
                     "(restored: kept from a daemon before), seconds left (-: until cleared)")

    cli_writes.add_parser(sub)

    rend = sub.add_parser("render", help="write the view to DEST as plain files")
    _profile_args(rend)
    rend.add_argument("dest", type=Path)
    return parser


def _options(args: argparse.Namespace,
             clock: Callable[[], float] = time.monotonic) -> Callable[[], Options]:
    """A compile's options at each moment: the same node, started once (on ``clock``)."""
    node_name = args.node_name or default_node_name()
    started_at = clock()
    host_sysfs = getattr(args, "host_sysfs", "none") == "auto"

    def options() -> Options:
        return Options(
            node_name=node_name,
            node_index=args.node_index,
            loaded_at=time.time(),
            started_at=started_at,
            counter_quantum=max(args.counter_staleness_ms, 0.0) / 1000.0,
            host=read_host_facts(sysfs=host_sysfs),
            infiniband=not args.no_infiniband,
            machine=not args.no_machine,
        )

    return options


def _compiler(options: Callable[[], Options]) -> Callable[[str, str], State]:
    """Compile a profile's text, in this process."""

    def compile_profile(text: str, filename: str) -> State:
        return compile_text(text, filename, options())

    return compile_profile


def _state(args: argparse.Namespace) -> State:
    """The profile's State with its faults applied now, as a daemon started now serves it."""
    path = resolve(args.profile)
    now = time.monotonic()
    return at(applied(_compiler(_options(args, lambda: now))(read_text(path), str(path)), now),
              now)


def _tree(state: State) -> Tree:
    return build_tree(state)[0]


def _cmd_profiles(_: argparse.Namespace) -> int:
    for name, path in shipped_profiles().items():
        print(f"{name:8} {describe_shipped(path)}")
    return 0


def _cmd_tree(args: argparse.Namespace) -> int:
    tree = _tree(_state(args))
    prefix = args.path.strip("/")
    if prefix and tree.resolve(prefix) is None:
        raise UsageError(f"{prefix}: no such path in the view")
    now = time.monotonic()
    for path, entry in tree.walk():
        if prefix and path != prefix and not path.startswith(prefix + "/"):
            continue
        line = f"{mode_string(entry.mode)} {path or '.'}"
        node = entry.node
        if isinstance(node, Symlink):
            line += f" -> {node.target}"
        elif isinstance(node, File) and args.cat and not node.error:
            data = node.read(now)
            if data.isascii():
                line += " = " + data.decode().rstrip("\n").replace("\n", "\\n")
            else:
                line += f" = <{len(data)} bytes of binary>"
        print(line)
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    tree = _tree(_state(args))
    count = render(tree, args.dest, time.monotonic())
    print(f"mokkafs: wrote {count} entries to {args.dest}", file=sys.stderr)
    return 0


def _raise_fd_limit() -> None:
    """Take the hard limit as the soft one: a busy node's callers and host reads need file
    descriptors (systemd's default soft limit is 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def wire(args: argparse.Namespace,
         clock: Callable[[], float] = time.monotonic) -> tuple[Config, Wiring]:
    """What ``mokkafs mount ARGS`` serves, and with what: the one place collaborators are
    made (a test builds the same from the same arguments, and may change them). ``clock``
    is the time dynamic content follows."""
    from mokkafs.fuse.cache_mode import choose
    from mokkafs.serve.daemon import CdiConfig, Config, Wiring
    from mokkafs.source.child import CompileChild
    from mokkafs.source.file import FileSource

    # Absolute, but symlinks kept: a ConfigMap's node.yaml -> ..data/node.yaml must be watched
    # where it is, not where its target happens to be today.
    path = Path(os.path.abspath(resolve(args.profile)))
    config = Config(
        mountpoint=args.mountpoint, cache_mode=choose(args.cache_mode), metrics=args.metrics,
        health=args.health, control=args.control,
        state_dir=args.state_dir or (args.control.parent if args.control else None),
        cdi=CdiConfig(args.cdi_dir, args.cdi_version or DEFAULT_VERSION, args.cdi_kind,
                      args.cdi_hook) if args.cdi_dir else None,
        runtime_dir=args.runtime_dir, nonempty=args.nonempty,
        host_dev=args.host_dev_root if args.host_dev else None)
    options = _options(args, clock)
    # The first compile runs here, before the mount; every later one in a child process,
    # off the serving process's GIL (source/child.py).
    child = CompileChild(options, **({"seconds": args.compile_timeout}
                                     if args.compile_timeout is not None else {}))
    return config, Wiring(FileSource(path, _compiler(options), remote=child), clock=clock)


def parse_mount(argv: Sequence[str]) -> argparse.Namespace:
    """``mokkafs mount``'s arguments (``argv`` without the ``mount``)."""
    return _parser().parse_args(["mount", *argv])


def _cmd_mount(args: argparse.Namespace) -> int:
    import trio

    from mokkafs.serve.daemon import serve

    config, wiring = wire(args)
    _raise_fd_limit()
    try:
        trio.run(serve, config, wiring)
    except BaseExceptionGroup as group:
        # A refusal raised inside the daemon's nurseries (the metrics address taken, the
        # control socket impossible) comes wrapped; it is still that refusal, with its status.
        refusal, rest = group.split(MokkafsError)
        if refusal is None or rest is not None:
            raise
        raise _first(refusal) from None
    return 0


def _first(group: BaseExceptionGroup[MokkafsError]) -> MokkafsError:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from mokkafs.fuse.mount import refuse_link
    from mokkafs.serve.owned import Owned

    refuse_link(args.mountpoint)
    owned = Owned.acquire(args.runtime_dir, args.mountpoint)  # refused while a daemon lives
    try:
        left = owned.left
        if left is None:
            print(f"mokkafs: no daemon left a record of {owned.mountpoint} in "
                  f"{args.runtime_dir}; nothing to undo", file=sys.stderr)
            return 0
        if args.cdi_dir and left.spec is not None and Path(left.spec.path) != Path(
                os.path.abspath(args.cdi_dir)) / spec_file_name(args.cdi_kind):
            print(f"mokkafs: the record names the CDI spec {left.spec.path}, which is the "
                  "one undone", file=sys.stderr)
        for line in owned.undo(release_share=True):
            print(f"mokkafs: {line}", file=sys.stderr)
    finally:
        owned.close()
    return 0


def _cmd_cdi(args: argparse.Namespace) -> int:
    require_serving(args.mountpoint)
    check_parent(args.mountpoint)  # the spec hands it to every container, as the daemon's does
    require_share(args.mountpoint)
    spec = build_spec(args.mountpoint, served_device_nodes(args.mountpoint),
                      args.cdi_version or DEFAULT_VERSION, kind=args.cdi_kind,
                      machine=serves_machine(args.mountpoint))
    validate(spec)
    if args.output:
        write_atomically(spec, args.output)
    else:
        print(json.dumps(spec, indent=2))
    return 0


def _cmd_preload_env(args: argparse.Namespace) -> int:
    from mokkafs.delivery.preload import environment, shell_exports

    require_serving(args.mountpoint)
    print(shell_exports(environment(args.mountpoint, os.environ.get("LD_PRELOAD", ""))), end="")
    return 0


def _cmd_fault(args: argparse.Namespace) -> int:
    from mokkafs.serve.control import request

    if args.verb == "apply":
        path = args.file
        message = {"op": "apply", "file": str(path), "text": read_text(path)}
    elif args.verb == "clear":
        message = {"op": "clear", "names": args.names}
    else:
        message = {"op": "list"}
    answer = request(args.control, message)
    if args.verb == "list":
        for f in answer["faults"]:
            source = f"{f['source']} (restored)" if f.get("restored") else f["source"]
            left = "-" if f.get("remaining") is None else f"{f['remaining']:.1f}s"
            print(f"{f['name']}\t{f['kind']}\t{f['target']}\t{f['state']}\t{source}\t{left}")
    return 0


COMMANDS = {"profiles": _cmd_profiles, "mount": _cmd_mount, "cleanup": _cmd_cleanup,
            "tree": _cmd_tree, "render": _cmd_render, "cdi": _cmd_cdi,
            "preload-env": _cmd_preload_env, "fault": _cmd_fault, "writes": cli_writes.run}


def setup_logging(debug: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO,
                        format="mokkafs: %(levelname)s %(name)s: %(message)s")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args.debug)
    try:
        return COMMANDS[args.command](args)
    except MokkafsError as exc:
        print(f"mokkafs: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mokkafs tree | head`
        sys.stdout = None
        return 0


if __name__ == "__main__":
    sys.exit(main())
