"""Running a program confined: for Bash, ripgrep, MCP stdio servers, hooks and merge gates.

A ``Confinement`` says what one program may see and touch, a ``SandboxPolicy``
what the run allows programs, and a ``Sandbox`` (``default_sandbox()``: bubblewrap
when installed) turns a command into what runs it. The package sits below the
tools: it knows nothing of them.
"""

from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy

__all__ = ["Confinement", "Sandbox", "SandboxPolicy", "default_sandbox"]
