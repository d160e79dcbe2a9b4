#!/usr/bin/env bash
# runcell installer. Idempotent: every step checks before it acts, so running it again is cheap.
#
#   ./install.sh serve [--no-docker] [-- <runcell serve flags>]   set up, build dist/runcell, run it
#   ./install.sh test  [--no-docker]                              set up, then run the whole test suite
#   ./install.sh build [--no-docker]                              set up and build dist/runcell only
#   ./install.sh service [--no-docker] [--user U] [--data-dir D] [--backup-daily D | --no-backup-daily] [-- <serve flags>]
#        set up, install the binary as /usr/local/bin/runcell and run `runcell service install` (systemd)
#
# From a release directory (a `runcell` binary next to this script, no sources) it installs that
# binary into /usr/local/bin (RUNCELL_INSTALL_DIR overrides) instead of building. Needs: Debian/Ubuntu (apt) for Docker and test packages, Node+npm to
# install Bun when it is missing.
set -euo pipefail

BUN_VERSION="1.4.5"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"

MODE="${1:-}"
[ $# -gt 0 ] && shift
ALL_ARGS=("$@") # service mode hands its flags on to `runcell service install` as given
WITH_DOCKER=1
SERVE_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-docker) WITH_DOCKER=0 ;;
    --) shift; SERVE_ARGS+=("$@"); break ;;
    *) SERVE_ARGS+=("$1") ;;
  esac
  shift
done

step() { printf '\n==> %s\n' "$*"; }
ok() { printf '    ok: %s\n' "$*"; }
die() { printf '\n!!! %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
case "$MODE" in serve|test|build|service) ;; *) usage ;; esac

SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
fi

apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install these packages with your system's package manager: $*"
  if [ "$(id -u)" != "0" ] && [ -z "$SUDO" ]; then die "installing $* needs root (run as root or install sudo)"; fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/tmp/runcell-apt.log 2>&1 || {
    $SUDO apt-get update -q >>/tmp/runcell-apt.log 2>&1 || true
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>/tmp/runcell-apt.log 2>&1 ||
      die "apt-get install $* failed (log: /tmp/runcell-apt.log)"
  }
}

# --- Docker ------------------------------------------------------------------------------------
# The engine's socket is root's and the docker group's: it may answer root (through sudo) and not
# the user running this script. Whether it runs is asked as root — asked as the user, a running
# engine looks stopped and a second dockerd would be started next to it.
docker_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
engine_answers() { docker_answers || { [ -n "$SUDO" ] && $SUDO docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }; }
engine_version() { docker version --format '{{.Server.Version}}' 2>/dev/null || $SUDO docker version --format '{{.Server.Version}}' 2>/dev/null; }

# The engine runs but this user cannot reach it. `service` and `build` do not need them to (the
# service runs as its own user in the docker group; the image is built through sudo); `serve` and
# `test` run as this user, so they stop here and say what to do. Adding the user to the docker
# group is left to them: it is root-equivalent.
docker_not_for_me() {
  local me
  me="$(id -un)"
  case "$MODE" in
    service|build) ok "engine $(engine_version) answers (to root; $me is not in the docker group, which $MODE does not need)"; return ;;
  esac
  if id -nG "$me" 2>/dev/null | tr ' ' '\n' | grep -qx docker; then
    die "the Docker engine runs, but this login session of $me is not in the docker group yet (added since you logged in): log in again (or run \`newgrp docker\`), then ./install.sh $MODE again"
  fi
  die "the Docker engine runs, but $me cannot use it: its socket (/var/run/docker.sock) is root's and the docker group's. Either
      - add yourself to the docker group: sudo usermod -aG docker $me, log in again, and run ./install.sh $MODE again.
        Being in the docker group is root-equivalent (whoever reaches the socket can start a container that mounts /);
      - run runcell as its own system user under systemd instead: ./install.sh service;
      - run this script as root; or pass --no-docker (no workspaces)"
}

ensure_docker() {
  step "Docker engine"
  if [ "$WITH_DOCKER" = "0" ]; then ok "skipped (--no-docker): workspaces will be unavailable"; return; fi
  if docker_answers; then ok "engine $(engine_version) answers"; return; fi
  if ! engine_answers; then
    if ! command -v dockerd >/dev/null 2>&1; then
      echo "    installing Debian's docker.io"
      apt_install docker.io
    fi
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
      $SUDO systemctl start docker >/dev/null 2>&1 || true
    fi
    if ! engine_answers; then
      echo "    starting dockerd (log: /var/log/runcell-dockerd.log)"
      $SUDO sh -c 'nohup dockerd >/var/log/runcell-dockerd.log 2>&1 &'
    fi
    local up=0
    for _ in $(seq 1 60); do
      if engine_answers; then up=1; break; fi
      sleep 0.5
    done
    [ "$up" = "1" ] || die "the Docker engine does not answer after 30 s (see /var/log/runcell-dockerd.log); pass --no-docker to skip"
  fi
  if docker_answers; then ok "engine $(engine_version) answers"; return; fi
  docker_not_for_me
}

# --- The default workspace image (serve only; the tests build their own small one) -----------------
ensure_workspace_image() {
  step "Workspace image runcell/workspace:latest"
  if [ "$WITH_DOCKER" = "0" ]; then ok "skipped (--no-docker)"; return; fi
  if docker image inspect runcell/workspace:latest >/dev/null 2>&1 || { [ -n "$SUDO" ] && $SUDO docker image inspect runcell/workspace:latest >/dev/null 2>&1; }; then ok "present"; return; fi
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  echo "    building it locally: debootstrap of Debian, no registry (about a minute)"
  if $SUDO "$1" image build 2>&1 | sed 's/^/    /'; then
    ok "built"
  else
    echo "    !! could not build it now; tasks will explain, and \`runcell image build\` retries"
  fi
}

# --- service: the binary into /usr/local/bin, then `runcell service install` --------------------
install_service() { # $1: the runcell binary to install
  [ "$(id -u)" = "0" ] || [ -n "$SUDO" ] || die "./install.sh service needs root (run it as root or install sudo)"
  local dest="${RUNCELL_INSTALL_DIR:-/usr/local/bin}" args=() a sep=0
  step "Installing $dest/runcell"
  $SUDO mkdir -p "$dest"
  # A copy then a rename: replacing the binary of a running service must not fail with "text file busy".
  $SUDO install -m 0755 "$1" "$dest/.runcell.new"
  $SUDO mv -f "$dest/.runcell.new" "$dest/runcell"
  ok "$dest/runcell ($("$dest/runcell" version))"
  ensure_workspace_image "$dest/runcell"
  for a in "${ALL_ARGS[@]}"; do
    if [ "$sep" = "0" ] && [ "$a" = "--no-docker" ]; then continue; fi
    [ "$a" = "--" ] && sep=1
    args+=("$a")
  done
  step "runcell service install ${args[*]}"
  exec $SUDO "$dest/runcell" service install "${args[@]}"
}

# --- git: repositories are cloned and pushed with the host's git (src/git/) ----------------------
ensure_git() {
  step "git"
  if ! command -v git >/dev/null 2>&1; then
    echo "    installing git (profiles' repositories are cloned and pushed with it)"
    apt_install git
  fi
  ok "$(git --version)"
}

# --- Release directory: install the shipped binary -----------------------------------------------
if [ -x "$HERE/runcell" ] && [ ! -f "$HERE/package.json" ]; then
  step "Installing the release binary"
  DEST="${RUNCELL_INSTALL_DIR:-/usr/local/bin}"
  mkdir -p "$DEST" 2>/dev/null || true
  [ -w "$DEST" ] || [ -n "$SUDO" ] || { DEST="$HOME/.local/bin"; mkdir -p "$DEST"; }
  if [ -w "$DEST" ]; then install -m 0755 "$HERE/runcell" "$DEST/runcell"; else $SUDO install -m 0755 "$HERE/runcell" "$DEST/runcell"; fi
  ok "$DEST/runcell ($("$DEST/runcell" version))"
  ensure_docker
  ensure_git
  case "$MODE" in
    serve) ensure_workspace_image "$DEST/runcell"; step "Starting runcell"; exec "$DEST/runcell" serve "${SERVE_ARGS[@]}" ;;
    service) install_service "$HERE/runcell" ;;
    test) die "a release directory has no test suite; clone the repository to run ./install.sh test" ;;
    build) exit 0 ;;
  esac
fi

# --- Bun ---------------------------------------------------------------------------------------
step "Bun $BUN_VERSION"
if command -v bun >/dev/null 2>&1 && [ "$(bun --version)" = "$BUN_VERSION" ]; then
  ok "bun $(bun --version) at $(command -v bun)"
else
  command -v npm >/dev/null 2>&1 || die "Bun is missing and npm is not installed to fetch it: install Node.js and npm (apt-get install nodejs npm), or Bun $BUN_VERSION"
  echo "    installing bun@$BUN_VERSION from the npm registry"
  if [ -w "$(npm prefix -g)/lib" ] || [ "$(id -u)" = "0" ]; then
    npm install -g --silent "bun@$BUN_VERSION" >/dev/null
  else
    $SUDO npm install -g --silent "bun@$BUN_VERSION" >/dev/null
  fi
  hash -r
  command -v bun >/dev/null 2>&1 || die "npm installed bun but it is not on PATH ($(npm prefix -g)/bin)"
  ok "bun $(bun --version)"
fi

step "Dependencies (bun.lock)"
bun install --frozen-lockfile 2>&1 | tail -n 2 | sed 's/^/    /'

ensure_docker
ensure_git

step "Building dist/runcell"
bun run scripts/build.ts | sed 's/^/    /'

case "$MODE" in
  build) exit 0 ;;
  service) install_service ./dist/runcell ;;
  serve)
    ensure_workspace_image ./dist/runcell
    step "Starting runcell (Ctrl-C stops it)"
    exec ./dist/runcell serve "${SERVE_ARGS[@]}"
    ;;
  test)
    [ "$WITH_DOCKER" = "1" ] || die "the test suite runs real containers: it needs the Docker engine (drop --no-docker)"
    step "Test prerequisites"
    if ! command -v chromium >/dev/null 2>&1 || ! command -v busybox >/dev/null 2>&1; then
      echo "    installing chromium and busybox-static (browser tests, test workspace image)"
      apt_install chromium busybox-static
    fi
    ok "chromium $(chromium --version 2>/dev/null | awk '{print $2}'), busybox $(busybox 2>&1 | head -1 | awk '{print $2}')"
    # Operations tests: systemd-analyze verifies the unit (no running systemd needed), a real
    # Prometheus scrapes /metrics, a real nginx proxies with TLS. Their own services stay stopped:
    # the tests start private instances on free ports. wrk is the benchmarks' load generator.
    if ! command -v systemd-analyze >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1 || ! command -v nginx >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1 || ! command -v wrk >/dev/null 2>&1; then
      echo "    installing systemd, prometheus, nginx, openssl and wrk (operations tests, benchmarks)"
      apt_install systemd prometheus nginx-light openssl wrk
      for svc in prometheus nginx; do $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true; done
      $SUDO pkill -x nginx >/dev/null 2>&1 || true
      $SUDO pkill -x prometheus >/dev/null 2>&1 || true
    fi
    ok "systemd-analyze $(systemd-analyze --version 2>/dev/null | head -1 | awk '{print $2}'), prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}'), $(nginx -v 2>&1 | sed 's/.*: //')"
    # PostgreSQL: the PostgreSQL schema and `migrate --from-sqlite --to postgres://` are tested
    # against a private server (scripts/test-postgres.sh: own cluster, port 55432); the
    # distribution's own cluster is stopped.
    if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
      echo "    installing postgresql (the PostgreSQL schema and migration tests)"
      apt_install postgresql
      $SUDO systemctl disable --now postgresql >/dev/null 2>&1 || true
      for c in /etc/postgresql/*/main; do [ -d "$c" ] && $SUDO pg_ctlcluster "$(basename "$(dirname "$c")")" main stop >/dev/null 2>&1 || true; done
    fi
    $SUDO bash scripts/test-postgres.sh start | sed 's/^/    /'
    # OpenSSH's server: ssh:// Docker hosts are tested against a private sshd (its own port and
    # keys, test/workspaces/ssh-host.test.ts); the distribution's own sshd is stopped.
    if [ ! -x /usr/sbin/sshd ]; then
      echo "    installing openssh-server (the ssh:// Docker host tests)"
      apt_install openssh-server
      $SUDO systemctl disable --now ssh >/dev/null 2>&1 || true
    fi
    if [ "$WITH_DOCKER" = "1" ]; then
      bash scripts/test-image.sh | sed 's/^/    /'
      bash scripts/test-mcp-image.sh | sed 's/^/    /'
      # A second Docker engine (own data root and socket, TLS on loopback): the multi-host tests.
      bash scripts/second-dockerd.sh start | sed 's/^/    /'
    fi
    step "Type check (tsc --strict)"
    bunx tsc --noEmit -p . && ok "no type errors"
    # Two lanes side by side: most of the suites' time is spent waiting (containers, child servers,
    # timers), not on the CPU. Lane 1: the SQLite suite. Lane 2: the PostgreSQL suite, then the tests
    # that share one machine-wide resource — the second Docker engine (frozen with SIGSTOP by one of
    # them) and the private sshd — on SQLite and then on PostgreSQL, one after the other.
    EXCLUSIVE=(test/workspaces/hosts.test.ts test/workspaces/ssh-host.test.ts test/workspaces/engine-timeout.test.ts test/cli/doctor.test.ts)
    EXCLUSIVE_PG=(test/workspaces/hosts.test.ts test/workspaces/ssh-host.test.ts test/workspaces/engine-timeout.test.ts)
    PG_DIRS=(test/pg test/http test/notifications test/playbooks test/security test/agents test/ws test/workspaces)
    PG_URL=postgres://postgres@127.0.0.1:55432/postgres
    shared_files() { find "$@" -name '*.test.ts' | sort | grep -vxF "$(printf '%s\n' "${EXCLUSIVE[@]}")" | sed 's|^|./|'; }
    mapfile -t SQLITE_FILES < <(shared_files test)
    mapfile -t PG_FILES < <(shared_files "${PG_DIRS[@]}")
    LANE2_LOG=$(mktemp -t runcell-test-lane2.XXXXXX)
    lane2() {
      local rc=0
      echo "==> PostgreSQL suite (test/pg, the API suite and the stream, agent, notification, playbook, security and workspace tests; every test app on a fresh database of the private server)"
      env RUNCELL_TEST_POSTGRES=$PG_URL bun test --timeout 60000 "${PG_FILES[@]}" || rc=1
      echo "==> Tests on the shared second Docker engine and sshd: SQLite"
      bun test --timeout 60000 "${EXCLUSIVE[@]/#/./}" || rc=1
      echo "==> Tests on the shared second Docker engine and sshd: PostgreSQL"
      env RUNCELL_TEST_POSTGRES=$PG_URL bun test --timeout 60000 "${EXCLUSIVE_PG[@]/#/./}" || rc=1
      return $rc
    }
    step "Test suites in two lanes: SQLite (every test but the shared-engine ones; its output follows) and PostgreSQL plus the shared-engine tests (output shown when both lanes end)"
    lane2 >"$LANE2_LOG" 2>&1 &
    LANE2_PID=$!
    SQLITE_RC=0; bun test --timeout 60000 "${SQLITE_FILES[@]}" || SQLITE_RC=$?
    LANE2_RC=0; wait "$LANE2_PID" || LANE2_RC=$?
    step "Second lane's output"
    cat "$LANE2_LOG"; rm -f "$LANE2_LOG"
    echo
    echo "    SQLite suite: exit $SQLITE_RC; PostgreSQL suite and shared-engine tests: exit $LANE2_RC"
    [ "$SQLITE_RC" = 0 ] && [ "$LANE2_RC" = 0 ]
    ;;
esac
