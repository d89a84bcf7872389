"""``--anonymize``: stable pseudonyms (the same capture twice gives the same profile), every
distinct value keeps a distinct pseudonym, no original remains, and the output says what was
replaced. Captured from a rendered view (``mokkafs render``): a plain tree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from mokkafs.capture.anonymize import UUID, anonymize
from tests.helpers.captures import mounted
from tests.helpers.mounts import REPO, SHIPPED_PROFILES


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mokkafs", *args], capture_output=True,
                          text=True, timeout=300, cwd=REPO)


def test_anonymized_captures_are_stable_unique_and_say_what_they_replaced(
        tmp_path: Path) -> None:
    tree = tmp_path / "view"
    assert run("render", "--profile", str(SHIPPED_PROFILES / "h100.yaml"), "--node-name",
               "dgx-lab-07", str(tree)).returncode == 0
    plain = run("capture", "--root", str(tree), "--node-name", "dgx-lab-07")
    first = run("capture", "--root", str(tree), "--node-name", "dgx-lab-07", "--anonymize")
    second = run("capture", "--root", str(tree), "--node-name", "dgx-lab-07", "--anonymize")
    assert plain.returncode == first.returncode == second.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    uuids = sorted(set(UUID.findall(plain.stdout)))
    assert len(uuids) == 8  # the GPUs'
    assert not any(u in first.stdout for u in uuids)
    assert "dgx-lab-07" not in first.stdout
    assert len(set(UUID.findall(first.stdout))) == len(uuids)
    assert "anonymized: replaced 8 distinct UUIDs" in first.stderr
    assert "anonymized: replaced 1 distinct host names" in first.stderr
    assert "# anonymized: replaced 8 distinct UUIDs" in first.stdout
    doc = yaml.safe_load(first.stdout)
    assert re.fullmatch(r"node-[0-9a-f]{8}", doc["node"]["name"])
    anonymized = tmp_path / "anonymized.yaml"
    anonymized.write_text(first.stdout)
    with mounted(anonymized, tmp_path, "--node-name", doc["node"]["name"]) as mount:
        served = sorted(p.name for p in (mount.sys / "class/infiniband").iterdir())
        assert served == sorted(d["name"] for d in doc["infiniband"]["devices"])
        uuids_served = (mount.path / "proc/driver/nvidia/gpus").iterdir()
        assert not any(u in (g / "information").read_text() for g in uuids_served
                       for u in uuids)


def test_pseudonyms_keep_format_and_distinctness() -> None:
    doc = {"a": ["0123:4567:89ab:cdef", "0123:4567:89ab:cdee", "52:54:00:12:34:56"],
           "serial": "1320221234567", "text": "host-1 mlx5_0",
           "vpd": "82", "config": "0123:4567:89ab:cdef"}
    out, lines = anonymize(doc, "host-1")
    a, b, mac = out["a"]
    assert a != b and a != doc["a"][0] and re.fullmatch(r"([0-9a-f]{4}:){3}[0-9a-f]{4}", a)
    assert re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac) and mac != doc["a"][2]
    assert len(out["serial"]) == 13 and out["serial"].isdigit()
    assert out["text"].endswith(" mlx5_0") and "host-1" not in out["text"]
    assert "vpd" not in out and out["config"] == doc["config"]  # bytes are not text
    assert anonymize(doc, "host-1") == (out, lines)
    assert "replaced 2 distinct GUIDs" in lines and "replaced 1 distinct MAC addresses" in lines
