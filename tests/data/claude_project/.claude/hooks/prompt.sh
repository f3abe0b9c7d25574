# UserPromptSubmit: add context to every prompt (stdout of exit 0 is context).
cat > /dev/null
echo "FIXTURE-PROMPT-CONTEXT-2718: the release is on Friday."
