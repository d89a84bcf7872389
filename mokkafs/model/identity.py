"""Node-unique InfiniBand identities: port GUIDs and LIDs for a fleet of simulated nodes.

Layout of every GUID (64 bits)::

    | OUI (24, from guid_prefix) | node id (32) | slot (8) |

A node has 256 slots; port ``p`` (1-based) of HCA ``i`` uses slot ``i * ports + p - 1``, and an
HCA's node GUID is the GUID of its first port, as on ConnectX parts.

The node id is the node index when one is given (``node.index`` in the profile or
``--node-index``): GUIDs and LIDs are then unique by construction across every index. Without an
index the node id is a 32-bit hash of the node name: GUIDs of n nodes collide with probability
about n^2 / 2^33 (5,000 nodes: 0.3 %), and LIDs, which live in the 49,150 unicast values
0x0002-0xbfff, collide as soon as two names hash to the same bucket, which for fleets beyond a
few dozen nodes is likely. Fleets that need unique LIDs must give indices.

LID 1 is the subnet manager's (every port's ``sm_lid``); node ``k`` owns LIDs
``2 + k * S ... 2 + k * S + S - 1`` where ``S`` is its number of ports.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

SLOTS_PER_NODE = 256
SM_LID = 0x0001
FIRST_LID = 0x0002
LAST_UNICAST_LID = 0xBFFF


def name_hash32(node_name: str) -> int:
    return int.from_bytes(hashlib.blake2b(node_name.encode(), digest_size=4).digest(), "big")


@dataclass(frozen=True)
class NodeIdentity:
    oui: int
    node_id: int
    lid_base: int

    @classmethod
    def derive(cls, node_name: str, node_index: int | None, guid_prefix: str,
               ports: int) -> NodeIdentity:
        """Identity of one node with ``ports`` IB ports in all. Raises ValueError when the
        node index does not fit the LID space."""
        oui = int(guid_prefix.replace(":", "")[:6], 16)
        per_node = max(ports, 1)
        buckets = (LAST_UNICAST_LID - FIRST_LID + 1) // per_node
        if node_index is not None:
            if node_index >= buckets or node_index >= 1 << 32:
                raise ValueError(
                    f"node index {node_index} is too large: with {per_node} IB ports per node "
                    f"only indices 0-{buckets - 1} get unicast LIDs (0x0002-0xbfff)")
            node_id, bucket = node_index, node_index
        else:
            node_id = name_hash32(node_name)
            bucket = node_id % buckets
        return cls(oui=oui, node_id=node_id, lid_base=FIRST_LID + bucket * per_node)

    def guid(self, slot: int) -> int:
        return (self.oui << 40) | (self.node_id << 8) | slot

    def lid(self, slot: int) -> int:
        return self.lid_base + slot


def format_guid(guid: int) -> str:
    """The kernel's sysfs form: four groups of four hex digits."""
    h = f"{guid:016x}"
    return f"{h[0:4]}:{h[4:8]}:{h[8:12]}:{h[12:16]}"
