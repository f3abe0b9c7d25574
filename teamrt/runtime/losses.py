"""The events that name a loss to the person: what a fault took, said once, never repaired in silence.

Every place that finds damage the run cannot undo (a store behind its files, a
workspace or branch remade, a message quarantined, a team that stalled)
records one of these events, each with a ``note``: one line for a person,
which ``teamrt logs``, ``show``, the progress lines and the TUI print as it is
(through ``terminal.clean``). The chaos checker (``teamrt.testing.chaos``) counts a
run whose result differs from an uninterrupted one and that recorded none of
these, and whose resume refused nothing, as a *silent* loss.
"""

from __future__ import annotations

from typing import Final

from teamrt.events import EventKind

STORE_BEHIND: Final = "store.behind"
"""Resume went on (``--accept-loss``) with a store behind what the run's files show."""
WORKSPACE_REMADE: Final = "worktree.remade"
"""An agent's workspace was gone and was made again; ``lost`` names what it held that is gone."""
BRANCH_RESTORED: Final = "branch.restored"
"""A branch that lost recorded commits was put back at the recorded commit."""
BRANCH_LOST: Final = "branch.lost"
"""A branch lost recorded commits that could not be put back."""
MAIL_QUARANTINED: Final = "mail.quarantined"
"""A message file that could not be read was moved to its mailbox's ``bad/``."""
MAIL_FAILED: Final = "mail.failed"
"""A message could not be delivered (a full disk, no inodes left, an I/O error)."""
RUN_STALLED: Final = "run.stalled"
"""Every agent was idle with no mail in flight and no ask waiting: the run could not go on by itself."""

KINDS: frozenset[EventKind] = frozenset(
    {STORE_BEHIND, WORKSPACE_REMADE, BRANCH_RESTORED, BRANCH_LOST, MAIL_QUARANTINED, MAIL_FAILED, RUN_STALLED}
)
"""Every event kind that names a loss; each carries ``note``."""
