#!/usr/bin/env bash
# Runs a command inside a private D-Bus session with a fresh, unlocked gnome-keyring, so the
# keychain adapter is tested against a real Secret Service without touching the user's own.
set -euo pipefail
if ! command -v dbus-run-session >/dev/null || ! command -v gnome-keyring-daemon >/dev/null; then
  echo "with-keyring: dbus-run-session and gnome-keyring-daemon are needed (apt-get install gnome-keyring dbus)" >&2
  exit 1
fi
keyring_home=$(mktemp -d)
trap 'rm -rf "$keyring_home"' EXIT
mkdir -p "$keyring_home/data" "$keyring_home/run"
chmod 700 "$keyring_home/run"
export XDG_DATA_HOME="$keyring_home/data" XDG_RUNTIME_DIR="$keyring_home/run"
# The servers the tests start listen on loopback, which a proxy the machine sets for reaching the
# internet would not reach: `canopy` follows these (main/service/proxy-from-environment.ts), so
# only the tests that set them on purpose have them.
unset HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy
# Not exec'd: the trap above removes the keyring's folder once the session ends.
dbus-run-session -- bash -c '
  printf canopy-test | gnome-keyring-daemon --unlock --components=secrets >/dev/null
  exec "$@"
' with-keyring "$@"
