# PostToolUse on Write|Edit: remind the model through additionalContext.
cat > /dev/null
printf '%s\n' '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "FIXTURE-POST-CONTEXT-1618: update CHANGELOG.md too"}}'
