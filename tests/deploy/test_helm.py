"""The Helm chart, rendered by a real Helm (helm-python-sdk: Helm's Go code as a library) and
validated against the Kubernetes schemas (kubernetes-validate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from mokkafs.delivery.records import RECORDS
from mokkafs.profile.compile import Options, compile_profile
from mokkafs.profile.load import parse
from tests.helpers.helm import CHART, container, render
from tests.helpers.mounts import NVML_MOCK_PROFILES, SHIPPED_PROFILES

K8S_VERSION = "1.30.0"


def validate_all(docs: dict[str, list[dict[str, Any]]]) -> None:
    for kind, items in docs.items():
        for doc in items:
            if kind == "ServiceMonitor":  # a CRD: no schema in Kubernetes itself
                assert doc["apiVersion"] == "monitoring.coreos.com/v1"
                assert doc["spec"]["endpoints"][0]["port"] == "metrics"
                continue
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def served_profile(docs: dict[str, list[dict[str, Any]]]) -> int:
    """Compile the ConfigMap's profile as the daemon will; return its GPU count."""
    text = docs["ConfigMap"][0]["data"]["node.yaml"]
    profile, lines = parse(text, "configmap/node.yaml")
    state = compile_profile(profile, lines, "configmap/node.yaml", Options(node_name="n"))
    return len([f for f in state.functions if f.kind == "gpu"])


def test_default_values() -> None:
    docs = render({})
    validate_all(docs)
    assert sorted(docs) == ["ConfigMap", "DaemonSet", "Service"]
    assert served_profile(docs) == 8
    pod = docs["DaemonSet"][0]["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    c = container(docs)
    assert c["securityContext"]["privileged"] is True
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts["mounts"]["mountPropagation"] == "Bidirectional"
    assert mounts["mounts"]["mountPath"] == "/run/mokkafs"
    assert mounts["dev-fuse"]["mountPath"] == "/dev/fuse"
    assert mounts["cdi"]["mountPath"] == "/var/run/cdi"
    assert mounts["records"]["mountPath"] == str(RECORDS)  # where the node's hook writes
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dev-fuse"]["hostPath"] == {"path": "/dev/fuse", "type": "CharDevice"}
    assert volumes["profile"]["configMap"]["name"] == "demo-mokkafs-profile"
    # the lock and record outlive a restarted container: a new one adopts what it left
    assert volumes["runtime"]["hostPath"]["path"] == mounts["runtime"]["mountPath"] \
        == "/run/mokkafs-runtime"
    assert volumes["records"]["hostPath"]["path"] == str(RECORDS)
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "POD_IP": "status.podIP"}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # The probes go to their own listener, never to the metrics port's slots.
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"]["port"] == "health"
    assert c["readinessProbe"]["httpGet"]["port"] == "health"
    assert f"--health=$(POD_IP):{ports['health']}" in c["args"]
    assert f"--metrics=$(POD_IP):{ports['metrics']}" in c["args"]
    assert ports["health"] != ports["metrics"]
    assert "--node-name=$(NODE_NAME)" in c["args"]
    assert "--cdi-hook=/opt/mokkafs/bin/mokkafs-hook" in c["args"]
    # the NVML library the spec binds into pods: the node's copy, not the pod's
    assert "--cdi-nvml=/opt/mokkafs/lib/libnvidia-ml.so.1" in c["args"]
    assert c["args"][-1] == "/run/mokkafs/node"
    assert "--no-infiniband" not in c["args"]
    # run-time faults outlive the pod and the node's boot
    assert "--state-dir=/var/lib/mokkafs" in c["args"]
    assert mounts["state"]["mountPath"] == "/var/lib/mokkafs"
    assert volumes["state"]["hostPath"] == {"path": "/var/lib/mokkafs",
                                            "type": "DirectoryOrCreate"}
    init = pod["initContainers"][0]
    assert "/host-hook/mokkafs-hook" in init["command"][-1]
    assert "/usr/local/lib/mokkafs/libnvidia-ml.so.1 /host-lib/libnvidia-ml.so.1" \
        in init["command"][-1]
    assert {m["name"]: m["mountPath"] for m in init["volumeMounts"]}["nvml-lib"] == "/host-lib"
    assert volumes["nvml-lib"]["hostPath"] == {"path": "/opt/mokkafs/lib",
                                               "type": "DirectoryOrCreate"}
    assert "mkdir -p /run/mokkafs/node" in init["command"][-1]


@pytest.mark.parametrize("name", sorted(p.stem for p in SHIPPED_PROFILES.glob("*.yaml")))
def test_each_shipped_profile(name: str) -> None:
    docs = render({"profile": {"name": name}})
    validate_all(docs)
    assert docs["ConfigMap"][0]["data"]["node.yaml"] == (SHIPPED_PROFILES / f"{name}.yaml"
                                                         ).read_text()
    assert served_profile(docs) == (4 if name in ("t4", "gb200", "gb300") else 8)


def test_infiniband_off() -> None:
    docs = render({"surfaces": {"infiniband": False}})
    validate_all(docs)
    assert "--no-infiniband" in container(docs)["args"]


def test_host_dev_makes_the_nodes_in_the_nodes_own_dev() -> None:
    assert "--host-dev" not in container(render({}))["args"]
    docs = render({"hostDev": {"enabled": True}})
    validate_all(docs)
    c = container(docs)
    assert {"--host-dev", "--host-dev-root=/host-dev"} <= set(c["args"])
    mounted = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in docs["DaemonSet"][0]["spec"]["template"]["spec"]["volumes"]}
    assert mounted["host-dev"] == "/host-dev"
    assert volumes["host-dev"]["hostPath"] == {"path": "/dev", "type": "Directory"}


def test_inline_profile_and_service_monitor() -> None:
    inline = (NVML_MOCK_PROFILES / "t4.yaml").read_text()
    docs = render({"profile": {"inline": inline},
                   "metrics": {"serviceMonitor": {"enabled": True, "labels": {"team": "x"}}},
                   "nodeSelector": {"mokkafs.io/simulated": "true"},
                   "tolerations": [{"operator": "Exists"}]})
    validate_all(docs)
    assert served_profile(docs) == 4
    assert docs["ServiceMonitor"][0]["metadata"]["labels"]["team"] == "x"
    pod = docs["DaemonSet"][0]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"mokkafs.io/simulated": "true"}


def test_unknown_profile_name_fails_with_a_clear_message() -> None:
    with pytest.raises(Exception, match="not a shipped profile"):
        render({"profile": {"name": "h900"}})


def test_chart_links_the_shipped_profiles() -> None:
    assert (CHART / "profiles").resolve() == SHIPPED_PROFILES.resolve()
    assert Path(CHART / "values.yaml").read_text().count("name: h100") == 1
