#!/bin/sh
# Best effort: install the system programs some tests use (Debian's prometheus, chromium,
# chromium-driver and golang-go: contrib/go's tests), when this machine can (root with apt-get) and they are missing. Tests that
# need one skip with a reason when it is absent, so this script never fails the run.
missing=""
command -v prometheus >/dev/null 2>&1 || missing="$missing prometheus"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v chromedriver >/dev/null 2>&1 || missing="$missing chromium-driver"
command -v go >/dev/null 2>&1 || missing="$missing golang-go"
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "test-tools: not installing$missing (needs root and apt-get); those tests will skip" >&2
    else
        echo "test-tools: installing$missing" >&2
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -q && apt-get install -y -q $missing; } >/dev/null 2>&1 ||
            echo "test-tools: could not install$missing; those tests will skip" >&2
    fi
fi
# The other-language helpers' clients, fetched here so that the tests themselves only ever
# talk to 127.0.0.1: nsqjs into contrib/node/node_modules, go-nsq into Go's module cache.
here="$(cd "$(dirname "$0")/.." && pwd)"
if command -v npm >/dev/null 2>&1 && [ ! -d "$here/contrib/node/node_modules/nsqjs" ]; then
    (cd "$here/contrib/node" && timeout 300 npm install --no-audit --no-fund --no-package-lock) \
        >/dev/null 2>&1 || echo "test-tools: could not install nsqjs; the Node test will skip" >&2
fi
if command -v go >/dev/null 2>&1; then
    (cd "$here/contrib/go/example" && GOFLAGS=-mod=mod GOTOOLCHAIN=local timeout 300 \
        go mod download) >/dev/null 2>&1 ||
        echo "test-tools: could not fetch go-nsq; the go-nsq sample's test will skip" >&2
fi
exit 0
