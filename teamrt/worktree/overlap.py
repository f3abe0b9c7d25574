"""Early warning: files that two live worktree agents have both changed, each pair and file told once."""

from __future__ import annotations


class Overlaps:
    def __init__(self) -> None:
        self._paths: dict[str, frozenset[str]] = {}
        self._told: set[tuple[str, str, str]] = set()

    def update(self, agent: str, paths: set[str]) -> dict[str, list[str]]:
        """Record ``agent``'s changed paths; the files newly shared with each other agent, by agent."""
        self._paths[agent] = frozenset(paths)
        found: dict[str, list[str]] = {}
        for other, theirs in self._paths.items():
            if other == agent:
                continue
            pair = (min(agent, other), max(agent, other))
            new = sorted(p for p in paths & theirs if (*pair, p) not in self._told)
            if new:
                self._told.update((*pair, p) for p in new)
                found[other] = new
        return found

    def forget(self, agent: str) -> None:
        """``agent`` is no longer live (merged or ended): its changes no longer overlap anyone's."""
        self._paths.pop(agent, None)
