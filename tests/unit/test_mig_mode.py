"""MIG modes set at run time (mokkafs.layers.mig_mode, the MIG book's ``modes``): refused as
the driver refuses them, served as the profile's modes are, ended by a profile that changes
the GPU's mode, kept in the state file (a reboot ends the layouts, not the modes, as a real
GPU keeps its mode), and checked again when restored."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mokkafs.errors import UsageError
from mokkafs.faults.effects import applied
from mokkafs.layers.layer import StateFileError
from mokkafs.layers.mig import MIG, MigBook
from mokkafs.layers.mig_mode import set_mode as set_modes
from mokkafs.layers.registry import Layers
from mokkafs.serve.record import record, restore, restored_state
from mokkafs.state import State
from tests.helpers.profiles import state_of


@pytest.fixture(scope="module")
def profile() -> State:
    return applied(state_of("h100-mig"), 0.0)


def set_mode(book: MigBook, profile: State, index: int, on: bool) -> bool | None:
    return set_modes(book.modes, book.layouts, book.over(profile), profile, index, on)


def minors(state: State) -> dict[int, int]:
    return {g.minor: len(g.instances) for g in state.mig}


def test_modes_change_as_the_driver_changes_them(profile: State) -> None:
    assert minors(profile) == {0: 4, 1: 7, 2: 2, 3: 1}
    book = MigBook()
    assert set_mode(book, profile, 5, True) is None
    assert set_mode(book, profile, 5, True) is False  # already on
    assert minors(book.over(profile))[5] == 0
    with pytest.raises(UsageError, match=r"Unable to disable MIG Mode for GPU 3: In use by "
                       r"another client \(GPU instances 0;"):
        set_mode(book, profile, 3, False)
    book.layouts[3] = (profile.mig[3].instances, ())
    set_mode(book, profile, 3, False)
    assert 3 not in minors(book.over(profile)) and 3 not in book.layouts
    set_mode(book, profile, 3, True)  # as the profile boots it, the instances gone
    assert book.modes == {5: True} and book.layouts[3] == (profile.mig[3].instances, ())
    assert minors(book.over(profile))[3] == 0
    with pytest.raises(UsageError, match="no GPU 9"):
        set_mode(book, profile, 9, True)


def test_a_gpu_without_mig_is_refused() -> None:
    gb200 = state_of("gb200")
    with pytest.raises(UsageError, match="Unable to enable MIG Mode for GPU 0: Not Supported "
                       r"\(mokkafs has no MIG table of PCI device 2941\)"):
        set_mode(MigBook(), gb200, 0, True)


def test_a_profile_that_changes_the_mode_ends_the_entry(profile: State) -> None:
    book = MigBook()
    set_mode(book, profile, 5, True)
    booted = replace(profile, mig=(*profile.mig, replace(profile.mig[3], bdf=next(
        fn.bdf for fn in profile.gpus() if fn.gpu and fn.gpu.minor == 5), minor=5)))
    served = MIG.over(book, booted)
    assert book.modes == {} and minors(served)[5] == 1  # the profile's own


def test_modes_outlive_a_reboot_and_are_checked_again(profile: State) -> None:
    book = MigBook()
    set_mode(book, profile, 5, True)
    book.layouts[3] = (profile.mig[3].instances, ())
    layers = Layers(book)
    text = record(layers, layers.over(profile), "boot-1", 10.0, 1e9)
    doc = json.loads(text)
    assert doc["mig_modes"] == [{"minor": 5, "mode": 1}]
    same = restore(text, "boot-1", 20.0, 1e9 + 10)
    assert same.layers.mig == book
    rebooted = restore(text, "boot-2", 5.0, 1e9 + 10)
    assert rebooted.layers.mig == MigBook(modes={5: True})
    assert rebooted.ended == ["1 MIG layouts set at run time: a reboot ends them, as a "
                              "real node's"]
    assert minors(restored_state(profile, rebooted, 5.0))[5] == 0
    # a GPU without MIG turned on, or a layout kept of a GPU turned off: set aside
    gb200 = state_of("gb200")
    with pytest.raises(StateFileError, match=r"mig_modes\[0\]: MIG turned on for a GPU that "
                       "has no MIG mode"):
        restored_state(gb200, restore(json.dumps({**doc, "mig": [], "mig_modes": [
            {"minor": 0, "mode": 1}]}), "boot-1", 20.0, 1e9), 20.0)
    with pytest.raises(StateFileError, match="MIG turned off for a GPU whose layout"):
        restored_state(profile, restore(json.dumps({**doc, "mig_modes": [
            {"minor": 3, "mode": 0}]}), "boot-1", 20.0, 1e9), 20.0)
    with pytest.raises(StateFileError, match="mig_modes"):
        restore(json.dumps({**doc, "mig_modes": [{"minor": 3, "mode": 2}]}), "boot-1", 20.0, 1e9)


def test_a_placement_is_made_where_asked_or_refused(profile: State) -> None:
    from mokkafs.errors import ProfileError
    from mokkafs.layers.mig_change import change

    empty, device = replace(profile.mig[3], instances=()), profile.gpus()[3].device
    made = change(empty, device, {"action": "cgi", "gpu": 3, "profiles": ["9", "19"],
                                  "starts": [0, None]})
    assert [(gi.id, gi.start) for gi in made] == [(1, 0), (13, 6)]  # None: the driver's
    with pytest.raises(ProfileError, match=r"3g\.40gb cannot start at 2"):
        change(empty, device, {"action": "cgi", "gpu": 3, "profiles": ["9"], "starts": [2]})
    for starts in (["0"], [True], [-1], [0, 4], 0):
        with pytest.raises(UsageError, match="starts must be"):
            change(empty, device, {"action": "cgi", "gpu": 3, "profiles": ["9"],
                                   "starts": starts})
