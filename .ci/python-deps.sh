#!/usr/bin/env bash
# Makes the Python virtual environment the real-server tests use (httpbin under gunicorn, and
# llmock), with the pinned versions of .ci/python-requirements.txt. Idempotent: a venv already
# built from the same requirements is kept. Prints the venv's python on the last line.
#   .ci/python-deps.sh            # venv in target/test-venv (or $AJS_TEST_VENV)
# The tests (tests/capabilities_support.rs) run this themselves when the venv is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${AJS_TEST_VENV:-$root/target/test-venv}"
reqs="$root/.ci/python-requirements.txt"
python="${PYTHON:-python3}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$reqs" "$stamp"; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqs" >&2
"$venv/bin/python" -c 'import httpbin, gunicorn, llmock' >&2
cp "$reqs" "$stamp"
echo "$venv/bin/python"
