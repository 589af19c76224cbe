#!/usr/bin/env bash
# Runs a command under Node 24, fetched from the npm registry when it is not there yet.
#
#   scripts/node24.sh                  prints the directory of Node 24 (bin/node, include/node)
#   scripts/node24.sh COMMAND [ARG…]   runs COMMAND with that Node first on PATH and
#                                      npm_config_nodedir at its headers
#
# Node 24 is the npm package node-<os>-<arch>@24 (the official binary and C headers, no npm),
# unpacked into ${VIGIL_NODE24_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil/node24}, outside any
# checkout. It is fetched once; remove the directory to fetch the newest 24.x. With Node 24
# first on PATH, npm (the system's) and pnpm run on it, `npm i -g` installs into that
# directory, and node-gyp builds native modules (better-sqlite3) against its headers, so they
# load with its ABI. Node 20's own node_modules are not touched: a checkout is installed for one
# Node at a time (.ci/run tests Node 24 in a copy of the checkout).
set -euo pipefail

dir=${VIGIL_NODE24_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vigil/node24}

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) echo "node24: no Node 24 package for $(uname -s)" >&2; exit 1 ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "node24: no Node 24 package for $(uname -m)" >&2; exit 1 ;;
esac
package=node-${os}-${arch}@24

usable() { [[ -x $dir/bin/node && -f $dir/include/node/node.h && $("$dir/bin/node" --version) == v24.* ]]; }

if ! usable; then
  echo "node24: fetching ${package} into ${dir}" >&2
  mkdir -p "$(dirname "$dir")"
  work=$(mktemp -d "${dir}.fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  # npm pack fetches the tarball only (no package.json or lockfile left behind, no scripts run).
  tarball=$(cd "$work" && npm pack --silent "$package")
  mkdir "$work/node"
  tar -xzf "$work/$tarball" -C "$work/node" --strip-components=1
  rm -rf "$dir"
  mv "$work/node" "$dir" # whole or not at all: an interrupted fetch leaves no half a Node
  rm -rf "$work"
  trap - EXIT
  usable || { echo "node24: ${dir} has no usable Node 24 after the fetch" >&2; exit 1; }
fi

if [[ $# -eq 0 ]]; then
  echo "$dir"
  exit 0
fi
export PATH="$dir/bin:$PATH"
export npm_config_nodedir=$dir
exec "$@"
