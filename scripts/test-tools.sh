#!/bin/sh
# Best effort: install the system programs some tests use (Debian's prometheus, chromium,
# chromium-driver and golang-go: contrib/go's tests), when this machine can (root with apt-get) and they are missing. Tests that
# need one skip with a reason when it is absent, so this script never fails the run.
missing=""
command -v prometheus >/dev/null 2>&1 || missing="$missing prometheus"
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v chromedriver >/dev/null 2>&1 || missing="$missing chromium-driver"
command -v go >/dev/null 2>&1 || missing="$missing golang-go"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "test-tools: not installing$missing (needs root and apt-get); those tests will skip" >&2
    exit 0
fi
echo "test-tools: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
{ apt-get update -q && apt-get install -y -q $missing; } >/dev/null 2>&1 ||
    echo "test-tools: could not install$missing; those tests will skip" >&2
exit 0
