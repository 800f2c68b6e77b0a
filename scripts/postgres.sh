#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for the live tests of SwitchboardPostgres.
#
#   eval "$(scripts/postgres.sh start)"   # initdb + pg_ctl on a free port; exports SWITCHBOARD_POSTGRES_URL
#   swift test --filter SwitchboardPostgresTests
#   scripts/postgres.sh stop              # stops the cluster and deletes it
#
# Needs Debian's `postgresql` package (initdb and pg_ctl under /usr/lib/postgresql/*/bin). As
# root, the cluster runs as the `postgres` user (PostgreSQL refuses to run as root). The cluster
# lives in a new directory under /tmp (its path is kept in .build-postgres/cluster), listens on
# 127.0.0.1 only, and asks for a password (scram-sha-256) over TCP: user and password
# `switchboard`, database `switchboard`. fsync is off: the cluster is for tests and is thrown away.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
state="$root/.build-postgres"

bindir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
    if [ -z "$dir" ] && command -v pg_config >/dev/null; then dir="$(pg_config --bindir)"; fi
    if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
        echo "postgres.sh: initdb not found; install PostgreSQL (apt-get install -y postgresql)" >&2
        exit 1
    fi
    echo "$dir"
}

# Runs a command as the cluster's owner: the current user, or `postgres` when that is root.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local bin cluster port
    bin="$(bindir)"
    if [ -f "$state/cluster" ] && [ -f "$(cat "$state/cluster")/url" ]; then
        stop >/dev/null 2>&1 || true
    fi
    cluster="$(mktemp -d /tmp/switchboard-postgres.XXXXXX)"
    chmod 755 "$cluster"
    printf 'switchboard\n' > "$cluster/password"
    if [ "$(id -u)" = 0 ]; then chown -R postgres "$cluster"; fi
    as_owner "$bin/initdb" -D "$cluster/data" -U switchboard --pwfile="$cluster/password" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$cluster/initdb.log" 2>&1 \
        || { cat "$cluster/initdb.log" >&2; exit 1; }
    port="$(free_port)"
    as_owner "$bin/pg_ctl" -D "$cluster/data" -l "$cluster/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $cluster -c fsync=off -c full_page_writes=off -c max_connections=300" \
        >/dev/null || { cat "$cluster/server.log" >&2; exit 1; }
    as_owner "$bin/createdb" -h "$cluster" -p "$port" -U switchboard switchboard
    local url="postgres://switchboard:switchboard@127.0.0.1:$port/switchboard?sslmode=disable"
    echo "$url" > "$cluster/url"
    mkdir -p "$state"
    echo "$cluster" > "$state/cluster"
    echo "postgres.sh: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, cluster in $cluster" >&2
    echo "export SWITCHBOARD_POSTGRES_URL='$url'"
}

stop() {
    [ -f "$state/cluster" ] || { echo "postgres.sh: no cluster was started from here" >&2; return 0; }
    local cluster
    cluster="$(cat "$state/cluster")"
    if [ -d "$cluster/data" ]; then
        as_owner "$(bindir)/pg_ctl" -D "$cluster/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$cluster" "$state/cluster"
    echo "postgres.sh: stopped and deleted $cluster" >&2
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: scripts/postgres.sh start|stop" >&2; exit 2 ;;
esac
