# Stop: the first time, send the agent back to work; then let it stop.
if grep -q '"stop_hook_active": *false'; then
  echo "FIXTURE-STOP-42: run the tests before you stop" >&2
  exit 2
fi
exit 0
