#!/usr/bin/env bash
# The Python tools the tests drive the project with from outside Swift, in a virtual environment
# inside the clone (.build-python/venv, ignored by git):
#
#   scripts/python-tools.sh install    installs requests and websocket-client (PyPI): the gateway
#                                      API's test client (Tests/Python/gateway_api_client.py);
#                                      and Selenium, which drives Debian's headless Chromium through
#                                      the agent console (Tests/Python/agent_console_browser.py)
#   scripts/python-tools.sh python     prints the venv's python
#
# The tests find it at .build-python/venv/bin/python; without it a local `swift test` skips the
# tests that need it and a CI run (CI set) fails them, naming this script.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${PYTHON_TOOLS_VENV:-$root/.build-python/venv}"
# Selenium 4.52 needs a certifi newer than the package mirror has; 4.51 does not.
packages=("requests==2.34.2" "websocket-client==1.9.2" "selenium==4.51.0")

case "${1:-}" in
    install)
        if [ ! -x "$venv/bin/python" ]; then
            python3 -m venv "$venv"
        fi
        "$venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}"
        "$venv/bin/python" -c 'import requests, websocket, selenium; print("python tools: requests", requests.__version__, "websocket-client", websocket.__version__, "selenium", selenium.__version__)'
        ;;
    python)
        [ -x "$venv/bin/python" ] || { echo "python-tools: not installed; run scripts/python-tools.sh install" >&2; exit 3; }
        echo "$venv/bin/python"
        ;;
    *)
        echo "usage: scripts/python-tools.sh install | python" >&2
        exit 2
        ;;
esac
