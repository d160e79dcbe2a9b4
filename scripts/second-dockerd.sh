#!/usr/bin/env bash
# A second Docker engine on this machine, for the multi-host tests (test/workspaces/hosts.test.ts)
# and bench/scale-out.ts: its own --data-root, --exec-root, --pidfile, containerd namespace and
# unix socket, no bridge and no iptables rules (workspaces in tests use network "none"), and a TCP
# listener on loopback that only answers TLS clients holding a certificate of its own test CA.
#
#   scripts/second-dockerd.sh start   start it (idempotent), make the TLS files, load the test image
#   scripts/second-dockerd.sh stop    stop it (its containers stop with it; data stays)
#   scripts/second-dockerd.sh env     print SOCKET=, TCP=, TLS_DIR=, PIDFILE= for callers
#
# Needs root (dockerd) and openssl. The test image comes from the first engine (`docker save`).
set -euo pipefail
NAME="${RUNCELL_DOCKERD2_NAME:-runcell-docker2}"
SOCKET="/var/run/$NAME.sock"
PIDFILE="/var/run/$NAME.pid"
DATA="/var/lib/$NAME"
EXEC="/var/run/$NAME"
LOG="/var/log/$NAME.log"
PORT="${RUNCELL_DOCKERD2_PORT:-23760}"
TLS_DIR="$DATA-tls"
IMAGES=("${RUNCELL_TEST_IMAGE:-runcell-test/busybox:latest}")

running() { [ -S "$SOCKET" ] && docker -H "unix://$SOCKET" version >/dev/null 2>&1; }

make_tls() {
  [ -s "$TLS_DIR/key.pem" ] && [ -s "$TLS_DIR/server-key.pem" ] && return 0
  mkdir -p "$TLS_DIR" && chmod 700 "$TLS_DIR"
  local d; d="$(mktemp -d)"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 3650 -subj "/CN=runcell test CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server-cert.pem -days 3650 -extfile server.ext 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout key.pem -out client.csr -subj "/CN=runcell" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -days 3650 -extfile client.ext 2>/dev/null
    cp ca.pem cert.pem key.pem server-cert.pem server-key.pem "$TLS_DIR/"
  )
  rm -rf "$d"
  chmod 600 "$TLS_DIR"/*.pem
}

start() {
  if running; then echo "second dockerd answers at $SOCKET"; else
    make_tls
    mkdir -p "$DATA" "$EXEC"
    echo "starting a second dockerd at $SOCKET and tcp://127.0.0.1:$PORT (TLS; log: $LOG)"
    nohup dockerd \
      --data-root "$DATA" --exec-root "$EXEC" --pidfile "$PIDFILE" \
      -H "unix://$SOCKET" -H "tcp://127.0.0.1:$PORT" \
      --tlsverify --tlscacert "$TLS_DIR/ca.pem" --tlscert "$TLS_DIR/server-cert.pem" --tlskey "$TLS_DIR/server-key.pem" \
      --bridge none --iptables=false --ip-masq=false \
      --containerd-namespace "$NAME" --containerd-plugins-namespace "$NAME-plugins" \
      >"$LOG" 2>&1 &
    for _ in $(seq 1 60); do running && break; sleep 0.5; done
    running || { tail -20 "$LOG" >&2; echo "the second dockerd did not answer after 30 s" >&2; exit 1; }
  fi
  make_tls
  for image in "${IMAGES[@]}"; do
    local want have
    want="$(docker image inspect -f '{{.Id}}' "$image")"
    have="$(docker -H "unix://$SOCKET" image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
    if [ "$want" != "$have" ]; then
      echo "loading $image into the second dockerd"
      docker save "$image" | docker -H "unix://$SOCKET" load >/dev/null
    fi
  done
}

stop() {
  if [ -s "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    local pid; pid="$(cat "$PIDFILE")"
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" || true
  fi
  echo "second dockerd stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) printf 'SOCKET=%s\nTCP=tcp://127.0.0.1:%s\nTLS_DIR=%s\nPIDFILE=%s\n' "$SOCKET" "$PORT" "$TLS_DIR" "$PIDFILE" ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
