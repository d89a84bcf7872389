"""Which of scripts/test.sh's two passes runs a test (a plugin). The first pass runs every
test in the default cache mode (no-open); the second, in keep-cache mode
(tests/helpers/pass_mode.py), runs only the tests whose result can depend on the cache mode:
``--mode-dependent-only`` deselects those marked ``once``.

A test is ``once`` when it mounts no mokkafs view, or when the path it proves does not
change with the mode: the directories in ONCE, and any module that says
``pytestmark = pytest.mark.once``. Every other test runs in both passes: a new test runs
twice until it is shown not to need it."""

from __future__ import annotations

import pytest

from tests.helpers.mounts import REPO

# Relative to the repository. Once: what mounts nothing, and what reads a view's content,
# which both modes serve alike (tests/fuse proves that in each), through a path of its own.
ONCE = (
    # pure code and the CLI's refusals; the set-up and the README; systemd, Helm, the image
    "tests/unit/", "tests/e2e/", "tests/deploy/",
    # consumers of static content (not the machine's, whose swaps the modes order apart,
    # nor InfiniBand's, whose counters move between reads)
    "tests/consumers/test_fabric_consumers.py", "tests/consumers/test_fault_consumers.py",
    "tests/consumers/test_mig_imex_consumers.py", "tests/consumers/test_sriov_consumers.py",
    "tests/consumers/test_topology_consumers.py",
    # containers given the view (not test_cdi's restarts nor test_kmsg's own mount, which
    # differ by mode)
    "tests/containers/test_dev_nodes.py", "tests/containers/test_machine.py",
    "tests/containers/test_mig_imex.py", "tests/containers/test_share.py",
    "tests/containers/test_writes.py", "tests/containers/test_writes_vfio.py",
    "tests/containers/test_nvml.py",
    # capture's own reader, and the shim
    "tests/capture/test_capture_anonymize.py", "tests/capture/test_capture_host.py",
    "tests/capture/test_capture_hostile.py", "tests/capture/test_capture_real_like.py",
    "tests/capture/test_capture_stall.py", "tests/native/",
    # a daemon's refusals and its own files, and the patch shown with both builds
    "tests/fuse/test_fault_bounds.py", "tests/fuse/test_nonempty_mountpoint.py",
    "tests/fuse/test_profile_places.py", "tests/fuse/test_host_dev.py",
    "tests/fuse/test_pyfuse3_patch.py", "tests/fuse/test_owned.py",
    "tests/fuse/test_made_mountpoint.py",
    # what a daemon restores at its start (a fresh mount's content), and where it compiles
    # (the view it then serves swaps as tests/fuse/test_swap.py proves in both)
    "tests/fuse/test_fault_state.py", "tests/fuse/test_compile_child.py",
    # what names its cache modes itself (each parameter runs in pass 1)
    "tests/fuse/test_writes_stress.py",
    # NVML's topology from the PCIe tree: static content, as the topology consumers read it
    "tests/nvml/test_topology.py", "tests/nvml/test_nvml_topology_c.py",
    # the library over a rendered tree, no mount; its exports; and static content as NVML's
    # consumers read it (the values, the monitors' one-shot screens), which both modes serve
    # alike (tests/fuse proves it): what swaps or changes at run time runs in both passes
    "tests/nvml/test_nvml_leak.py", "tests/nvml/test_exports.py", "tests/nvml/test_nvml_c.py",
    "tests/nvml/test_nvml_mig_c.py",  # (MIG changes through NVML: test_pynvml_mig, in both)
    "tests/nvml/test_monitors.py", "tests/nvml/test_nvtop.py",
    "tests/nvml/test_pynvml_values.py",
    # a capture's walk: a read of every file, which both modes serve alike
    "tests/capture/test_capture_roundtrip.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--mode-dependent-only", action="store_true",
                     help="run only the tests whose result can depend on the cache mode "
                          "(deselect those marked once): scripts/test.sh's second pass")


def where(item: pytest.Item) -> str:
    """The item's file, relative to the repository ("" for one outside it)."""
    path = item.path.resolve()
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else ""


def is_once(item: pytest.Item) -> bool:
    return where(item).startswith(ONCE) or item.get_closest_marker("once") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--mode-dependent-only"):
        return
    dropped = [item for item in items if is_once(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not is_once(item)]
