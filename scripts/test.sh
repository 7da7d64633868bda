#!/usr/bin/env bash
# Runs the whole test suite the way CI does: go vet, then every package's
# tests with the race detector, with a real S3 server for the tests that
# need one.
#
# The S3 server is versitygw (posix backend, with keep-alive connections
# like S3's, which versitygw does not keep by default) on 127.0.0.1, installed on
# first use into a cache folder (not into this module), started on a free
# port with a fresh data directory, and stopped when the script exits,
# whether the tests pass or not. Tests find it through
# ACTIVETIER_S3_ENDPOINT and the standard AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and AWS_REGION. If ACTIVETIER_S3_ENDPOINT is already
# set, that server is used instead (with the AWS_* credentials of the
# environment) and nothing is started.
#
# With arguments, runs them as a command instead of vet and the whole suite,
# with the server up, e.g.
#   bash scripts/test.sh go test -race -run TestConformance ./s3express/
#   bash scripts/test.sh go test -run '^$' -bench . -benchtime 100x ./s3express/
set -euo pipefail
cd "$(dirname "$0")/.."

VERSITYGW_VERSION=v1.8.0
cache="${ACTIVETIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/activetier}"
vgw_bin="$cache/versitygw-$VERSITYGW_VERSION/versitygw"

log() { echo "test.sh: $*" >&2; }

install_versitygw() {
	[[ -x "$vgw_bin" ]] && return
	log "installing versitygw $VERSITYGW_VERSION into ${vgw_bin%/*} (two to three minutes on a cold module cache)"
	# From outside the module, so that go.mod is neither read nor changed.
	(cd / && GOBIN="${vgw_bin%/*}" GOFLAGS=-buildvcs=false \
		go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION")
}

vgw_pid=""
vgw_dir=""
stop_versitygw() {
	if [[ -n "$vgw_pid" ]] && kill -0 "$vgw_pid" 2>/dev/null; then
		kill "$vgw_pid" 2>/dev/null || true
		wait "$vgw_pid" 2>/dev/null || true
	fi
	vgw_pid=""
	[[ -n "$vgw_dir" ]] && rm -rf "$vgw_dir"
	vgw_dir=""
}
trap stop_versitygw EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_versitygw starts the server on a free port and waits until it
# accepts connections; a port taken between the check and the bind just
# means another try.
start_versitygw() {
	vgw_dir="$(mktemp -d "${TMPDIR:-/tmp}/activetier-versitygw.XXXXXX")"
	mkdir -p "$vgw_dir/data"
	export AWS_ACCESS_KEY_ID="activetier-test"
	export AWS_SECRET_ACCESS_KEY="activetier-test-secret"
	export AWS_REGION="us-east-1"
	local try port
	for try in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 40000))
		port_in_use "$port" && continue
		ROOT_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" ROOT_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
			"$vgw_bin" --port "127.0.0.1:$port" --region "$AWS_REGION" --keep-alive posix "$vgw_dir/data" \
			>"$vgw_dir/versitygw.log" 2>&1 &
		vgw_pid=$!
		local waited
		for waited in $(seq 1 100); do
			if ! kill -0 "$vgw_pid" 2>/dev/null; then
				break
			fi
			if port_in_use "$port"; then
				export ACTIVETIER_S3_ENDPOINT="http://127.0.0.1:$port"
				log "versitygw $VERSITYGW_VERSION (pid $vgw_pid) serving $vgw_dir/data at $ACTIVETIER_S3_ENDPOINT"
				return
			fi
			sleep 0.1
		done
		log "versitygw did not start on port $port (try $try):"
		tail -n 20 "$vgw_dir/versitygw.log" >&2 || true
		kill "$vgw_pid" 2>/dev/null || true
		wait "$vgw_pid" 2>/dev/null || true
		vgw_pid=""
	done
	log "could not start versitygw"
	exit 1
}

[[ $# -eq 0 ]] && go vet ./...

if [[ -z "${ACTIVETIER_S3_ENDPOINT:-}" ]]; then
	install_versitygw
	start_versitygw
else
	log "using the S3 server at ACTIVETIER_S3_ENDPOINT=$ACTIVETIER_S3_ENDPOINT"
fi
# No instance metadata lookups for region or credentials in tests.
export AWS_EC2_METADATA_DISABLED=true

status=0
if [[ $# -gt 0 ]]; then
	"$@" || status=$?
else
	go test -race -count=1 ./... || status=$?
fi
if [[ $status -ne 0 && -n "$vgw_dir" && -s "$vgw_dir/versitygw.log" ]]; then
	log "tests failed; the last lines of the versitygw log:"
	tail -n 30 "$vgw_dir/versitygw.log" >&2 || true
fi
exit $status
