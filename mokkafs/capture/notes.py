"""What a capture could not take, one line per kind of thing, and what it replaced."""

from __future__ import annotations

from dataclasses import dataclass, field

EXAMPLES = 2  # paths named per kind


@dataclass
class Notes:
    """``kind -> the paths (or things) it applies to``, in the order first met."""

    kinds: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, what: str) -> None:
        self.kinds.setdefault(kind, []).append(what)

    def lines(self) -> list[str]:
        out = []
        for kind, items in self.kinds.items():
            shown = ", ".join(repr(i) if "\n" in i else i for i in items[:EXAMPLES])
            more = f" and {len(items) - EXAMPLES} more" if len(items) > EXAMPLES else ""
            out.append(f"{kind}: {len(items)} ({shown}{more})")
        return out
