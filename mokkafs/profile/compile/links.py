"""Link training: the PCIe link of each bridge port, from the endpoints below it."""

from __future__ import annotations

from mokkafs.model.bdf import Bdf
from mokkafs.profile.compile.endpoints import Endpoint
from mokkafs.profile.topology import BridgeSpec
from mokkafs.state import PcieLink


def bridge_link(spec: BridgeSpec, kids: list[Bdf], endpoints: dict[Bdf, Endpoint]
                ) -> tuple[PcieLink, list[Bdf], bool]:
    """The link of the bridge ``spec`` with the endpoints ``kids`` below it; the endpoints in
    its slot (on its secondary bus), and whether it faces an endpoint's slot."""
    gen = max((endpoints[k].link.max_gen for k in kids), default=5)
    link = PcieLink(gen, 16, gen, 16)
    facing = spec.port == "downstream" or spec.secondary == spec.subordinate
    slot = [k for k in kids if k.bus == spec.secondary]
    if facing and slot:  # the port whose link goes to the endpoint trains to its link
        first = endpoints[min(slot)].link
        link = PcieLink(max(gen, first.max_gen), max(16, first.max_width),
                        first.current_gen, first.current_width)
    elif facing:  # an empty slot: the link is down (2.5 GT/s, no lanes)
        link = PcieLink(gen, 16, 1, 0)
    return link, slot, facing
