export const USAGE = `paperclip-sandbox: try, measure and clean up Paperclip sandbox providers

Usage:
  paperclip-sandbox run      [provider flags] [--workspace DIR] [--reuse] [--timings] [--timeout 30s]
                             [--env NAME=value] [--exclude GLOB] -- CMD ARGS...
  paperclip-sandbox probe    [provider flags] [--json]
  paperclip-sandbox validate [provider flags] [--json]
  paperclip-sandbox bench    [provider flags] [--samples N] [--targets FILE] [--out FILE] [--json]
                             [--sync-samples N] [--sync-size-mb N] [-- CMD ARGS...]
  paperclip-sandbox leases ls [--db FILE] [--all] [--json]
  paperclip-sandbox leases gc [--db FILE] [--provider NAME|PATH] [--yes] [--dry-run] [--min-age 10m] [--include-idle]
                             [--config FILE] [--set key=value] [--secret field=ENV_VAR] [--secret-file field=PATH] [--json]
                             (a provider that exports listLeases is asked for its leases by label at the vendor,
                             with each config the database saw and the one given here)
  paperclip-sandbox emulate VENDOR [--port N] [--host ADDR] [--json]
                             a vendor API emulator on loopback (sandboxes are bubblewrap jails), printing
                             its URL and credential until Ctrl-C; --list shows the installed emulators

Provider flags:
  -p, --provider NAME|PATH     driverKey of one of our providers (bubblewrap, daytona, e2b, fake-plugin, kubernetes, modal, novita, exe-dev, boxd) or a path
                               to a plugin package (default: bubblewrap)
      --driver KEY             driver to use when the package declares several
  -c, --config FILE            provider config (JSON or YAML)
      --set key=value          one config field, typed by the provider's configSchema (repeatable;
                               dotted keys reach nested fields; arrays as a,b,c or JSON)
      --secret field=ENV_VAR   a secret config field read from an environment variable (repeatable)
      --secret-file field=PATH a secret config field read from a file (repeatable)
      --environment ID         environment id passed to the provider (default: cli-<host id>)
      --db FILE                lease database (default: $XDG_STATE_HOME/paperclip-sandbox/leases.db)
  -v, --verbose                show the provider worker's stderr (redacted)

Exit codes:
  run        the command's exit code; 124 timed out; 128+N killed by signal N; 130/143 interrupted;
             125 the CLI or provider failed; 64 bad input
  probe, validate   0 pass, 1 fail, 64 bad input
  bench      0 PASS, 1 FAIL, 2 UNVERIFIED, 64 bad input
  leases     0 done, 1 something could not be cleaned up, 64 bad input
  emulate    0 stopped by Ctrl-C, 64 bad input
`;
