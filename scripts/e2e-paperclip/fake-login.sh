#!/bin/sh
# Fake agent login CLIs for the host's login flows; they run INSIDE the sandbox, on the login PTY.
# Installed for the run as /usr/local/bin/claude and /usr/local/bin/codex (the host runs the fixed
# commands `claude setup-token` and `codex login --device-auth`). Nothing here is a real credential.
#   claude setup-token: prints the sign-in URL and the code prompt, reads the browser code the operator
#     submits (the terminal echoes it), prints an OAuth-token-shaped string between the two lines the
#     host parses it from, exits 0.
#   codex login --device-auth: prints the device URL and a one-time code, waits as if the operator
#     approved it in the browser, writes $CODEX_HOME/auth.json (0600), exits 0; the host reads it back.
name=$(basename "$0")
if [ -t 0 ] && [ -t 1 ]; then tty=yes; else tty=no; fi
case "$name $*" in
"claude setup-token")
  state=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  challenge=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
  printf 'e2e fake claude (terminal=%s)\n' "$tty"
  printf 'Browser did not open? Use the url below to sign in:\n\n'
  printf 'https://claude.ai/oauth/authorize?code=true&client_id=e2e-fake-client&response_type=code&redirect_uri=https%%3A%%2F%%2Fplatform.claude.com%%2Foauth%%2Fcode%%2Fcallback&scope=user%%3Ainference&code_challenge=%s&code_challenge_method=S256&state=%s\n\n' "$challenge" "$state"
  printf 'Paste code here if prompted > '
  IFS= read -r code
  code=$(printf '%s' "$code" | tr -d '\r')
  printf 'e2e fake claude received a browser code of %s characters\n\n' "${#code}"
  token="sk-ant-oat01-e2efake$(od -An -tx1 -N20 /dev/urandom | tr -d ' \n')"
  printf 'Your OAuth token (valid for 1 year):\n\n%s\n\n' "$token"
  printf "Store this token securely. You won't be able to see it again.\n"
  exit 0;;
"codex login --device-auth"|"grok login --device-auth")
  home="${CODEX_HOME:-${GROK_HOME:-}}"
  [ -n "$home" ] || { printf 'e2e fake %s: no CODEX_HOME/GROK_HOME\n' "$name"; exit 2; }
  printf 'e2e fake %s (terminal=%s)\n\n' "$name" "$tty"
  printf 'Follow these steps to sign in with ChatGPT using device code authorization:\n\n'
  printf '1. Open this link in your browser and sign in to your account\n   https://auth.openai.com/codex/device\n\n'
  printf '2. Enter this one-time code (expires in 15 minutes)\n   E2EX-12345\n\n'
  # The operator approves in the browser meanwhile.
  sleep 2
  (umask 077; printf '{"tokens":{"account_id":"e2e-fake-account","access_token":"e2e-fake-access","refresh_token":"e2e-fake-refresh"},"last_refresh":"2026-01-01T00:00:00Z"}' > "$home/auth.json")
  printf 'Successfully logged in\n'
  exit 0;;
*)
  printf 'e2e fake %s: unexpected arguments: %s\n' "$name" "$*" >&2
  exit 64;;
esac
