"""What the test machine offers: bubblewrap, the places a sandbox shows, a tmpfs to fill."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from teamrt.sandbox.bwrap import TOOLCHAINS, default_sandbox

# On a developer's machine without bubblewrap the sandbox tests are skipped (bash is then refused
# unless a run opts in); CI installs it in .ci/run, so there a missing bwrap fails them instead.
needs_bwrap = pytest.mark.skipif(
    not default_sandbox().confined and not os.environ.get("CI"),
    reason="bubblewrap (bwrap) is not installed here; install the bubblewrap package to test the sandbox",
)


def shown_in_homes() -> set[str]:
    """What the sandbox may show at the top of a hidden home: the toolchain places, and the way to the
    Python teamrt runs on (a user's ``~/project/.venv``, ``/root/.pyenv``)."""
    names = {Path(p).parts[1] for p in TOOLCHAINS}
    for prefix in map(Path, (sys.prefix, sys.base_prefix)):
        for home in map(Path, ("/root", "/home", os.environ.get("HOME", "/"))):
            if home != Path("/") and prefix.is_relative_to(home) and prefix != home:
                names.add(prefix.relative_to(home).parts[0])
    return names


@contextmanager
def mounted_tmpfs(where: Path, size: str, inodes: int) -> Iterator[Path]:
    """A tmpfs of ``size`` and ``inodes`` mounted at ``where`` (made), for a test to fill; unmounted after.
    Root only: a test that needs it says so with its skip."""
    where.mkdir()
    options = f"size={size},nr_inodes={inodes}"
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
