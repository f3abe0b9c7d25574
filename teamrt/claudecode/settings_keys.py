"""The keys of a Claude Code settings file, by what teamrt does with each: used, read by another part of
teamrt, documented by Claude Code but not used (named once per file, one line), or unknown (one line).

The list follows Claude Code 2.1's settings documentation ("Available settings" and the settings
reference); a key Claude Code adds later reads as unknown until it is added here, which costs one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from teamrt.claudecode.statusline import entry_problems

USED = frozenset({"permissions", "env", "hooks", "disableAllHooks", "$schema"})
"""Read by ``teamrt.claudecode.settings`` and ``teamrt.claudecode.hooks`` (``$schema`` names the file's
schema for editors: nothing to use)."""
READ_ELSEWHERE = frozenset({
    "enabledPlugins", "extraKnownMarketplaces",  # teamrt.claudecode.plugins
    "enableAllProjectMcpServers", "enabledMcpjsonServers", "disabledMcpjsonServers",  # teamrt.mcp.config
    "statusLine",  # teamrt.claudecode.statusline: the TUI's run view runs it (what is wrong: a line here)
})  # fmt: skip
"""Read by other parts of teamrt, which say what they make of them."""
NOT_USED: dict[str, str] = {
    "model": "the team file chooses models",
    "availableModels": "the team file chooses models",
    "modelOverrides": "the team file chooses models",
    "advisorModel": "the team file chooses models",
    "agent": "the team file chooses the lead",
    "apiKeyHelper": "teamrt takes its key from ANTHROPIC_API_KEY; the helper is not run",
    "awsAuthRefresh": "it is not run",
    "awsCredentialExport": "it is not run",
    "gcpAuthRefresh": "it is not run",
    "otelHeadersHelper": "it is not run",
    "sandbox": "teamrt's own sandbox confines commands ([sandbox] in the team file)",
    "alwaysThinkingEnabled": "set [team] thinking in the team file",
    "effortLevel": "set [team] effort in the team file",
    "autoCompactEnabled": "set [team] compact_at in the team file",
    "autoCompactWindow": "set [team] compact_at in the team file",
    "includeCoAuthoredBy": "", "attribution": "", "includeGitInstructions": "", "cleanupPeriodDays": "",
    "outputStyle": "", "forceLoginMethod": "", "forceLoginOrgUUID": "", "spinnerTipsEnabled": "",
    "spinnerVerbs": "", "spinnerTipsOverride": "", "theme": "", "verbose": "", "language": "",
    "autoUpdates": "", "autoUpdatesChannel": "", "minimumVersion": "", "preferredNotifChannel": "",
    "companyAnnouncements": "", "fileSuggestion": "", "respectGitignore": "", "defaultShell": "",
    "allowedMcpServers": "", "deniedMcpServers": "", "allowManagedHooksOnly": "",
    "allowManagedPermissionRulesOnly": "", "allowManagedMcpServersOnly": "", "allowedHttpHookUrls": "",
    "httpHookAllowedEnvVars": "", "strictKnownMarketplaces": "", "blockedMarketplaces": "",
    "strictPluginOnlyCustomization": "", "pluginConfigs": "", "skipWebFetchPreflight": "",
    "feedbackSurveyRate": "", "syntaxHighlightingDisabled": "", "terminalTitleFromRename": "",
    "fastMode": "", "fastModePerSessionOptIn": "", "promptSuggestionEnabled": "",
    "showClearContextOnPlanAccept": "", "remote": "", "disableDeepLinkRegistration": "",
    "plansDirectory": "", "classifierPermissionsEnabled": "", "voiceEnabled": "", "autoMemoryEnabled": "",
    "autoMemoryDirectory": "", "autoDreamEnabled": "", "showTurnDuration": "", "worktree": "",
    "terminalProgressBarEnabled": "", "prefersReducedMotion": "", "autoConnectIde": "",
    "autoInstallIdeExtension": "", "editorMode": "", "todoFeatureEnabled": "", "teammateMode": "",
    "skipDangerousModePermissionPrompt": "", "disableAutoMode": "", "xaaIdp": "", "enableArtifacts": "",
    "messageIdleNotifThresholdMs": "", "hasCompletedOnboarding": "", "mcpServers": "",
}  # fmt: skip
"""Claude Code's keys teamrt does not use, with what it does instead where that matters to a person who
counts on the key ("" for the look and feel of Claude Code's own terminal, its updates and accounts).
``mcpServers`` belongs in ``.mcp.json`` or ``~/.claude.json``, where teamrt reads it."""
PERMISSION_KEYS = frozenset({"allow", "deny", "ask", "defaultMode"})
PERMISSION_NOT_USED = {
    "additionalDirectories": "agents work only in their workspace",
    "disableBypassPermissionsMode": "only the team file and the agent files choose modes",
    "disableAutoMode": "only the team file and the agent files choose modes",
}


def key_lines(data: Mapping[str, Any], shown: str) -> list[str]:
    """The lines naming a file's keys that teamrt does not use (one) and its unknown keys (one)."""
    permissions = data.get("permissions")
    sub = permissions if isinstance(permissions, dict) else {}
    unused = [_with(key, NOT_USED[key]) for key in data if key in NOT_USED]
    unused += [
        _with(f"permissions.{key}", PERMISSION_NOT_USED[key]) for key in sub if key in PERMISSION_NOT_USED
    ]
    known = USED | READ_ELSEWHERE | NOT_USED.keys()
    unknown = [_name(key) for key in data if key not in known]
    unknown += [
        _name(f"permissions.{key}")
        for key in sub
        if key not in PERMISSION_KEYS and key not in PERMISSION_NOT_USED
    ]
    lines = (
        [f"{shown}: {problem}" for problem in entry_problems(data["statusLine"])]
        if "statusLine" in data
        else []
    )
    if unused:
        lines.append(f"{shown}: not used by teamrt: {', '.join(unused)}")
    if unknown:
        lines.append(f"{shown}: unknown keys, left alone: {', '.join(unknown[:20])}{_more(unknown, 20)}")
    return lines


def _with(key: str, why: str) -> str:
    return f"{key} ({why})" if why else key


def _name(key: str) -> str:
    """A key on one line of a terminal: as it is when plain, else escaped and quoted."""
    if key.isascii() and key.isprintable() and len(key) <= 60 and '"' not in key:
        return key
    return json.dumps(key)[:62]


def _more(items: list[str], shown: int) -> str:
    return f" and {len(items) - shown} more" if len(items) > shown else ""
