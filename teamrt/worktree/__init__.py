"""Worktree agents and the gated merge queue."""

from teamrt.worktree.checkout import Checkout
from teamrt.worktree.git import GitError, GitRepo
from teamrt.worktree.queue import MergeQueue, Verdict
from teamrt.worktree.worktrees import FILE_TOOLS, MAX_ATTEMPTS, Landing, Worktrees

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
