"""InfiniBand formats, fleet-unique identities and the counter model."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mokkafs import counters
from mokkafs.model import identity as ib_identity
from mokkafs.state import Traffic
from mokkafs.surfaces.infiniband import device_numbers, rate_text
from mokkafs.tree.nodes import File, Symlink
from tests.helpers.profiles import H100_NIC0, device_path, state_of, tree_of

GUID = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}\n$")
NIC = device_path(H100_NIC0)  # mlx5_0's PCI function
BASE = f"{NIC}/infiniband/mlx5_0"


def read(tree: object, path: str, now: float = 0.0) -> str:
    entry = tree.resolve(path)  # type: ignore[attr-defined]
    assert entry is not None, path
    assert isinstance(entry.node, File)
    return entry.node.read(now).decode()


def test_device_and_port_formats() -> None:
    state = state_of("h100", node_name="node-a")
    tree = tree_of(state)
    assert read(tree, f"{BASE}/node_type") == "1: CA\n"
    assert GUID.match(read(tree, f"{BASE}/node_guid"))
    assert read(tree, f"{BASE}/sys_image_guid") == read(tree, f"{BASE}/node_guid")
    assert read(tree, f"{BASE}/fw_ver") == "28.39.2048\n"
    assert read(tree, f"{BASE}/hca_type") == "MT4129\n"
    assert read(tree, f"{BASE}/board_id") == "MT_0000000838\n"
    assert read(tree, f"{BASE}/node_desc") == "node-a mlx5_0\n"
    p = f"{BASE}/ports/1"
    assert read(tree, f"{p}/state") == "4: ACTIVE\n"
    assert read(tree, f"{p}/phys_state") == "5: LinkUp\n"
    assert read(tree, f"{p}/rate") == "400 Gb/sec (4X NDR)\n"
    assert read(tree, f"{p}/link_layer") == "InfiniBand\n"
    assert re.match(r"^0x[0-9a-f]+\n$", read(tree, f"{p}/lid"))
    assert read(tree, f"{p}/sm_lid") == "0x1\n"
    assert read(tree, f"{p}/cap_mask") == "0xa651e848\n"
    guid = read(tree, f"{BASE}/node_guid").strip()
    assert read(tree, f"{p}/gids/0") == f"fe80:0000:0000:0000:{guid}\n"
    assert read(tree, f"{p}/gids/1") == ":".join(["0000"] * 8) + "\n"
    assert read(tree, f"{p}/pkeys/0") == "0xffff\n"
    assert read(tree, f"{p}/gid_attrs/types/0") == "IB/RoCE v1\n"


def test_kernel_layout_and_links() -> None:
    tree = tree_of(state_of("h100"))

    def target(path: str) -> str:
        node = tree.resolve(path).node  # type: ignore[union-attr]
        assert isinstance(node, Symlink)
        return node.target

    up = "../../" + NIC.removeprefix("sys/")
    assert target("sys/class/infiniband/mlx5_0") == f"{up}/infiniband/mlx5_0"
    assert target(f"{BASE}/device") == f"../../../{H100_NIC0}"
    assert target("sys/class/infiniband_verbs/uverbs0") == f"{up}/infiniband_verbs/uverbs0"
    assert target("sys/class/infiniband_mad/umad0") == f"{up}/infiniband_mad/umad0"
    assert read(tree, "sys/class/infiniband_verbs/abi_version") == "6\n"
    assert read(tree, "sys/class/infiniband_mad/abi_version") == "5\n"
    verbs = f"{NIC}/infiniband_verbs/uverbs0"
    assert read(tree, f"{verbs}/ibdev") == "mlx5_0\n"
    assert read(tree, f"{verbs}/dev") == "231:192\n"
    assert read(tree, f"{NIC}/infiniband_mad/issm0/dev") == "231:64\n"


def test_counter_sets() -> None:
    tree = tree_of(state_of("h100"))
    counters = tree.resolve(f"{BASE}/ports/1/counters")
    assert counters is not None
    names = {n for n, _ in counters.children}
    assert {"port_xmit_data", "port_rcv_data", "unicast_xmit_packets", "multicast_rcv_packets",
            "port_xmit_wait", "symbol_error", "VL15_dropped"} <= names
    assert len(names) == 22
    ext = tree.resolve(f"{BASE}/ports/1/counters_ext")
    assert ext is not None and "port_xmit_data_64" in {n for n, _ in ext.children}


@pytest.mark.parametrize(("gbps", "text"), [(100, "100 Gb/sec (4X EDR)"),
                                            (200, "200 Gb/sec (4X HDR)"),
                                            (800, "800 Gb/sec (4X XDR)"), (25, "25 Gb/sec (4X)")])
def test_rate_text(gbps: int, text: str) -> None:
    assert rate_text(gbps) == text


def test_disabling_ib_removes_every_ib_path() -> None:
    tree = tree_of(state_of("l40s"))
    paths = [p for p, _ in tree.walk()]
    assert not [p for p in paths if "infiniband" in p]
    assert not [p for p in paths if "mlx5" in p]


def test_device_numbers_for_cdi() -> None:
    numbers = device_numbers(state_of("h100"))
    assert ("/dev/infiniband/uverbs0", 231, 192) in numbers
    assert ("/dev/infiniband/umad7", 231, 7) in numbers
    assert ("/dev/infiniband/issm7", 231, 71) in numbers
    assert len({(ma, mi) for _, ma, mi in numbers}) == len(numbers)


# -- fleet-unique identities -------------------------------------------------------------

def test_5000_nodes_by_index_have_unique_guids_and_lids() -> None:
    guids: set[int] = set()
    lids: set[int] = set()
    for index in range(5000):
        ident = ib_identity.NodeIdentity.derive(f"gpu-node-{index:05d}", index, "a088c2", 8)
        for slot in range(8):
            guids.add(ident.guid(slot))
            lid = ident.lid(slot)
            assert ib_identity.FIRST_LID <= lid <= ib_identity.LAST_UNICAST_LID
            lids.add(lid)
    assert len(guids) == 40_000
    assert len(lids) == 40_000


def test_5000_node_names_without_index_have_unique_guids() -> None:
    guids = {ib_identity.NodeIdentity.derive(f"worker-{i}", None, "a088c2", 8).guid(s)
             for i in range(5000) for s in range(8)}
    assert len(guids) == 40_000


def test_nvml_mock_collision_pair_is_distinct() -> None:
    a = ib_identity.NodeIdentity.derive("38", None, "a088c2", 8)
    b = ib_identity.NodeIdentity.derive("worker-44", None, "a088c2", 8)
    assert a.guid(0) != b.guid(0)


def test_node_index_beyond_the_lid_space_is_a_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="too large"):
        ib_identity.NodeIdentity.derive("n", 6200, "a088c2", 8)
    from mokkafs.errors import ProfileError

    with pytest.raises(ProfileError, match="node index 9999 is too large"):
        state_of("h100", node_index=9999)


def test_node_index_from_profile_and_option(tmp_path: Path) -> None:
    a = state_of("h100", node_index=3)
    ports = sum(len(h.ports) for h in a.hcas)  # LIDs per node: one per port
    assert a.hcas[0].ports[0].lid == 2 + 3 * ports
    src = (Path(__file__).parents[2] / "mokkafs/profiles/h100.yaml").read_text()
    path = tmp_path / "p.yaml"
    path.write_text(src + "node: {index: 3}\n")
    assert state_of(path).hcas[0].ports[0].lid == 2 + 3 * ports


# -- counters ----------------------------------------------------------------------------

traffics = st.builds(
    Traffic,
    xmit_bytes_per_sec=st.floats(0, 1e11), rcv_bytes_per_sec=st.floats(0, 1e11),
    mean_packet_bytes=st.floats(64, 9000), multicast_fraction=st.floats(0, 1),
    xmit_wait_per_sec=st.floats(0, 1e6),
    errors_per_sec=st.just((("symbol_error", 0.5),)))


@settings(max_examples=200, deadline=None)
@given(traffic=traffics, t1=st.floats(0, 1e7), dt=st.floats(0, 1e4))
def test_counters_are_monotonic_and_consistent(traffic: Traffic, t1: float, dt: float) -> None:
    t2 = t1 + dt
    for name in counters.COUNTERS:
        assert counters.counter(traffic, name, t2) >= counters.counter(traffic, name, t1)
    # The packet counters follow the byte rate: packets = rate x t / mean packet size, give or
    # take the rounding of the unicast and multicast parts (each counts whole packets).
    for direction, rate in (("xmit", traffic.xmit_bytes_per_sec),
                            ("rcv", traffic.rcv_bytes_per_sec)):
        packets = counters.counter(traffic, f"port_{direction}_packets", t2)
        exact = rate * t2 / traffic.mean_packet_bytes
        # (and of floats: beyond 2**53 packets a float steps by 2 or more)
        assert exact - 2 - 4 * math.ulp(exact) <= packets <= exact + 1e-6 * max(exact, 1.0)
        multi = counters.counter(traffic, f"multicast_{direction}_packets", t2)
        assert multi <= exact * traffic.multicast_fraction + 1e-6 * max(exact, 1.0)


def test_data_counts_four_byte_words_at_the_configured_rate() -> None:
    traffic = Traffic(4_000_000.0, 8_000_000.0, 1000.0, 0.0, 0.0, ())
    assert counters.counter(traffic, "port_xmit_data", 10.0) == 10_000_000
    assert counters.counter(traffic, "port_rcv_data", 10.0) == 20_000_000
    assert counters.counter(traffic, "port_xmit_packets", 10.0) == 40_000
    assert counters.counter(traffic, "symbol_error", 10.0) == 0


def test_error_counters_stay_zero_unless_configured() -> None:
    state = state_of("h100")
    tree = tree_of(state)
    assert read(tree, f"{BASE}/ports/1/counters/symbol_error", now=3600.0) == "0\n"
    assert int(read(tree, f"{BASE}/ports/1/counters/port_xmit_data", now=3600.0)) > 0


def test_staleness_quantum() -> None:
    assert counters.elapsed(10.26, 0.0, 0.1) == pytest.approx(10.2)
    assert counters.elapsed(10.26, 0.0, 0.0) == pytest.approx(10.26)
    # Steps fall on the clock's multiples of the quantum, whenever the node started ...
    assert counters.elapsed(10.26, 0.05, 0.1) == pytest.approx(10.15)
    assert counters.elapsed(0.01, 0.05, 0.1) == 0.0
    # ... so a cache knows how long what it read stays current.
    counter = File("c", lambda now: b"", quantum=0.1)
    assert counter.fresh_for(10.26) == pytest.approx(0.04)
    assert File("c", lambda now: b"").fresh_for(10.26) == 0.0
    tree = tree_of(state_of("h100", counter_quantum=0.1))
    path = f"{BASE}/ports/1/counters/port_xmit_data"
    assert read(tree, path, now=5.01) == read(tree, path, now=5.09)
    assert read(tree, path, now=5.01) != read(tree, path, now=5.11)
    exact = tree_of(state_of("h100", counter_quantum=0.0))
    assert read(exact, path, now=5.01) != read(exact, path, now=5.02)


def test_profile_traffic_model_and_unknown_error_counter(tmp_path: Path) -> None:
    from mokkafs.errors import ProfileError

    src = (Path(__file__).parents[2] / "mokkafs/profiles/h100.yaml").read_text()
    path = tmp_path / "p.yaml"
    path.write_text(src.replace("  guid_prefix: \"946dae\"", "  guid_prefix: \"946dae\"\n"
                                "  traffic: {xmit_bytes_per_sec: 1e9, errors_per_sec: "
                                "{symbol_error: 2}}"))
    tree = tree_of(state_of(path))
    assert read(tree, f"{BASE}/ports/1/counters/symbol_error", now=10.0) == "20\n"
    assert read(tree, f"{BASE}/ports/1/counters/port_xmit_data", now=1.0) == "250000000\n"
    path.write_text(src.replace("  guid_prefix: \"946dae\"", "  guid_prefix: \"946dae\"\n"
                                "  traffic: {xmit_bytes_per_sec: 1e9, uptime_seconds: 86400, "
                                "errors_per_sec: {symbol_error: 2}}"))
    day = tree_of(state_of(path))  # a day of traffic before the daemon started, then 1 s
    assert read(day, f"{BASE}/ports/1/counters/port_xmit_data", now=1.0) == "21600250000000\n"
    assert read(day, f"{BASE}/ports/1/counters/symbol_error", now=1.0) == "65535\n"  # full
    assert read(day, f"{BASE}/ports/1/counters_ext/port_xmit_data_64", now=0.0) == \
        "21600000000000\n"
    path.write_text(src.replace("  guid_prefix: \"946dae\"", "  guid_prefix: \"946dae\"\n"
                                "  traffic: {uptime_seconds: 1e9}"))
    with pytest.raises(ProfileError, match=r"infiniband\.traffic\.uptime_seconds"):
        state_of(path)
    path.write_text(src.replace("  guid_prefix: \"946dae\"", "  guid_prefix: \"946dae\"\n"
                                "  traffic: {errors_per_sec: {symbol_errors: 2}}"))
    with pytest.raises(ProfileError, match=r"infiniband\.traffic\.errors_per_sec\.symbol_errors"):
        state_of(path)


def test_only_counters_that_move_are_computed_when_read() -> None:
    tree = tree_of(state_of("h100"))
    counters = f"{BASE}/ports/1/counters"

    def dynamic(path: str) -> bool:
        entry = tree.resolve(path)
        assert entry is not None and isinstance(entry.node, File), path
        return entry.node.dynamic

    assert dynamic(f"{counters}/port_xmit_data")
    assert dynamic(f"{BASE}/ports/1/counters_ext/port_rcv_packets_64")
    assert not dynamic(f"{counters}/symbol_error")
    assert not dynamic(f"{BASE}/ports/1/hw_counters/out_of_sequence")
    assert read(tree, f"{counters}/symbol_error", now=3600.0) == "0\n"
