"""The run-time layers (mokkafs.layers): their one order, and what the docs say of it; each
layer's sections of the state file, recorded and restored; a state file of the version before
the layers had a package, read back as it was; the control socket's requests, each reaching
its layer; and one change of a layer, as the swapper makes it."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import trio

from mokkafs.errors import EXIT_USAGE, UsageError
from mokkafs.faults.book import FaultBook
from mokkafs.faults.effects import applied
from mokkafs.layers.faults import FAULTS
from mokkafs.layers.layer import Book, Layer, StateFileError, Written
from mokkafs.layers.mig import MIG, MigBook
from mokkafs.layers.registry import LAYERS, Layers
from mokkafs.layers.writes import WRITES
from mokkafs.model.mig import ComputeInstance, GpuInstance
from mokkafs.profile.schema import Fault
from mokkafs.serve.control import handle
from mokkafs.serve.record import record, restore, restored_state
from mokkafs.state import State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler
from mokkafs.writes.book import Write, WriteBook
from mokkafs.writes.dynids import DynId
from tests.helpers.mounts import REPO
from tests.helpers.profiles import state_of
from tests.helpers.swapper import swapper_of

# A state file the version before this package wrote (its record and restore in serve/): MIG
# layouts, faults applied (one twice) and a profile fault cleared, a write, a dynamic ID.
V1 = REPO / "tests/data/state-files/v1.json"
DOWN = Fault.model_validate({"name": "down", "kind": "ib-port-down", "target": "mlx5_0/1",
                             "for": 600})
LAYOUT = (GpuInstance(1, "3g.40gb", 9, 0, 4, 3, (ComputeInstance(0, "3g.40gb", 3, 0),)),
          GpuInstance(2, "3g.40gb", 9, 4, 4, 3, (ComputeInstance(0, "1c.3g.40gb", 1, 2),
                                                 ComputeInstance(1, "2c.3g.40gb", 2, 0))))


@pytest.fixture(scope="module")
def profile() -> State:
    return applied(state_of("h100-mig"), 0.0)


def books(profile: State) -> tuple[MigBook, FaultBook, WriteBook]:
    """One book of each layer that keeps something: a MIG layout and a MIG mode, a fault
    applied twice and a profile fault cleared, a write and a dynamic ID."""
    gpu = profile.mig[0]
    faults = FaultBook()
    faults.apply([DOWN], profile, "f.yaml")
    faults.apply([DOWN], profile, "f.yaml")
    faults.held = {"own": "ab" * 32}
    pf = next(fn for fn in profile.functions if fn.sriov is not None)
    writes = WriteBook({(pf.bdf, "sriov_numvfs"): Write(pf.bdf, "sriov_numvfs", "4", 1e9)},
                       dynids={"nvidia": (DynId(0x10DE, 0x2330, at=1e9 + 1),)})
    return MigBook({gpu.minor: (gpu.instances, LAYOUT)}, {5: True}), faults, writes


def test_the_registry_is_the_one_order_and_layers_over_follows_it(profile: State) -> None:
    """MIG layouts first, then the faults, then the writes: as ``Layers.over`` applies them,
    and as the state file restores them."""
    assert [layer.name for layer in LAYERS] == ["mig", "faults", "writes"]
    assert LAYERS == (MIG, FAULTS, WRITES)
    mig, faults, writes = books(profile)
    by_hand = writes.copy().merge(faults.copy().merge(mig.over(profile)))
    assert Layers(writes, faults, mig).over(profile) == by_hand
    assert by_hand.mig != profile.mig and by_hand.faults != profile.faults


DOCS = {"docs/writes.md", "docs/faults.md", "docs/glossary.md", "docs/architecture.md"}
WORDS = {"mig": "MIG", "faults": "fault", "writes": "write"}  # how the docs name each layer


@pytest.mark.parametrize("doc", sorted(DOCS))
def test_the_docs_state_the_registrys_order(doc: str) -> None:
    """Where a doc names ``LAYERS`` and then every layer in one sentence, it names them in
    its order; and each of these docs does, once at least."""
    assert set(WORDS) == {layer.name for layer in LAYERS}, "a new layer: name it in the docs"
    text = " ".join((REPO / doc).read_text().split())
    stated = 0
    for said in re.finditer(r"`LAYERS`", text):
        sentence = text[said.end():].split(". ")[0]
        where = [sentence.find(WORDS[layer.name]) for layer in LAYERS]
        if -1 not in where:
            assert where == sorted(where), (doc, sentence)
            stated += 1
    assert stated, f"{doc} does not state the layers' order after `LAYERS`"


def _same(layer: Layer[Any], book: Book, back: Book) -> None:
    if isinstance(book, FaultBook) and isinstance(back, FaultBook):
        assert (back.control, back.applies, back.held) == (book.control, book.applies,
                                                           book.held)
        assert back.restored == set(book.control)  # until applied again or cleared
    elif isinstance(book, MigBook) and isinstance(back, MigBook):
        assert (back.layouts, back.modes) == (book.layouts, book.modes)
    else:
        assert isinstance(book, WriteBook) and isinstance(back, WriteBook)
        assert (back.writes, back.dynids, back.listing()) == (book.writes, book.dynids,
                                                              book.listing())


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: str(layer.name))
def test_each_layer_records_and_restores_its_book(profile: State, layer: Layer[Any]) -> None:
    """Through the protocol alone: ``record``, JSON, ``schema``, ``restore``, and the same
    book back, which records the same sections."""
    book = next(b for b in books(profile) if isinstance(b, layer.book_type))
    state = applied(Layers(book).over(profile), 100.0)
    sections = json.loads(json.dumps(layer.record(book, state)))
    assert set(sections) == set(layer.schema().model_fields)
    back, origins = layer.restore(layer.schema().model_validate(sections),
                                  Written(clock=300.0, now=500.0))
    _same(layer, book, back)
    assert layer.record(back, state) == sections
    assert origins == ({"down": 100.0} if layer is FAULTS else {})
    assert layer.holds(back) and not layer.holds(layer.book_type())


def test_a_time_kept_is_put_on_the_next_daemons_clock() -> None:
    assert Written(clock=300.0, now=500.0).origin(100.0) == 100.0  # the same boot
    rebooted = Written(clock=300.0, now=5.0, since=100.0)  # 200 s along, down 100 s
    assert rebooted.rebooted and rebooted.origin(100.0) == 5.0 - 300.0


def test_a_state_file_of_the_version_before_is_read_back_as_it_was(profile: State) -> None:
    """Same keys, same values: restored, and recorded again byte for byte but for the compute
    instances' starts, which it has not (they are placed as the daemon places them)."""
    text = V1.read_text()
    back = restore(text, "boot-1", 500.0, 2e9)
    assert back.origins == {"lost": 100.0, "down": 100.0} and back.ended == []
    assert back.layers.faults.applies == {"lost": 1, "down": 2}
    assert back.layers.mig.layouts[profile.mig[0].minor][1] == LAYOUT
    assert [w["value"] for w in back.layers.writes.listing()] == [
        "4", "10de 2330 ffffffff ffffffff 0 0 0"]
    # the origins as a daemon restored from it has them (its own copy: a restore edits)
    state = restored_state(profile, restore(text, "boot-1", 500.0, 2e9), 500.0)
    again = json.loads(record(back.layers, state, "boot-1", 300.0, 1e9 + 5))
    starts = [c.pop("start") for kept in again["mig"] for gi in kept["layout"]
              for c in gi["compute"]]
    assert starts == [c.start for gi in LAYOUT for c in gi.compute]
    for kept in again["mig"]:
        for gi in kept["base"]:
            for c in gi["compute"]:
                del c["start"]
    assert again == json.loads(text)
    rebooted = restore(text, "boot-2", 5.0, 2e9)
    assert rebooted.layers.mig.layouts == {} and rebooted.layers.writes.writes == {}
    assert rebooted.layers.faults.control == back.layers.faults.control
    assert rebooted.ended == [f"1 {what} set at run time: a reboot ends them, as a real node's"
                              for what in ("MIG layouts", "sysfs writes", "dynamic IDs")]


def test_each_book_goes_to_its_layer_and_copies_are_apart(profile: State) -> None:
    mig, faults, writes = books(profile)
    layers = Layers(faults, writes)
    assert layers[FAULTS] is faults and layers.writes is writes
    assert layers.mig == MigBook() and Layers().over(profile) == profile
    copy = layers.copy()
    copy[MIG] = mig
    copy.faults.clear(["down"], profile)
    assert layers.mig == MigBook() and "down" in layers.faults.control
    with pytest.raises(TypeError):
        Layers(faults, FaultBook())


def test_the_empty_layers_leave_no_state_file(profile: State) -> None:
    assert Layers().empty and all(not Layers(b).empty for b in books(profile))


def _answer(profile: State, *requests: dict[str, Any]) -> list[dict[str, Any]]:
    tree, counts = Assembler(SURFACES).build(profile)
    out: list[dict[str, Any]] = []

    async def main() -> None:
        swapper = swapper_of(tree, profile, counts)
        for request in requests:
            out.append(await handle(request, swapper))

    trio.run(main)
    return out


def test_each_control_request_reaches_its_layer(profile: State) -> None:
    """The wire as before: ``list`` shows the faults and the writes; a layer's request
    answers its listing (and, for the writes, how many were cleared)."""
    text = "faults:\n  - {name: down, kind: ib-port-down, target: mlx5_0/1}\n"
    listed, apply, mig, writes, cleared, clear, unknown, odd = _answer(
        profile, {"op": "list"}, {"op": "apply", "file": "f.yaml", "text": text},
        {"op": "mig", "action": "dgi", "gpu": 0}, {"op": "writes"}, {"op": "clear-writes"},
        {"op": "clear", "names": []}, {"op": "nope"}, {"op": ["list"]})
    assert listed == {"ok": True, "faults": [], "writes": []}
    assert set(apply) == {"ok", "faults"} and [f["name"] for f in apply["faults"]] == ["down"]
    assert set(mig) == {"ok", "mig"} and mig["mig"][0]["instances"] == []
    assert writes == cleared == {"ok": True, "writes": [], "cleared": 0}
    assert clear == {"ok": True, "faults": []}
    assert unknown == {"ok": False, "error": "unknown request 'nope'", "exit": EXIT_USAGE}
    assert odd["ok"] is False and odd["exit"] == EXIT_USAGE
    with pytest.raises(UsageError, match="unknown action 'x'"):
        _answer(profile, {"op": "mig", "action": "x"})


def test_a_change_that_changes_nothing_installs_nothing_but_keeps_its_counts(
        profile: State) -> None:
    tree, counts = Assembler(SURFACES).build(profile)

    async def main() -> None:
        swapper = swapper_of(tree, profile, counts)

        def refused(book: WriteBook, served: State) -> bool:
            assert served is swapper.state  # a write is checked against the State served
            book.refuse(16)
            return False

        assert await swapper.change(WRITES, refused) is None
        assert swapper.version == 0 and swapper.layers.writes.refused == {16: 1}

        def seen(book: FaultBook, against: State) -> None:
            assert against is swapper.profile  # a fault, against the profile's
            book.apply([DOWN.model_copy(update={"name": "d2"})], against, "f.yaml")

        installed = await swapper.change(FAULTS, seen)
        assert installed is not None and installed.told.is_set()  # the kernel was told
        assert swapper.version == 1 and "d2" in swapper.layers.faults.control

    trio.run(main)


def test_the_restore_of_a_kept_section_is_checked_by_its_layer() -> None:
    """A layer's section that its schema refuses names the field, as before."""
    data = json.loads(V1.read_text())
    data["mig"][0]["layout"][0]["id"] = 99
    with pytest.raises(StateFileError, match=r"mig\.0\.layout\.0\.id"):
        restore(json.dumps(data), "boot-1", 20.0, 1e9)
