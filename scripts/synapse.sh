#!/usr/bin/env bash
# A throwaway Synapse homeserver on loopback, for the Matrix adapter's live tests (issue #16).
#
#   scripts/synapse.sh install            installs matrix-synapse and matrix-nio (PyPI) into
#                                         .build-synapse/venv (nio: the bench's peer rows)
#   scripts/synapse.sh run DIR PORT       writes a loopback test configuration into DIR (SQLite,
#                                         registration by shared secret, rate limits raised) and
#                                         runs the homeserver in the foreground on 127.0.0.1:PORT;
#                                         prints its address once it answers
#   scripts/synapse.sh register USER PASSWORD
#                                         registers @USER:localhost with the shared secret
#   scripts/synapse.sh room USER PASSWORD NAME [INVITEE...]
#                                         logs in as USER, creates the room NAME, invites each
#                                         INVITEE (@INVITEE:localhost) and prints the room's id
#
# register and room talk to the homeserver at SYNAPSE_URL (default http://127.0.0.1:8008).
#
# The tests find the installation through SWITCHBOARD_SYNAPSE (the path of this script, set by
# .ci/run); each test run starts its own homeserver in a temporary directory on a free port.
# Nothing outside the repository and the given DIR is written.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${SYNAPSE_VENV:-$root/.build-synapse/venv}"
version="${SYNAPSE_VERSION:-1.163.2}"
# The peer the bench measures the Matrix adapter beside (issue #33).
nio_version="${NIO_VERSION:-0.26.0}"

# The shared secret the tests register users with (admin API, loopback only).
shared_secret="switchboard-test-registration-secret"
url="${SYNAPSE_URL:-http://127.0.0.1:8008}"

need_venv() {
    [ -x "$venv/bin/python" ] || { echo "synapse: not installed; run scripts/synapse.sh install" >&2; exit 3; }
}

# Calls the client-server API with the venv's Python (no curl or jq needed): $1 method, $2 path,
# $3 JSON body or "", $4 access token or "". Prints the answer's JSON; fails with Synapse's error.
api() {
    "$venv/bin/python" - "$url" "$1" "$2" "$3" "$4" <<'PY'
import json, sys, urllib.request, urllib.error
base, method, path, body, token = sys.argv[1:6]
request = urllib.request.Request(base.rstrip("/") + path, method=method, data=body.encode() if body else None)
request.add_header("Content-Type", "application/json")
if token:
    request.add_header("Authorization", "Bearer " + token)
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        print(answer.read().decode())
except urllib.error.HTTPError as error:
    print(f"synapse: {method} {path}: HTTP {error.code} {error.read().decode()}", file=sys.stderr)
    sys.exit(1)
except OSError as error:
    print(f"synapse: no homeserver at {base} ({error}); start one with scripts/synapse.sh run DIR PORT, or set SYNAPSE_URL", file=sys.stderr)
    sys.exit(1)
PY
}

# One field of a JSON object on standard input.
field() {
    "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

case "${1:-}" in
install)
    # Synapse, and matrix-nio for the bench's peer rows (`switchboard bench --only peer`).
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import synapse, nio" 2>/dev/null; then
        echo "synapse: already installed in $venv (with matrix-nio)"
        exit 0
    fi
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "matrix-synapse==$version" "matrix-nio==$nio_version"
    echo "synapse: installed $("$venv/bin/python" -c 'import synapse; print(synapse.__version__)') with matrix-nio $nio_version in $venv"
    ;;
run)
    dir="${2:?usage: synapse.sh run DIR PORT}"
    port="${3:?usage: synapse.sh run DIR PORT}"
    need_venv
    mkdir -p "$dir/media"
    cat > "$dir/homeserver.yaml" <<EOF
server_name: "localhost"
pid_file: "$dir/homeserver.pid"
public_baseurl: "http://127.0.0.1:$port/"
listeners:
  - port: $port
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "$dir/homeserver.db"
media_store_path: "$dir/media"
signing_key_path: "$dir/localhost.signing.key"
log_config: "$dir/log.config"
report_stats: false
trusted_key_servers: []
suppress_key_server_warning: true
enable_registration: false
registration_shared_secret: "$shared_secret"
macaroon_secret_key: "switchboard-test-macaroon"
form_secret: "switchboard-test-form"
federation_domain_whitelist: []
presence:
  enabled: false
url_preview_enabled: false
max_upload_size: 10M
rc_message: {per_second: 10000, burst_count: 100000}
rc_registration: {per_second: 10000, burst_count: 100000}
rc_login:
  address: {per_second: 10000, burst_count: 100000}
  account: {per_second: 10000, burst_count: 100000}
  failed_attempts: {per_second: 10000, burst_count: 100000}
rc_joins:
  local: {per_second: 10000, burst_count: 100000}
  remote: {per_second: 10000, burst_count: 100000}
rc_invites:
  per_room: {per_second: 10000, burst_count: 100000}
  per_user: {per_second: 10000, burst_count: 100000}
rc_admin_redaction: {per_second: 10000, burst_count: 100000}
rc_room_creation: {per_second: 10000, burst_count: 100000}
EOF
    cat > "$dir/log.config" <<EOF
version: 1
formatters:
  precise:
    format: '%(asctime)s %(levelname)s %(name)s %(message)s'
handlers:
  file:
    class: logging.FileHandler
    filename: "$dir/homeserver.log"
    formatter: precise
loggers:
  # "Synapse now listening on TCP port N": the tests check that the server answering on the port
  # is this one, not another test's that took the port first.
  synapse.app._base:
    level: INFO
root:
  level: WARNING
  handlers: [file]
disable_existing_loggers: false
EOF
    cd "$dir"
    "$venv/bin/python" -m synapse.app.homeserver --config-path "$dir/homeserver.yaml" --generate-keys >/dev/null
    # Says where the homeserver is once it answers (the homeserver itself logs to
    # $dir/homeserver.log only). The watcher gives up after 60 s, or when the homeserver is gone.
    server_pid=$$
    (
        for _ in $(seq 120); do
            kill -0 "$server_pid" 2>/dev/null || exit 0
            url="http://127.0.0.1:$port"
            if api GET /_matrix/client/versions "" "" >/dev/null 2>&1; then
                echo "synapse: homeserver at http://127.0.0.1:$port (server name localhost; log $dir/homeserver.log)"
                echo "synapse: add users with SYNAPSE_URL=http://127.0.0.1:$port scripts/synapse.sh register USER PASSWORD"
                exit 0
            fi
            sleep 0.5
        done
        echo "synapse: no answer on http://127.0.0.1:$port after 60 s; see $dir/homeserver.log" >&2
    ) &
    exec "$venv/bin/python" -m synapse.app.homeserver --config-path "$dir/homeserver.yaml"
    ;;
register)
    user="${2:?usage: synapse.sh register USER PASSWORD}"
    password="${3:?usage: synapse.sh register USER PASSWORD}"
    need_venv
    # Synapse's admin registration: a nonce, then an HMAC-SHA1 of it with the shared secret.
    answer="$(api GET /_synapse/admin/v1/register "" "")"
    nonce="$(field nonce <<<"$answer")"
    mac="$("$venv/bin/python" -c '
import hashlib, hmac, sys
nonce, user, password, secret = sys.argv[1:5]
print(hmac.new(secret.encode(), "\0".join([nonce, user, password, "notadmin"]).encode(), hashlib.sha1).hexdigest())
' "$nonce" "$user" "$password" "$shared_secret")"
    body="$("$venv/bin/python" -c 'import json, sys; print(json.dumps({"nonce": sys.argv[1], "username": sys.argv[2], "password": sys.argv[3], "admin": False, "mac": sys.argv[4]}))' "$nonce" "$user" "$password" "$mac")"
    answer="$(api POST /_synapse/admin/v1/register "$body" "")"
    user_id="$(field user_id <<<"$answer")"
    echo "synapse: registered $user_id on $url"
    ;;
room)
    usage="usage: synapse.sh room USER PASSWORD NAME [INVITEE...]"
    user="${2:?$usage}"
    password="${3:?$usage}"
    name="${4:?$usage}"
    shift 4
    need_venv
    login="$("$venv/bin/python" -c 'import json, sys; print(json.dumps({"type": "m.login.password", "identifier": {"type": "m.id.user", "user": sys.argv[1]}, "password": sys.argv[2]}))' "$user" "$password")"
    answer="$(api POST /_matrix/client/v3/login "$login" "")"
    token="$(field access_token <<<"$answer")"
    invites="$("$venv/bin/python" -c 'import json, sys; print(json.dumps([u if u.startswith("@") else "@" + u + ":localhost" for u in sys.argv[1:]]))' "$@")"
    create="$("$venv/bin/python" -c 'import json, sys; print(json.dumps({"name": sys.argv[1], "preset": "private_chat", "invite": json.loads(sys.argv[2])}))' "$name" "$invites")"
    answer="$(api POST /_matrix/client/v3/createRoom "$create" "$token")"
    room_id="$(field room_id <<<"$answer")"
    echo "synapse: $user created \"$name\" on $url, invited: ${*:-nobody}" >&2
    echo "$room_id"
    ;;
*)
    echo "usage: scripts/synapse.sh install | run DIR PORT | register USER PASSWORD | room USER PASSWORD NAME [INVITEE...]" >&2
    exit 2
    ;;
esac
