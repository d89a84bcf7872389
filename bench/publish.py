"""Publishing a full sweep: its tables into bench/README.md, between the markers."""

from __future__ import annotations

from bench.harness import REPO, RESULTS, log


def publish(report: str) -> None:
    """Put the full sweep's tables into bench/README.md between its markers."""
    readme = REPO / "bench" / "README.md"
    text = readme.read_text()
    begin, end = "<!-- full-sweep:begin -->\n", "<!-- full-sweep:end -->"
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise SystemExit(f"{readme}: markers {begin.strip()} / {end} not found")
    readme.write_text(head + begin + report + "\n" + end + rest.partition(end)[2])
    (RESULTS / "full.md").write_text(report)
    log(f"wrote the summary into {readme.relative_to(REPO)}")
