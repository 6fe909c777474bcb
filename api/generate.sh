#!/usr/bin/env bash
# Regenerates the Go code of the protobuf schemas under api/. The plugins
# are built from pinned module versions: protoc-gen-go from the
# google.golang.org/protobuf version in go.mod, protoc-gen-go-grpc at
# PROTOC_GEN_GO_GRPC below. protoc itself is Debian's protobuf-compiler
# (apt-get install -y protobuf-compiler); its version is written into the
# generated headers, so CI checks freshness with the same package.
#
#   api/generate.sh          regenerate
#   api/generate.sh --check  fail if the checked-in code is not what it generates
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_GEN_GO_GRPC=v1.6.2   # google.golang.org/grpc/cmd/protoc-gen-go-grpc, pinned
PROTOC_WANT="libprotoc 3.21.12"

if ! command -v protoc >/dev/null; then
  echo "protoc not found: apt-get install -y protobuf-compiler" >&2
  exit 1
fi
if [ "$(protoc --version)" != "$PROTOC_WANT" ]; then
  echo "warning: $(protoc --version) is not $PROTOC_WANT; the generated headers will differ" >&2
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC"

out=api
if [ "${1:-}" = "--check" ]; then
  out="$bin/out"
  mkdir -p "$out"
fi

protos=$(cd api && find . -name '*.proto' | sort)
(cd api && PATH="$bin:$PATH" protoc -I . \
  --go_out="$( [ "$out" = api ] && echo . || echo "$out")" --go_opt=paths=source_relative \
  --go-grpc_out="$( [ "$out" = api ] && echo . || echo "$out")" --go-grpc_opt=paths=source_relative \
  $protos)

if [ "${1:-}" = "--check" ]; then
  stale=0
  for f in $(cd "$out" && find . -name '*.go' | sort); do
    if ! cmp -s "$out/$f" "api/$f"; then
      echo "api/$f is stale: run api/generate.sh" >&2
      stale=1
    fi
  done
  for f in $(cd api && find . -name '*.pb.go' | sort); do
    [ -f "$out/$f" ] || { echo "api/$f has no schema: remove it or run api/generate.sh" >&2; stale=1; }
  done
  exit $stale
fi
