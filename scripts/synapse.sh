#!/usr/bin/env bash
# A throwaway Synapse homeserver on loopback, for the Matrix adapter's live tests (issue #16).
#
#   scripts/synapse.sh install            installs matrix-synapse (PyPI) into .build-synapse/venv
#   scripts/synapse.sh run DIR PORT       writes a loopback test configuration into DIR (SQLite,
#                                         registration by shared secret, rate limits raised) and
#                                         runs the homeserver in the foreground on 127.0.0.1:PORT
#
# The tests find the installation through SWITCHBOARD_SYNAPSE (the path of this script, set by
# .ci/run); each test run starts its own homeserver in a temporary directory on a free port.
# Nothing outside the repository and the given DIR is written.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${SYNAPSE_VENV:-$root/.build-synapse/venv}"
version="${SYNAPSE_VERSION:-1.163.2}"

# The shared secret the tests register users with (admin API, loopback only).
shared_secret="switchboard-test-registration-secret"

case "${1:-}" in
install)
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import synapse" 2>/dev/null; then
        echo "synapse: already installed in $venv"
        exit 0
    fi
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "matrix-synapse==$version"
    echo "synapse: installed $("$venv/bin/python" -c 'import synapse; print(synapse.__version__)') in $venv"
    ;;
run)
    dir="${2:?usage: synapse.sh run DIR PORT}"
    port="${3:?usage: synapse.sh run DIR PORT}"
    [ -x "$venv/bin/python" ] || { echo "synapse: not installed; run scripts/synapse.sh install" >&2; exit 3; }
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
root:
  level: WARNING
  handlers: [file]
disable_existing_loggers: false
EOF
    cd "$dir"
    "$venv/bin/python" -m synapse.app.homeserver --config-path "$dir/homeserver.yaml" --generate-keys >/dev/null
    exec "$venv/bin/python" -m synapse.app.homeserver --config-path "$dir/homeserver.yaml"
    ;;
*)
    echo "usage: scripts/synapse.sh install | run DIR PORT" >&2
    exit 2
    ;;
esac
