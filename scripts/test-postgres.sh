#!/usr/bin/env bash
# A private PostgreSQL server for the tests of the PostgreSQL schema and `runcell migrate
# --from-sqlite --to postgres://` (test/db/pg-*.test.ts, test/cli/migrate-postgres.test.ts): its own
# cluster directory, loopback only, port 55432, trust authentication for the `postgres` role on
# 127.0.0.1 only. The distribution's own cluster (if any) is left alone.
#
#   scripts/test-postgres.sh start   initialise (once) and start it (idempotent)
#   scripts/test-postgres.sh stop    stop it (data stays)
#   scripts/test-postgres.sh url     print the connection URL
#
# Needs Debian's postgresql package (./install.sh test installs it) and root or the postgres user.
set -euo pipefail
PORT="${RUNCELL_TEST_PG_PORT:-55432}"
DIR="${RUNCELL_TEST_PG_DIR:-/var/lib/runcell-test-postgres}"
LOG="/var/log/runcell-test-postgres.log"
URL="postgres://postgres@127.0.0.1:$PORT/postgres"
BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"

as_postgres() { if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
ready() { "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" >/dev/null 2>&1; }

case "${1:-}" in
  start)
    [ -n "$BIN" ] || { echo "PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
    if ready; then echo "test PostgreSQL is running at $URL"; exit 0; fi
    if [ ! -s "$DIR/PG_VERSION" ]; then
      mkdir -p "$DIR" && chown postgres:postgres "$DIR" && chmod 700 "$DIR"
      as_postgres "$BIN/initdb" -D "$DIR" -U postgres --auth-local=trust --auth-host=trust -E UTF8 >/dev/null
    fi
    touch "$LOG" && chown postgres:postgres "$LOG"
    as_postgres "$BIN/pg_ctl" -D "$DIR" -l "$LOG" -w -t 60 \
      -o "-p $PORT -c listen_addresses=127.0.0.1 -k /tmp -c fsync=off -c synchronous_commit=off -c max_connections=200" start >/dev/null
    ready || { echo "test PostgreSQL did not start (log: $LOG)" >&2; exit 1; }
    echo "test PostgreSQL started at $URL ($("$BIN/postgres" --version | awk '{print $3}'); log: $LOG)"
    ;;
  stop)
    [ -s "$DIR/PG_VERSION" ] && as_postgres "$BIN/pg_ctl" -D "$DIR" -m fast -w stop >/dev/null 2>&1 || true
    echo "test PostgreSQL stopped"
    ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
