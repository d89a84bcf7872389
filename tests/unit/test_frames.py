"""The compiling process's answers: every shipped profile's State comes back whole, its
slotted dataclasses pickled the quick way (``mokkafs.frames``)."""

from __future__ import annotations

import pickle
import pickletools

import pytest

from mokkafs.frames import dumps, rebuilt
from mokkafs.model.pci import PciFunction
from tests.helpers.profiles import ALL_PROFILES, state_of


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=lambda p: p.stem)
def test_a_state_comes_back_equal(profile: object) -> None:
    state = state_of(profile)  # type: ignore[arg-type]
    frame = dumps(("state", state))
    kind, back = pickle.loads(frame)
    assert kind == "state" and back == state
    assert type(back) is type(state) and back is not state


def test_slotted_dataclasses_go_by_rebuilt_and_others_as_pickle_does() -> None:
    state = state_of("h100")
    ops = list(pickletools.genops(dumps(state)))
    strings = {arg for _, arg, _ in ops if isinstance(arg, str)}
    assert {"mokkafs.frames", rebuilt.__name__} <= strings
    # No object was given its state after being made (BUILD: what __setstate__ answers).
    assert "BUILD" not in {op.name for op, _, _ in ops}
    assert "BUILD" in {op.name for op, _, _ in pickletools.genops(pickle.dumps(state, 5))}
    functions = [f for f in state.functions if type(f) is PciFunction]
    assert functions  # a subclass of another slotted dataclass: its slots and its base's
    again = pickle.loads(dumps(functions[0]))
    assert again == functions[0] and type(again) is PciFunction
    assert not hasattr(again, "__dict__")  # slots alone, as made
