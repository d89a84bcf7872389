"""The Helm chart rendered by a real Helm (helm-python-sdk: Helm's Go code as a library)."""

from __future__ import annotations

from typing import Any

import yaml
from helm_python.chart import Chart

from tests.helpers.mounts import REPO

CHART = REPO / "deploy/helm/mokkafs"


def render(values: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    with Chart.load(CHART) as chart:
        files = chart.render(values=values, name="demo")
    docs: dict[str, list[dict[str, Any]]] = {}
    for text in files.values():
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.setdefault(doc["kind"], []).append(doc)
    return docs


def container(docs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    spec = docs["DaemonSet"][0]["spec"]["template"]["spec"]
    result: dict[str, Any] = spec["containers"][0]
    return result
