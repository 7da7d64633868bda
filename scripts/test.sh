#!/usr/bin/env bash
# Runs the whole test suite the way CI does: go vet and gofmt, then every package's
# tests with the race detector (the simulation's seeds without it, see below), with a real S3 server and a real Cloud
# Storage emulator for the tests that need them, then the s3express
# package's tests again against a second S3 server.
#
# The S3 server is versitygw (posix backend, with keep-alive connections
# like S3's, which versitygw does not keep by default); the second is MinIO
# (one drive, no console, no update check); the Cloud Storage emulator is
# fake-gcs-server (filesystem backend, HTTP). Each is installed on first use
# into a cache folder (not into this module), started on 127.0.0.1 on a
# free port with a fresh data directory, and stopped when the script exits,
# whether the tests pass or not. Tests find them through
# ACTIVETIER_S3_ENDPOINT (with the standard AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and AWS_REGION) and ACTIVETIER_GCS_ENDPOINT;
# ACTIVETIER_S3_SERVER names the S3 server (versitygw or minio) for the few
# tests that check what a particular server does. If ACTIVETIER_S3_ENDPOINT
# or ACTIVETIER_GCS_ENDPOINT is already set, that server is used instead
# and nothing is started for it (set ACTIVETIER_S3_SERVER to what it is).
# ACTIVETIER_REQUIRE_SERVERS=1 tells the tests that the servers are up, so
# that a test missing its endpoint fails instead of skipping.
#
# What the second server showed (s3express/doc.go has the details): MinIO
# without a KMS answers 501 NotImplemented to every PUT that asks for
# server-side encryption, which s3express reports as storage.ErrPermanent
# (its default, no encryption header, stores); it keeps directory-style
# bucket names as ordinary buckets, like versitygw. The tests that differ
# between the two servers check each server's own answer, by
# ACTIVETIER_S3_SERVER.
#
# With arguments, runs them as a command instead of vet and the suites,
# with versitygw (or, with ACTIVETIER_S3_SERVER=minio in the environment,
# MinIO) and the emulator up, e.g.
#   bash scripts/test.sh go test -race -run TestConformance ./s3express/
#   ACTIVETIER_S3_SERVER=minio bash scripts/test.sh go test -race ./s3express/
#   bash scripts/test.sh go test -run '^$' -bench . -benchtime 100x ./s3express/ ./gcsstore/
set -euo pipefail
cd "$(dirname "$0")/.."

VERSITYGW_VERSION=v1.8.0
FAKE_GCS_SERVER_VERSION=v1.56.1
# MinIO release RELEASE.2025-09-07T16-13-09Z: MinIO tags no semantic
# versions, so this is the release commit's pseudo-version. Its build takes
# most of the script's first run (about 20 minutes on two shared cores),
# then it is cached; older releases require nearly as many modules (220 in
# late 2022, 259 here), so none would build much faster. MinIO is under the AGPL: it is only built and run here as a test
# server, in its own process, never linked into anything of this module.
MINIO_VERSION=v0.0.0-20250907161309-07c3a429bfed
cache="${ACTIVETIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/activetier}"
vgw_bin="$cache/versitygw-$VERSITYGW_VERSION/versitygw"
gcs_bin="$cache/fake-gcs-server-$FAKE_GCS_SERVER_VERSION/fake-gcs-server"
minio_bin="$cache/minio-$MINIO_VERSION/minio"

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

# MinIO serves one drive, without its console (which would take another
# port) and without checking for updates (no request leaves the machine).
# Its root credentials are the ones the tests sign with.
launch_minio() {
	MINIO_ROOT_USER="$test_key" MINIO_ROOT_PASSWORD="$test_secret" MINIO_SITE_REGION=us-east-1 \
		MINIO_BROWSER=off MINIO_UPDATE=off \
		exec "$minio_bin" server --quiet --address "127.0.0.1:$1" "$2"
}

# The emulator serves the XML API, which the Cloud Storage client reads
# objects through, only under its -public-host name: its own address here.
launch_fake_gcs_server() {
	exec "$gcs_bin" -scheme http -host 127.0.0.1 -port "$1" -public-host "127.0.0.1:$1" \
		-backend filesystem -filesystem-root "$2" -log-level warn
}

# ACTIVETIER_S3_SERVER picks the S3 server a command runs with.
if [[ -z "${ACTIVETIER_S3_ENDPOINT:-}" ]]; then
	case "${ACTIVETIER_S3_SERVER:-versitygw}" in
	versitygw) ;;
	minio)
		if [[ $# -eq 0 ]]; then
			log "ACTIVETIER_S3_SERVER=minio is for a command: the whole suite runs on versitygw, then the s3express tests on MinIO"
			exit 2
		fi
		;;
	*)
		log "ACTIVETIER_S3_SERVER=$ACTIVETIER_S3_SERVER: want versitygw or minio (or any name, with ACTIVETIER_S3_ENDPOINT set)"
		exit 2
		;;
	esac
fi

if [[ $# -eq 0 ]]; then
	go vet ./...
	unformatted=$(gofmt -l .)
	if [[ -n $unformatted ]]; then
		log "not gofmt-formatted: $unformatted"
		exit 1
	fi
fi

# The Kafka clients of the example broker's tests in examples/kafkabroker,
# as Debian packages: kcat (librdkafka's command-line client) and Python's
# confluent-kafka (python3-confluent-kafka, for Debian's /usr/bin/python3,
# named by its path because a pyenv python3 may come first on PATH); as
# root, or with sudo.
debs=()
command -v kcat >/dev/null 2>&1 || debs+=(kcat)
/usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || debs+=(python3-confluent-kafka)
if [[ ${#debs[@]} -gt 0 ]]; then
	log "installing ${debs[*]} (Debian packages)"
	as_root=()
	[[ $(id -u) -ne 0 ]] && as_root=(sudo)
	"${as_root[@]}" apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq "${debs[@]}" >&2
fi

logs=()
# The root credentials of the S3 servers started here, which the tests
# sign with.
test_key="activetier-test"
test_secret="activetier-test-secret"

# http_status PORT PATH prints the status code of an anonymous GET of PATH
# on 127.0.0.1:PORT, or nothing.
http_status() (
	exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$2" "$1" >&3
	read -r -t 5 _ status _ <&3 || true
	echo "${status:-}"
)

# start_minio starts MinIO, waits until it serves requests, and sets
# minio_endpoint. MinIO accepts connections before its drive is ready and
# answers 503 until then; an anonymous request is refused (403) once it is.
start_minio() {
	local waited status
	install "$minio_bin" "github.com/minio/minio@$MINIO_VERSION"
	start_server minio launch_minio
	minio_endpoint="http://127.0.0.1:$server_port"
	logs+=("$server_dir/server.log")
	for waited in $(seq 1 300); do
		status=$(http_status "$server_port" /)
		if [[ -n $status && $status != 503 ]]; then
			return
		fi
		sleep 0.1
	done
	log "MinIO at $minio_endpoint did not become ready (last answer: ${status:-none}):"
	tail -n 20 "$server_dir/server.log" >&2 || true
	exit 1
}

if [[ -n "${ACTIVETIER_S3_ENDPOINT:-}" ]]; then
	log "using the S3 server at ACTIVETIER_S3_ENDPOINT=$ACTIVETIER_S3_ENDPOINT (ACTIVETIER_S3_SERVER=${ACTIVETIER_S3_SERVER:-})"
	export ACTIVETIER_S3_SERVER="${ACTIVETIER_S3_SERVER:-}"
else
	export AWS_ACCESS_KEY_ID="$test_key"
	export AWS_SECRET_ACCESS_KEY="$test_secret"
	export AWS_REGION="us-east-1"
	case "${ACTIVETIER_S3_SERVER:-versitygw}" in
	versitygw)
		install "$vgw_bin" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
		start_server versitygw launch_versitygw
		export ACTIVETIER_S3_ENDPOINT="http://127.0.0.1:$server_port"
		logs+=("$server_dir/server.log")
		;;
	minio)
		start_minio
		export ACTIVETIER_S3_ENDPOINT="$minio_endpoint"
		;;
	esac
	export ACTIVETIER_S3_SERVER="${ACTIVETIER_S3_SERVER:-versitygw}"
fi
if [[ $# -eq 0 ]]; then
	start_minio
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
	# The simulation runs on one goroutine (internal/harness/sim/doc.go), so the
	# race detector has nothing to find in most of it and makes its
	# hundreds of seeds take ten times as long: its seeds run without it,
	# and a short form of the parallel contract run and the replay with it.
	go test -race -count=1 $(go list ./... | grep -vx 'github.com/activetier/activetier/internal/harness/sim') || status=$?
	log "the simulation's seeds, without the race detector, then a short form with it"
	go test -count=1 -timeout 30m ./internal/harness/sim/ || status=$?
	ACTIVETIER_SIM_SEEDS=20 ACTIVETIER_SIM_PARALLEL=2 \
		go test -race -count=1 -run '^(TestSimContract|TestReplay)$' ./internal/harness/sim/ || status=$?
	log "the s3express tests again, against MinIO at $minio_endpoint"
	ACTIVETIER_S3_ENDPOINT="$minio_endpoint" ACTIVETIER_S3_SERVER=minio \
		AWS_ACCESS_KEY_ID="$test_key" AWS_SECRET_ACCESS_KEY="$test_secret" AWS_REGION=us-east-1 \
		go test -race -count=1 ./s3express/ || status=$?
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
