"""The state file: what it keeps of the run-time faults and their timing (in the same boot and
after a reboot), and the files it refuses to believe."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from mokkafs.faults.book import FaultBook
from mokkafs.faults.effects import applied
from mokkafs.layers.layer import StateFileError
from mokkafs.layers.mig import MigBook
from mokkafs.layers.registry import Layers
from mokkafs.model.mig import ComputeInstance, GpuInstance
from mokkafs.obs.status import Status
from mokkafs.profile.schema import Fault
from mokkafs.serve.durable import (
    MAX_BYTES,
    MAX_REFUSED,
    StateFile,
    file_name,
    restore_at_start,
)
from mokkafs.serve.record import record, restore, restored_state
from mokkafs.state import State
from mokkafs.tree.build import TreeError
from mokkafs.writes.book import Write, WriteBook
from tests.helpers.faults import with_faults
from tests.helpers.profiles import state_of

DOWN = Fault.model_validate({"name": "down", "kind": "ib-port-down", "target": "mlx5_0/1",
                             "for": 600})


def node(tmp_path: Path) -> tuple[State, FaultBook, State]:
    """A profile with a fault of its own (cleared), a 600 s port-down applied at 100."""
    profile = applied(with_faults(tmp_path, "  - {name: own, kind: gpu-lost, target: gpu1}\n"),
                      0.0)
    book = FaultBook()
    book.apply([DOWN], profile, "f.yaml")
    book.clear(["own"], profile)
    state = applied(book.merge(profile), 100.0)
    return profile, book, state


def test_a_restore_in_the_same_boot_keeps_each_origin_and_what_was_cleared(
        tmp_path: Path) -> None:
    profile, book, state = node(tmp_path)
    text = record(Layers(book), state, "boot-1", clock=300.0, wall=1e9)
    back = restore(text, "boot-1", clock=500.0, wall=1e9 + 9999)  # the wall clock is not asked
    assert not back.rebooted and back.origins == {"down": 100.0}
    assert back.layers.faults.control == book.control and back.layers.faults.held == book.held
    assert back.layers.faults.restored == {"down"}
    now = restored_state(applied(profile, 500.0), back, 500.0)
    assert [(f.name, f.origin, f.restored) for f in now.faults] == [("down", 100.0, True)]


def test_after_a_reboot_the_time_down_counts_by_the_wall_clock(tmp_path: Path) -> None:
    _, book, state = node(tmp_path)
    text = record(Layers(book), state, "boot-1", clock=300.0, wall=1e9)  # 200 s along of 600
    back = restore(text, "boot-2", clock=5.0, wall=1e9 + 100)  # down 100 s: 300 s along
    assert back.rebooted and back.origins == {"down": 5.0 - 300.0}
    behind = restore(text, "boot-2", clock=5.0, wall=1e9 - 3600)  # a wall clock gone back
    assert behind.origins == {"down": 5.0 - 200.0}  # counts nothing, never adds time left


def test_a_fault_applied_again_or_cleared_is_no_longer_restored(tmp_path: Path) -> None:
    profile, book, state = node(tmp_path)
    back = restore(record(Layers(book), state, "b", 300.0, 0.0), "b", 300.0, 0.0).layers.faults
    back.apply([DOWN], profile, "f.yaml")
    assert back.restored == set() and back.applies == {"down": 2}


def test_the_file_name_is_the_mountpoint_escaped_as_systemd_does() -> None:
    assert file_name(Path("/run/mokkafs/node")) == "run-mokkafs-node.json"
    assert file_name(Path("/srv/a-b/n o")) == "srv-a\\x2db-n\\x20o.json"


def test_it_is_written_0600_whole_and_only_when_it_changed(tmp_path: Path) -> None:
    _, book, state = node(tmp_path)
    keeper = StateFile(tmp_path / "s.json", "boot-1")
    keeper.save(Layers(book), state, 300.0)
    st = os.stat(keeper.path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert sorted(os.listdir(tmp_path)) == ["faulty.yaml", "s.json"]  # no temporary file left
    first = keeper.path.read_text()
    keeper.save(Layers(book), state, 400.0)  # nothing changed: not rewritten
    assert keeper.path.read_text() == first
    assert json.loads(first)["version"] == 1


def hostile(kind: str) -> Callable[[Path, str], None]:
    def make(path: Path, good: str) -> None:
        if kind == "bad-json":
            path.write_text(good[:-20])
        elif kind == "wrong-version":
            path.write_text(good.replace('"version": 1', '"version": 7'))
        elif kind == "not-a-state-file":
            path.write_text('{"format": "mokkafs-state", "version": 1, "boot_id": "x"}')
        elif kind == "huge":
            path.write_text(" " * (MAX_BYTES + 1) + good)
        elif kind == "symlink":
            target = path.with_name("elsewhere.json")
            target.write_text(good)
            os.symlink(target, path)
        elif kind == "fifo":
            os.mkfifo(path, 0o600)
        else:
            path.write_text(good)
            if kind == "group-writable":
                os.chmod(path, 0o620)
            elif kind == "world-writable":
                os.chmod(path, 0o606)
            elif kind == "not-root-owned":
                os.chown(path, 1000, 1000)
    return make


REFUSALS = {"bad-json": "not JSON", "wrong-version": "schema version 7, and this mokkafs reads "
            "version 1", "not-a-state-file": "not a mokkafs state file: clock: Field required",
            "huge": f"more than the {MAX_BYTES}", "symlink": "a symbolic link",
            "fifo": "not a regular file", "group-writable": "mode 0620: others may write it",
            "world-writable": "mode 0606: others may write it",
            "not-root-owned": "owned by uid 1000, not root"}


@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_a_hostile_state_file_is_refused_and_set_aside(tmp_path: Path, kind: str,
                                                       expected_logs: list[str]) -> None:
    expected_logs.append("state file .* refused")
    _, book, state = node(tmp_path)
    good = record(Layers(book), state, "boot-1", 300.0, 0.0)
    keeper = StateFile(tmp_path / "s.json", "boot-1")
    hostile(kind)(keeper.path, good)
    restored, why = keeper.load(300.0)
    assert restored is None and why is not None
    assert REFUSALS[kind] in why and "serving the profile alone" in why
    [aside] = [n for n in os.listdir(tmp_path) if n.startswith("s.json.refused.")]
    assert f"renamed to {aside}" in why and not os.path.lexists(keeper.path)
    assert "mlx5_0" not in why  # names what is wrong, never quotes the file


def test_a_good_state_file_is_read_back(tmp_path: Path) -> None:
    _, book, state = node(tmp_path)
    keeper = StateFile(tmp_path / "s.json", "boot-1")
    keeper.save(Layers(book), state, 300.0)
    restored, why = StateFile(keeper.path, "boot-1").load(300.0)
    assert why is None and restored is not None and restored.origins == {"down": 100.0}


def _layers_with_mig_and_writes(book: FaultBook) -> tuple[Layers, State]:
    """``book`` with a run-time MIG layout on h100-mig's first GPU and a write to a PF."""
    profile = state_of("h100-mig")
    gpu = profile.mig[0]
    layout = (GpuInstance(1, "7g.80gb", 0, 0, 8, 7, (ComputeInstance(0, "7g.80gb", 7, 0),)),)
    pf = next(fn for fn in profile.functions if fn.sriov is not None)
    writes = WriteBook({(pf.bdf, "sriov_numvfs"): Write(pf.bdf, "sriov_numvfs", "4", 1e9)})
    return Layers(book, MigBook({gpu.minor: (gpu.instances, layout)}), writes), profile


def test_mig_layouts_and_writes_survive_a_restart_and_end_at_a_reboot(tmp_path: Path) -> None:
    layers, profile = _layers_with_mig_and_writes(FaultBook())
    text = record(layers, profile, "boot-1", 10.0, 1e9)
    back = restore(text, "boot-1", 20.0, 1e9 + 10)
    assert back.layers.mig.layouts == layers.mig.layouts
    assert back.layers.writes.writes == layers.writes.writes and back.ended == []
    served = restored_state(profile, back, 20.0)
    assert served.mig[0].instances == layers.mig.layouts[profile.mig[0].minor][1]
    pf = next(iter(layers.writes.writes))[0]
    sriov = served.function(pf).sriov
    assert sriov is not None and sriov.numvfs == 4
    after = restore(text, "boot-2", 5.0, 1e9 + 100)
    assert after.layers.mig.layouts == {} and after.layers.writes.writes == {}
    assert after.ended == ["1 MIG layouts set at run time: a reboot ends them, as a real node's",
                           "1 sysfs writes set at run time: a reboot ends them, as a real "
                           "node's"]


@pytest.mark.parametrize("bad", [{"attribute": "vendor"}, {"value": "4; rm"},
                                 {"bdf": "../x"}])
def test_a_kept_write_the_view_would_not_take_is_refused(tmp_path: Path,
                                                         bad: dict[str, str]) -> None:
    layers, profile = _layers_with_mig_and_writes(FaultBook())
    data = json.loads(record(layers, profile, "boot-1", 10.0, 1e9))
    data["writes"][0].update(bad)
    with pytest.raises(StateFileError, match=r"writes\.0"):
        restore(json.dumps(data), "boot-1", 20.0, 1e9)


def _kept_layout(edit: Callable[[list[dict[str, object]]], None]) -> tuple[str, State]:
    """A state file whose run-time layout (two 3g GIs, IDs 1 and 2) ``edit`` changed."""
    profile = state_of("h100-mig")
    gpu = profile.mig[0]
    layout = (GpuInstance(1, "3g.40gb", 9, 0, 4, 3, (ComputeInstance(0, "3g.40gb", 3, 0),)),
              GpuInstance(2, "3g.40gb", 9, 4, 4, 3, (ComputeInstance(0, "1c.3g.40gb", 1, 2),
                                                     ComputeInstance(1, "2c.3g.40gb", 2, 0))))
    layers = Layers(FaultBook(), MigBook({gpu.minor: (gpu.instances, layout)}))
    data = json.loads(record(layers, profile, "boot-1", 10.0, 1e9))
    edit(data["mig"][0]["layout"])
    return json.dumps(data), profile


def _restored(text: str, profile: State) -> State:
    return restored_state(profile, restore(text, "boot-1", 20.0, 1e9), 20.0)


def test_a_restored_layout_is_checked_as_mokkafs_mig_checks_one() -> None:
    text, profile = _kept_layout(lambda gis: None)
    assert _restored(text, profile).mig[0].instances[1].compute[1].profile == "2c.3g.40gb"
    bad: dict[str, Callable[[list[dict[str, object]]], None]] = {
        "mig[0].layout[1]: GPU instance ID 1 is already taken": lambda gis: gis[1].update(id=1),
        "mig[0].layout[0].profile: not a GPU instance profile of H100": lambda gis: gis[0].update(
            profile="../../x"),
        "mig[0].layout[1].placement_start: 3g.40gb cannot start at 2": lambda gis: gis[1].update(
            start=2),
        "mig[0].layout[1].compute[0].profile: not a compute instance profile of 3g.40gb":
            lambda gis: gis[1]["compute"][0].update(profile="../y"),  # type: ignore[index]
        "mig[0].layout: its profile IDs, sizes or slices are not those of its profiles":
            lambda gis: gis[0].update(profile_id=19),
    }
    for why, edit in bad.items():
        text, profile = _kept_layout(edit)
        with pytest.raises(StateFileError) as caught:
            _restored(text, profile)
        assert why in str(caught.value), str(caught.value)
        assert "make the layout again with mokkafs mig" in str(caught.value)
        assert "../" not in str(caught.value)  # names what is wrong, never quotes the file


@pytest.mark.parametrize(("field", "value"), [("id", 65536), ("id", 15), ("start", 8),
                                                ("slices", 0)])
def test_a_restored_layout_past_the_hardwares_bounds_is_refused(field: str,
                                                                value: int) -> None:
    text, _ = _kept_layout(lambda gis: gis[0].update({field: value}))
    with pytest.raises(StateFileError, match=rf"mig\.0\.layout\.0\.{field}"):
        restore(text, "boot-1", 20.0, 1e9)


def test_each_refused_file_is_kept_apart_and_only_the_newest(tmp_path: Path,
                                                             expected_logs: list[str]) -> None:
    expected_logs.append("state file .* refused")
    keeper = StateFile(tmp_path / "s.json", "boot-1")
    for n in range(MAX_REFUSED + 2):
        keeper.path.write_text(f"not JSON {n}")
        os.chmod(keeper.path, 0o600)
        assert keeper.load(0.0)[0] is None
    asides = sorted(p for p in os.listdir(tmp_path) if p.startswith("s.json.refused."))
    assert len(asides) == MAX_REFUSED
    assert [(tmp_path / p).read_text() for p in asides] == \
        [f"not JSON {n}" for n in range(2, MAX_REFUSED + 2)]


def test_layers_that_fail_to_build_at_start_are_set_aside(tmp_path: Path,
                                                         expected_logs: list[str]) -> None:
    """Whatever the checks let by: the start goes on, with the profile alone."""
    expected_logs.append("state file .* refused: its layers do not apply to the profile "
                         r"\(TreeError: two at x\)")
    text, profile = _kept_layout(lambda gis: None)
    keeper = StateFile(tmp_path / "s.json", "boot-1")
    keeper.path.write_text(text)
    os.chmod(keeper.path, 0o600)

    def build(state: State) -> str:
        if state.mig[0].instances != profile.mig[0].instances:
            raise TreeError("two at x")
        return "built"

    status = Status()
    state, layers, built = restore_at_start(keeper, profile, 20.0, status, build)
    assert (state, layers, built) == (profile, None, "built")
    assert status.state_refused is not None and "TreeError: two at x" in status.state_refused
    assert not keeper.path.exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith("s.json.refused.")]
