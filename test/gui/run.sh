#!/usr/bin/env bash
# Browser tests of the web GUI: installs Debian's chromium when missing and
# playwright-core (pinned in package-lock.json), builds meshnames and the
# grpcecho example, and runs
# gui.test.mjs with node's test runner. Screenshots land in test/gui/out/.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "installing chromium (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v node >/dev/null; then
  echo "node is required (apt-get install -y nodejs npm)" >&2
  exit 1
fi
npm ci --no-audit --no-fund --loglevel=error

mkdir -p out
rm -f out/*.png
# meshnames, and grpcecho: a proxyless gRPC client that connects to the
# xDS server, for the Dataplane page.
(cd ../.. && go build -o test/gui/out/meshnames ./cmd/meshnames && go build -o test/gui/out/grpcecho ./examples/grpcecho)
node --test --test-concurrency=1 --test-reporter=spec gui.test.mjs
