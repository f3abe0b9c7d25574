"""A Claude Code set-up taken as it is: settings, memory files, hooks (agent files: ``teamrt.agents``)."""
