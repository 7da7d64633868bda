#!/usr/bin/env bash
# Runs the whole test suite the way CI does: go vet, then every package's
# tests with the race detector, with a real S3 server and a real Cloud
# Storage emulator for the tests that need them.
#
# The S3 server is versitygw (posix backend, with keep-alive connections
# like S3's, which versitygw does not keep by default); the Cloud Storage
# emulator is fake-gcs-server (filesystem backend, HTTP). Each is installed
# on first use into a cache folder (not into this module), started on
# 127.0.0.1 on a free port with a fresh data directory, and stopped when the
# script exits, whether the tests pass or not. Tests find them through
# ACTIVETIER_S3_ENDPOINT (with the standard AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and AWS_REGION) and ACTIVETIER_GCS_ENDPOINT. If
# either endpoint variable is already set, that server is used instead and
# nothing is started for it. ACTIVETIER_REQUIRE_SERVERS=1 tells the tests
# that the servers are up, so that a test missing its endpoint fails
# instead of skipping.
#
# With arguments, runs them as a command instead of vet and the whole suite,
# with the servers up, e.g.
#   bash scripts/test.sh go test -race -run TestConformance ./s3express/
#   bash scripts/test.sh go test -run '^$' -bench . -benchtime 100x ./s3express/ ./gcsstore/
set -euo pipefail
cd "$(dirname "$0")/.."

VERSITYGW_VERSION=v1.8.0
FAKE_GCS_SERVER_VERSION=v1.56.1
cache="${ACTIVETIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/activetier}"
vgw_bin="$cache/versitygw-$VERSITYGW_VERSION/versitygw"
gcs_bin="$cache/fake-gcs-server-$FAKE_GCS_SERVER_VERSION/fake-gcs-server"

log() { echo "test.sh: $*" >&2; }

# install BIN PACKAGE@VERSION builds PACKAGE into BIN's folder unless BIN is
# there, from outside the module, so that go.mod is neither read nor
# changed.
install() {
	local bin=$1 pkg=$2
	[[ -x "$bin" ]] && return
	log "installing $pkg into ${bin%/*} (minutes on a cold module cache)"
	(cd / && GOBIN="${bin%/*}" GOFLAGS=-buildvcs=false go install "$pkg")
}

# Servers started, for stop_servers: their pids and data directories.
pids=()
dirs=()
stop_servers() {
	local pid dir
	for pid in "${pids[@]}"; do
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	for dir in "${dirs[@]}"; do
		rm -rf "$dir"
	done
	pids=()
	dirs=()
}
trap stop_servers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_server NAME LAUNCH starts a server on a free port and waits until
# it accepts connections; LAUNCH is a function called with the port and the
# data directory, which starts the server in the background. A port taken
# between the check and the bind just means another try. It sets
# server_port, and server_dir to the fresh directory whose server.log holds
# the server's output.
start_server() {
	local name=$1 launch=$2 try port pid waited
	server_dir="$(mktemp -d "${TMPDIR:-/tmp}/activetier-$name.XXXXXX")"
	dirs+=("$server_dir")
	mkdir -p "$server_dir/data"
	for try in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 40000))
		port_in_use "$port" && continue
		"$launch" "$port" "$server_dir/data" >"$server_dir/server.log" 2>&1 &
		pid=$!
		for waited in $(seq 1 100); do
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if port_in_use "$port"; then
				pids+=("$pid")
				server_port=$port
				log "$name (pid $pid) serving $server_dir/data at http://127.0.0.1:$port"
				return
			fi
			sleep 0.1
		done
		log "$name did not start on port $port (try $try):"
		tail -n 20 "$server_dir/server.log" >&2 || true
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	log "could not start $name"
	exit 1
}

launch_versitygw() {
	ROOT_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" ROOT_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
		exec "$vgw_bin" --port "127.0.0.1:$1" --region "$AWS_REGION" --keep-alive posix "$2"
}

# The emulator serves the XML API, which the Cloud Storage client reads
# objects through, only under its -public-host name: its own address here.
launch_fake_gcs_server() {
	exec "$gcs_bin" -scheme http -host 127.0.0.1 -port "$1" -public-host "127.0.0.1:$1" \
		-backend filesystem -filesystem-root "$2" -log-level warn
}

[[ $# -eq 0 ]] && go vet ./...

# kcat (librdkafka's command-line client, Debian package kcat) for the
# example broker's tests in examples/kafkabroker; as root, or with sudo.
if ! command -v kcat >/dev/null 2>&1; then
	log "installing kcat (Debian package)"
	as_root=()
	[[ $(id -u) -ne 0 ]] && as_root=(sudo)
	"${as_root[@]}" apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq kcat >&2
fi

logs=()
if [[ -z "${ACTIVETIER_S3_ENDPOINT:-}" ]]; then
	install "$vgw_bin" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
	export AWS_ACCESS_KEY_ID="activetier-test"
	export AWS_SECRET_ACCESS_KEY="activetier-test-secret"
	export AWS_REGION="us-east-1"
	start_server versitygw launch_versitygw
	export ACTIVETIER_S3_ENDPOINT="http://127.0.0.1:$server_port"
	logs+=("$server_dir/server.log")
else
	log "using the S3 server at ACTIVETIER_S3_ENDPOINT=$ACTIVETIER_S3_ENDPOINT"
fi
if [[ -z "${ACTIVETIER_GCS_ENDPOINT:-}" ]]; then
	install "$gcs_bin" "github.com/fsouza/fake-gcs-server@$FAKE_GCS_SERVER_VERSION"
	start_server fake-gcs-server launch_fake_gcs_server
	export ACTIVETIER_GCS_ENDPOINT="http://127.0.0.1:$server_port"
	logs+=("$server_dir/server.log")
else
	log "using the Cloud Storage emulator at ACTIVETIER_GCS_ENDPOINT=$ACTIVETIER_GCS_ENDPOINT"
fi
# The demo's HTML report is checked in Debian's chromium.
if ! command -v chromium >/dev/null; then
	log "installing chromium (apt-get)"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
export ACTIVETIER_REQUIRE_SERVERS=1
# No instance metadata lookups for region or credentials in tests.
export AWS_EC2_METADATA_DISABLED=true

status=0
if [[ $# -gt 0 ]]; then
	"$@" || status=$?
else
	go test -race -count=1 ./... || status=$?
fi
if [[ $status -ne 0 ]]; then
	for f in "${logs[@]}"; do
		if [[ -s "$f" ]]; then
			log "tests failed; the last lines of $f:"
			tail -n 30 "$f" >&2 || true
		fi
	done
fi
exit $status
