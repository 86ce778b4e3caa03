#!/bin/sh
# Fake Claude Code CLI for credential-free end-to-end runs; it runs INSIDE the sandbox.
# It reads the prompt on stdin, writes files into the workspace (its cwd) and a marker under $HOME
# (outside the synced workspace), then marks the task done with a comment in one PATCH through the
# Paperclip API the host gives it (PAPERCLIP_API_URL is the in-sandbox callback bridge), then prints stream-json.
# It never prints secret values.
case " $* " in
  *" --version "*|*" -v "*) echo "2.1.300 (Claude Code)"; exit 0;;
  *" --help "*|*" -h "*) echo "Usage: claude [options] --print --output-format stream-json"; exit 0;;
esac
RUN="${PAPERCLIP_RUN_ID:-norun}"
PROMPT=$(timeout 5 cat 2>/dev/null | head -c 200 | tr '\n\r\t"\\' '     ')

# Marker outside the synced workspace: proves a resumed lease kept its sandbox state.
MARKER="${HOME:-/nonexistent}/.paperclip-e2e-marker"
if [ -f "$MARKER" ]; then BEFORE=$(tr -d '\n' < "$MARKER"); else BEFORE=none; fi
printf '%s\n' "$RUN" > "$MARKER" 2>/dev/null || BEFORE="unwritable"

# A process the first run of a kept-open issue leaves running: a resumed lease that kept its
# processes (a suspended VM, a frozen jail) still has it on the next run.
KEEPER="${HOME:-/nonexistent}/.paperclip-e2e-keeper.pid"
if [ ! -f "$KEEPER" ]; then KEEPER_ALIVE=none; elif kill -0 "$(cat "$KEEPER")" 2>/dev/null; then KEEPER_ALIVE=yes; else KEEPER_ALIVE=no; fi

mkdir -p ./e2e-out
{
  echo "run=$RUN"
  echo "cwd=$(pwd)"
  echo "home=${HOME:-}"
  echo "uid=$(id -u 2>/dev/null)"
  echo "marker_before=$BEFORE"
  echo "keeper_alive=$KEEPER_ALIVE"
  echo "prompt_head=$PROMPT"
} > "./E2E_AGENT_OUTPUT_$RUN.txt"
printf 'nested file from run %s\n' "$RUN" > "./e2e-out/nested-$RUN.txt"

# POST/PATCH through the bridge; curl when present, else node's fetch. Prints the HTTP status.
api() { # method path json
  if command -v curl >/dev/null 2>&1; then
    curl -s -m 20 -o /dev/null -w '%{http_code}' -X "$1" "$PAPERCLIP_API_URL$2" \
      -H "Authorization: Bearer $PAPERCLIP_API_KEY" -H "X-Paperclip-Run-Id: $RUN" \
      -H 'content-type: application/json' -d "$3" 2>/dev/null || echo 000
  else
    node -e 'fetch(process.env.PAPERCLIP_API_URL+process.argv[2],{method:process.argv[1],headers:{authorization:"Bearer "+process.env.PAPERCLIP_API_KEY,"x-paperclip-run-id":process.env.PAPERCLIP_RUN_ID||"","content-type":"application/json"},body:process.argv[3],signal:AbortSignal.timeout(20000)}).then(r=>console.log(r.status),()=>console.log("000"))' "$1" "$2" "$3"
  fi
}
COMMENT=skipped; DONE=skipped
if [ -n "${PAPERCLIP_API_URL:-}" ] && [ -n "${PAPERCLIP_API_KEY:-}" ] && [ -n "${PAPERCLIP_TASK_ID:-}" ]; then
  BODY="e2e-fake-claude run=$RUN marker_before=$BEFORE"
  # "[e2e-keep-open] " in the title: the first (assignment) run only comments and leaves the issue in
  # progress, because the host destroys an issue's reusable leases as soon as the issue turns done or
  # cancelled. (An agent cannot move it to in_review without a review path; blocked needs a blocker.)
  KEEP=0
  case "${PAPERCLIP_WAKE_PAYLOAD_JSON:-}" in
    *"[e2e-keep-open]"*) [ "${PAPERCLIP_WAKE_REASON:-}" = issue_assigned ] && KEEP=1;;
  esac
  if [ "$KEEP" = 1 ]; then
    nohup sleep 86400 >/dev/null 2>&1 </dev/null &
    echo $! > "$KEEPER" 2>/dev/null
    COMMENT=$(api POST "/api/issues/$PAPERCLIP_TASK_ID/comments" "{\"body\":\"$BODY\"}"); DONE=kept_open
  else
    # One request finishes the task with its comment, as the Paperclip skill tells real agents to.
    DONE=$(api PATCH "/api/issues/$PAPERCLIP_TASK_ID" "{\"status\":\"done\",\"comment\":\"$BODY\"}"); COMMENT=$DONE
  fi
fi
echo "comment_http=$COMMENT done_http=$DONE" >> "./E2E_AGENT_OUTPUT_$RUN.txt"

SID=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || echo "00000000-0000-4000-8000-000000000001")
printf '%s\n' "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"$SID\",\"model\":\"fake-model\"}"
printf '%s\n' "{\"type\":\"assistant\",\"session_id\":\"$SID\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"fake agent: comment=$COMMENT done=$DONE marker_before=$BEFORE\"}]}}"
printf '%s\n' "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"session_id\":\"$SID\",\"result\":\"fake agent finished\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1},\"total_cost_usd\":0}"
exit 0
