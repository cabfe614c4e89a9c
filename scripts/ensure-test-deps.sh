#!/usr/bin/env bash
# What the tests need from the machine besides node_modules, installed where it is missing; npm runs
# this before `npm test` (its `pretest`), so `npm ci && npm test` works on a fresh Debian machine:
#   - chromium: test/cli/plot.test.ts renders the simulator's plot in it, headless (CHROMIUM_BIN, if
#     set, names the browser to use instead, and must exist);
#   - redis-server: the Redis tests start their own servers on free loopback ports.
# As root it installs them with apt-get; otherwise through sudo where there is one; otherwise it
# stops and says what to install. With everything present it only looks, in a few milliseconds.
# Usage: bash scripts/ensure-test-deps.sh (npm test and npm run test:unit run it first).
set -euo pipefail

missing=()
if [ -n "${CHROMIUM_BIN:-}" ]; then
  if ! command -v "$CHROMIUM_BIN" >/dev/null 2>&1; then
    echo "tokenpace tests: CHROMIUM_BIN=$CHROMIUM_BIN is not a program that can be run;" \
      "point it at a Chromium or Chrome binary, or unset it to use chromium from PATH" >&2
    exit 1
  fi
elif ! command -v chromium >/dev/null 2>&1; then
  missing+=(chromium)
fi
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ "${#missing[@]}" -eq 0 ] && exit 0

what="${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tokenpace tests: missing $what, and this is not a Debian-like machine (no apt-get):" \
    "install $what with its package manager (or set CHROMIUM_BIN to a Chromium or Chrome binary)" >&2
  exit 1
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "tokenpace tests: missing $what; as root, run:" >&2
  echo "  apt-get update && apt-get install -y $what" >&2
  echo "(or set CHROMIUM_BIN to a Chromium or Chrome binary you have), then run the tests again" >&2
  exit 1
fi

echo "== tokenpace tests: installing $what (apt-get${as_root:+ through sudo})" >&2
started=$SECONDS
# A fresh machine's package lists may be old or empty: read them first, then install.
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
for program in "${missing[@]}"; do
  command -v "$program" >/dev/null 2>&1 || {
    echo "tokenpace tests: apt-get installed $program, but it is not on PATH" >&2
    exit 1
  }
done
echo "== tokenpace tests: installed $what in $((SECONDS - started)) s" >&2
