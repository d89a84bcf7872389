"""MIG layouts and IMEX channels, compiled and described: the instances' IDs and placements,
their capability files and device nodes, the driver's params, the CDI spec, and the errors a
wrong layout gets (file, field, fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mokkafs.delivery.cdi import build_spec
from mokkafs.errors import ProfileError
from mokkafs.model.mig_tables import SHAPES, TABLES
from mokkafs.profile.mig import gi_id
from mokkafs.state import State
from mokkafs.surfaces.dev import char_devices
from mokkafs.surfaces.mig import ci_minor, gi_minor
from mokkafs.surfaces.proc_driver_nvidia import mig_minors
from mokkafs.tree.nodes import CharDevice, File
from tests.helpers.mounts import NVML_MOCK_PROFILES, SHIPPED_PROFILES
from tests.helpers.profiles import state_of, tree_of

H100_MIG = (SHIPPED_PROFILES / "h100-mig.yaml").read_text()
CAPS = "proc/driver/nvidia/capabilities"


def layout(state: State) -> dict[int, list[tuple[int, str, int, list[int]]]]:
    return {g.minor: [(gi.id, gi.profile, gi.start, [c.id for c in gi.compute])
                      for gi in g.instances] for g in state.mig}


def test_the_mig_profile_boots_half_its_gpus_partitioned() -> None:
    state = state_of("h100-mig")
    assert layout(state) == {
        0: [(2, "3g.40gb", 4, [0]), (4, "2g.20gb", 2, [0, 1]), (7, "1g.10gb", 0, [0]),
            (8, "1g.10gb", 1, [0])],
        1: [(7 + i, "1g.10gb", i, [0]) for i in range(7)],
        2: [(1, "3g.40gb", 0, [0]), (2, "3g.40gb", 4, [0])],
        3: [(0, "7g.80gb", 0, [0])],
    }
    gpu0 = state.mig[0].instances
    assert [c.profile for c in gpu0[1].compute] == ["1c.2g.20gb", "1c.2g.20gb"]


def test_ids_are_the_drivers_slice_tree() -> None:
    assert [gi_id(8, 0), gi_id(4, 0), gi_id(4, 4), gi_id(2, 6), gi_id(1, 6)] == [0, 1, 2, 6, 13]
    # every placement of every shape has its own ID among the 15 of nv-caps.c
    ids = {gi_id(s.size, start) for s in SHAPES.values() for start in s.starts}
    assert ids <= set(range(15))


def mig_minor_table() -> dict[str, int]:
    """The device plugin's parse of mig-minors (internal/mig/mig.go,
    GetMigCapabilityDevicePaths): capability path -> minor."""
    out = {}
    for line in mig_minors().decode().splitlines():
        name, minor = line.split()
        out[name] = int(minor)
    return out


def test_access_files_carry_the_minors_of_the_mig_minors_table() -> None:
    state = state_of("h100-mig")
    tree_nodes = {n.path: n for n in tree_of(state).parts["mig"][1]}
    table = mig_minor_table()
    seen = 0
    for gpu in state.mig:
        for gi in gpu.instances:
            path = f"gpu{gpu.minor}/gi{gi.id}/access"
            node = tree_nodes[f"{CAPS}/gpu{gpu.minor}/mig/gi{gi.id}/access"]
            assert isinstance(node, File)
            assert node.content == (f"DeviceFileMinor: {table[path]}\nDeviceFileMode: 292\n"
                                    "DeviceFileModify: 1\n").encode()
            assert table[path] == gi_minor(gpu.minor, gi.id)
            seen += 1
            for ci in gi.compute:
                cpath = f"gpu{gpu.minor}/gi{gi.id}/ci{ci.id}/access"
                assert table[cpath] == ci_minor(gpu.minor, gi.id, ci.id)
                cnode = tree_nodes[f"{CAPS}/gpu{gpu.minor}/mig/gi{gi.id}/ci{ci.id}/access"]
                assert isinstance(cnode, File) and isinstance(cnode.content, bytes)
                assert f"DeviceFileMinor: {table[cpath]}\n".encode() in cnode.content
                seen += 1
    assert seen == 9 + 14 + 4 + 2  # GIs and CIs of GPUs 0-3
    # a whole GPU has no gpu<N>/mig directory
    assert not any(p.startswith(f"{CAPS}/gpu4") for p in tree_nodes)


def test_each_instance_has_its_nvidia_cap_node_in_the_view_and_the_cdi_spec() -> None:
    state = state_of("h100-mig")
    caps = state.major("nvidia-caps")
    nodes = {n.path: n for n in tree_of(state).parts["mig"][1]
             if isinstance(n, CharDevice)}
    minors = sorted(gi_minor(g.minor, gi.id) for g in state.mig for gi in g.instances)
    minors += sorted(ci_minor(g.minor, gi.id, c.id)
                     for g in state.mig for gi in g.instances for c in gi.compute)
    assert sorted((n.major, n.minor, n.mode) for n in nodes.values()) == \
        sorted((caps, m, 0o444) for m in minors)
    spec = build_spec(Path("/run/mokkafs/view"), char_devices(state))
    nvidia = next(d for d in spec["devices"] if d["name"] == "nvidia")
    in_spec = {n["path"]: (n["major"], n["minor"], n["fileMode"])
               for n in nvidia["containerEdits"]["deviceNodes"]}
    for m in minors:
        assert in_spec[f"/dev/nvidia-caps/nvidia-cap{m}"] == (caps, m, 0o444)


def test_whole_gpu_profiles_have_no_instances() -> None:
    for profile in ("h100", "a100", "b200", "gb200"):
        state = state_of(profile)
        assert state.mig == ()
        assert "mig" not in {p for p, part in tree_of(state).parts.items() if part[1]}


@pytest.mark.parametrize("path", sorted(NVML_MOCK_PROFILES.glob("*.yaml")), ids=lambda p: p.stem)
def test_nvml_mock_mig_fields_keep_loading(path: Path) -> None:
    state = state_of(path)
    assert state.mig == ()  # all seven declare mode_current: disabled


def test_a_layout_nvml_mock_declares_is_honoured(tmp_path: Path) -> None:
    text = (NVML_MOCK_PROFILES / "a100.yaml").read_text().replace(
        '    mode_current: "disabled"\n', '    mode_current: "enabled"\n'
        '    gpu_instances:\n'
        '      - {profile: "3g.20gb", count: 1}\n'
        '      - {profile_id: 1, count: 1, compute_instances: [{profile: "1c", count: 2}]}\n'
        '      - {profile: "1g.5gb", count: 2}\n', 1)
    path = tmp_path / "a100-mig.yaml"
    path.write_text(text)
    state = state_of(path)
    assert len(state.mig) == len(state.gpus())
    assert layout(state)[0] == [(2, "3g.20gb", 4, [0]), (4, "2g.10gb", 2, [0, 1]),
                                (7, "1g.5gb", 0, [0]), (8, "1g.5gb", 1, [0])]


def test_every_table_names_each_shape() -> None:
    for model, names in TABLES.values():
        assert set(names) == set(SHAPES), model
        assert len(set(names.values())) == len(SHAPES), model


def refused(tmp_path: Path, old: str, new: str) -> ProfileError:
    assert old in H100_MIG
    path = tmp_path / "bad.yaml"
    path.write_text(H100_MIG.replace(old, new, 1))
    with pytest.raises(ProfileError) as info:
        state_of(path)
    return info.value


@pytest.mark.parametrize(("old", "new", "where", "says"), [
    ('{profile: "3g.40gb", count: 2}', '{profile: "3g.20gb", count: 2}',
     "devices[2].mig.gpu_instances[0]", "has no MIG profile '3g.20gb'; it has 1g.10gb"),
    ('{profile: "3g.40gb", count: 2}', '{profile: "3g.40gb", count: 3}',
     "devices[2].mig.gpu_instances[0]", "at most 2 3g.40gb"),
    ('{id: 8, profile: "1g.10gb", placement_start: 1}',
     '{id: 8, profile: "1g.10gb", placement_start: 0}',
     "devices[0].mig.instances[3].placement_start", "cannot start at 0"),
    ('{id: 8, profile: "1g.10gb", placement_start: 1}',
     '{id: 7, profile: "1g.10gb", placement_start: 1}',
     "devices[0].mig.instances[3]", "GPU instance ID 7 is already taken"),
    ('compute_instances: [{id: 0, profile: "1c"}, {id: 1, profile: "1c"}]',
     'compute_instances: [{id: 0, profile: "2c"}, {id: 1, profile: "1c"}]',
     "devices[0].mig.instances[1].compute_instances", "need 3 slices"),
    ('compute_instances: [{id: 0, profile: "1c"}, {id: 1, profile: "1c"}]',
     'compute_instances: [{id: 0, profile: "3c"}]',
     "devices[0].mig.instances[1].compute_instances[0]",
     "no compute instance profile '3c'"),
    ('gpu_instances: [{profile: "7g.80gb"}]', 'gpu_instances: [{profile: "7g.80gb"}]\n'
     '      max_gpu_instances: 0\n    minor_number: 40',
     "devices[3].mig.mode_current", "covers minors 0-31"),
])
def test_a_wrong_layout_names_the_field_and_the_fix(tmp_path: Path, old: str, new: str,
                                                    where: str, says: str) -> None:
    error = refused(tmp_path, old, new)
    assert says in str(error), str(error)
    assert any(p.path == where for p in error.problems), error.problems
    assert "bad.yaml" in str(error)


def test_a_gpu_without_a_mig_table_is_refused(tmp_path: Path) -> None:
    text = (NVML_MOCK_PROFILES / "l40s.yaml").read_text().replace(
        '    mode_current: "disabled"\n', '    mode_current: "enabled"\n', 1)
    path = tmp_path / "l40s-mig.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match="has no MIG table in mokkafs") as info:
        state_of(path)
    assert any(p.path == "device_defaults.mig.mode_current"
               for p in info.value.problems)


def params(state: State) -> dict[str, str]:
    node = next(n for n in tree_of(state).parts["proc_driver_nvidia"][1]
                if n.path == "proc/driver/nvidia/params")
    assert isinstance(node, File) and isinstance(node.content, bytes)
    pairs = (line.partition(": ") for line in node.content.decode().splitlines())
    return {name: value for name, _, value in pairs}


def test_imex_params_decide_the_channel_nodes() -> None:
    gb200, h100 = state_of("gb200"), state_of("h100")
    assert params(gb200)["ImexChannelCount"] == "2048"
    assert params(gb200)["CreateImexChannel0"] == "1"
    assert params(h100)["CreateImexChannel0"] == "0"
    major = gb200.major("nvidia-caps-imex-channels")
    assert [(p, ma, mi, mode) for p, ma, mi, mode in char_devices(gb200)
            if "imex" in p] == [("/dev/nvidia-caps-imex-channels/channel0", major, 0, 0o666)]
    assert not [p for p, *_ in char_devices(h100) if "imex" in p]


def test_channels_a_profile_names_exist_and_must_be_below_the_count(tmp_path: Path) -> None:
    base = (SHIPPED_PROFILES / "gb200.yaml").read_text()
    old = "imex: {channel_count: 2048, create_channel0: true}"
    assert old in base
    path = tmp_path / "gb200-channels.yaml"
    path.write_text(base.replace(old, "imex: {channel_count: 16, channels: [3, 7]}"))
    state = state_of(path)
    assert params(state)["ImexChannelCount"] == "16"
    assert sorted(mi for p, _, mi, _ in char_devices(state) if "imex" in p) == [3, 7]
    path.write_text(base.replace(old, "imex: {channel_count: 4, channels: [3, 7]}"))
    with pytest.raises(ProfileError, match="channel 7 is outside 0-3") as info:
        state_of(path)
    assert any(p.path == "system.imex.channels[1]" for p in info.value.problems)


def test_a_removed_gpu_takes_its_instances_with_it(tmp_path: Path) -> None:
    from mokkafs.faults.effects import applied, at

    path = tmp_path / "removed.yaml"
    path.write_text(H100_MIG + "faults:\n  - {name: r, kind: gpu-removed, target: gpu0}\n")
    state = at(applied(state_of(path), 0.0), 0.0)
    paths = {n.path for n in tree_of(state).parts["mig"][1]}
    assert not any(p.startswith(f"{CAPS}/gpu0") for p in paths)
    assert f"{CAPS}/gpu1/mig/gi13/access" in paths
    minors = {mi for p, _, mi, _ in char_devices(state) if "nvidia-cap" in p}
    assert gi_minor(0, 2) not in minors and gi_minor(1, 13) in minors
