# PreToolUse on Bash: refuse network tools; exit 2 sends stderr to the model.
if grep -q 'curl\|wget'; then
  echo "FIXTURE-BLOCKED-31: network tools are not allowed in this repository" >&2
  exit 2
fi
exit 0
