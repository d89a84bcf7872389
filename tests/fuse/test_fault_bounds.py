"""The control socket refuses faults beyond the node's bound, which counts the profile's faults
and the control socket's together (a real daemon)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.faults import fault_node


def fault_file(path: Path, prefix: str, n: int) -> str:
    path.write_text("faults:\n" + "".join(
        f"  - {{name: {prefix}{i}, kind: gpu-lost, target: gpu0, after: 3600}}\n"
        for i in range(n)))
    return str(path)


def test_the_control_socket_refuses_faults_beyond_the_bound(tmp_path: Path) -> None:
    profile = "faults:\n" + "".join(
        f"  - {{name: p{i}, kind: gpu-lost, target: gpu1, after: 3600}}\n" for i in range(250))
    with fault_node(tmp_path, profile) as node:
        many = node.fault("apply", fault_file(tmp_path / "many.yaml", "m", 65))
        assert many.returncode == 2, many.stderr
        assert "many.yaml" in many.stderr and "faults: List should have at most 64 items" \
            in many.stderr
        over = node.fault("apply", fault_file(tmp_path / "over.yaml", "o", 7))
        assert over.returncode == 2, over.stderr
        assert "over.yaml: faults: with the 250 faults the node holds already" in over.stderr
        assert "257 faults, and a node holds 256 at most" in over.stderr
        assert len(node.states()) == 250  # nothing changed
        fits = node.fault("apply", fault_file(tmp_path / "fits.yaml", "o", 6))
        assert fits.returncode == 0, fits.stderr
        assert len(node.states()) == 256
