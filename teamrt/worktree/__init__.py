"""Worktree agents and the gated merge queue."""

from .checkout import Checkout
from .git import GitError, GitRepo
from .queue import MergeQueue, Verdict
from .worktrees import FILE_TOOLS, MAX_ATTEMPTS, Landing, Worktrees

__all__ = [
    "FILE_TOOLS",
    "MAX_ATTEMPTS",
    "Checkout",
    "GitError",
    "GitRepo",
    "Landing",
    "MergeQueue",
    "Verdict",
    "Worktrees",
]
