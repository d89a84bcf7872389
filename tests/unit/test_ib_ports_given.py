"""Port GUIDs and LIDs a profile gives as they are (``infiniband.devices[i].ports``, what a
capture writes where mokkafs would not make them): served whatever the node's name or index,
refused with the field named when they cannot be, and the capture's choice between a name,
an index and keeping them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mokkafs.capture.infiniband import IbIdentity, port_identity
from mokkafs.errors import ProfileError
from mokkafs.model import identity
from mokkafs.state import State
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import state_of

H100 = (SHIPPED_PROFILES / "h100.yaml").read_text()
DEVICE = re.compile(r"(    - \{bus_id: \"[0-9a-f:.]+\", name: mlx5_\d+)\}")


def given(tmp_path: Path, ports: list[str | None]) -> Path:
    """h100 with each HCA's ``ports`` flow text (None: not given)."""
    found = iter(ports)

    def one(m: re.Match[str]) -> str:
        text = next(found, None)
        return m.group(0) if text is None else f"{m.group(1)}, ports: {text}}}"

    path = tmp_path / "given.yaml"
    path.write_text(DEVICE.sub(one, H100))
    return path


def port(n: int) -> str:
    return f"[{{guid: \"b83f:d203:00a1:{n:04x}\", lid: {0x100 + n:#x}}}]"


def ids(state: State) -> list[list[tuple[int, int]] | None]:
    return [[(p.guid, p.lid) for p in h.ports] for h in state.hcas]


def test_ports_given_are_served_whatever_the_node(tmp_path: Path) -> None:
    path = given(tmp_path, [port(n) for n in range(12)])
    for kw in ({"node_name": "a"}, {"node_name": "b", "node_index": 7}):
        hcas = state_of(path, **kw).hcas
        assert [identity.format_guid(h.node_guid) for h in hcas] == \
            [f"b83f:d203:00a1:{n:04x}" for n in range(12)]
        assert [h.ports[0].lid for h in hcas] == [0x100 + n for n in range(12)]
        assert all(h.sys_image_guid == h.ports[0].guid == h.node_guid for h in hcas)


@pytest.mark.parametrize(("ports", "where", "said"), [
    ([port(0)], "infiniband.devices", "1 of 12 HCAs give their ports"),
    ([port(n) for n in range(11)] + ["[]"], "infiniband.devices[11].ports", "at least 1"),
    ([port(n) for n in range(11)] + [port(0)[:-1] + ", " + port(1)[1:]],
     "infiniband.devices[11].ports", "2 ports given; ports_per_hca is 1"),
    ([port(n) for n in range(11)] + [port(3)], "infiniband.devices[11].ports[0].guid",
     "b83f:d203:00a1:0003 is another port's GUID"),
    ([port(n) for n in range(11)] + ["[{guid: \"0000:0000:0000:0001\", lid: 0x100}]"],
     "infiniband.devices[11].ports[0].lid", "LID 0x100 is another port's"),
    ([port(n) for n in range(11)] + ["[{guid: \"b83f:d203:00a1\", lid: 0xc000}]"],
     "infiniband.devices[11].ports[0]", "expected a GUID such as"),
])
def test_ports_that_cannot_be_are_refused_naming_the_field(
        tmp_path: Path, ports: list[str | None], where: str, said: str) -> None:
    with pytest.raises(ProfileError) as caught:
        state_of(given(tmp_path, ports))
    text = str(caught.value)
    assert where in text and said in text, text


def test_a_capture_keeps_the_name_or_index_that_makes_them_else_the_ports() -> None:
    named = state_of("h100", node_name="node-a")
    assert port_identity(ids(named), "946dae", "node-a", 1) == IbIdentity()
    indexed = state_of("h100", node_name="node-a", node_index=17)
    assert port_identity(ids(indexed), "946dae", "node-a", 1) == IbIdentity(17)
    # made from another name than the capture's (a mount without --node-name): the index
    # the GUIDs carry is a hash beyond the LID space, so only the ports themselves serve
    assert port_identity(ids(named), "946dae", "captured", 1) == IbIdentity(keep=True)
    real = [[(0xB83FD20300A10000 + n, 0x100 + n)] for n in range(12)]
    assert port_identity(real, "b83fd2", "node-a", 1) == IbIdentity(keep=True)
    assert port_identity([*real[:11], None], "b83fd2", "node-a", 1) is None
