#!/usr/bin/env bash
# dev-services.sh up|down|status [dev|server]
#
# Brings up what CommitLayer needs on a developer machine or in CI:
#   - dev (the default): a Temporal dev server (temporal server start-dev), installed with `go install`
#     when missing, started in the background with its SQLite file and log under $COMMITLAYER_DATA_DIR;
#   - server: Temporal's own server binary with PostgreSQL persistence and visibility, the way a
#     cluster runs (see scripts/temporal-server.bash; frontend at 127.0.0.1:$TEMPORAL_CLUSTER_PORT,
#     7243 by default, so it runs beside the dev server);
#   - PostgreSQL answering, and the database named by DATABASE_URL.
# Every command is idempotent. `down` stops only what `up` started (it keeps pid files); `down` and
# `status` without a mode cover both servers. The mode can also come from COMMITLAYER_TEMPORAL.
#
# Environment (all optional):
#   DATABASE_URL              postgres://postgres@127.0.0.1:5432/commitlayer?sslmode=disable
#   COMMITLAYER_DATA_DIR      <repo>/.data (Temporal database, logs, pid file)
#   TEMPORAL_IP               127.0.0.1          address the dev server binds
#   TEMPORAL_PORT             7233               frontend gRPC port
#   TEMPORAL_UI_PORT          8233               Web UI port
#   TEMPORAL_CLI_VERSION      v1.5.1             version installed when `temporal` is missing
#   TEMPORAL_START_TIMEOUT    90                 seconds to wait for the dev server to serve
#   POSTGRES_START_TIMEOUT    30                 seconds to wait for PostgreSQL to answer
set -euo pipefail

export GOTOOLCHAIN=local
# `make up TEMPORAL=server` exports TEMPORAL; here the name holds the CLI's path.
unset TEMPORAL

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA_DIR=${COMMITLAYER_DATA_DIR:-$ROOT/.data}
TEMPORAL_IP=${TEMPORAL_IP:-127.0.0.1}
TEMPORAL_PORT=${TEMPORAL_PORT:-7233}
TEMPORAL_UI_PORT=${TEMPORAL_UI_PORT:-8233}
TEMPORAL_CLI_VERSION=${TEMPORAL_CLI_VERSION:-v1.5.1}
TEMPORAL_START_TIMEOUT=${TEMPORAL_START_TIMEOUT:-90}
POSTGRES_START_TIMEOUT=${POSTGRES_START_TIMEOUT:-30}
DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/commitlayer?sslmode=disable}

TEMPORAL_DB=$DATA_DIR/temporal.db
TEMPORAL_LOG=$DATA_DIR/temporal.log
TEMPORAL_PID=$DATA_DIR/temporal.pid
POSTGRES_MARK=$DATA_DIR/postgres.started

# Search attributes CommitLayer's workflows upsert (the worker also registers them at start).
SEARCH_ATTRIBUTES=(
	CommitLayerVerdict=Keyword
	CommitLayerContract=Keyword
	CommitLayerAgent=Keyword
	CommitLayerSubject=Keyword
	CommitLayerTenant=Keyword
	CommitLayerProvisional=Bool
	CommitLayerRun=Keyword
	CommitLayerScenario=Keyword
	CommitLayerAgree=Keyword
)

# SQLite pragmas for the dev server's file. The default rollback journal fsyncs the journal and the
# database at every commit, under the one connection every persistence call queues behind; with a
# write-ahead log and synchronous=NORMAL a commit appends to the log, and a checkpoint syncs it.
# What was committed survives the server's crash or kill -9; an OS crash or power cut can lose the
# last commits (SQLite's documented trade). Set TEMPORAL_SQLITE_PRAGMAS= (empty) for SQLite's defaults.
read -r -a SQLITE_PRAGMAS <<<"${TEMPORAL_SQLITE_PRAGMAS-journal_mode=wal synchronous=normal}"

# Dynamic config that cuts a workflow's start-to-finish on the dev server from ~150 ms to ~25-55 ms.
DYNAMIC_CONFIG=(
	history.transferProcessorMaxPollRPS=1000
	history.timerProcessorMaxPollRPS=1000
	history.visibilityProcessorMaxPollRPS=1000
	# A queue reader that misses a new task's notification after a burst
	# otherwise waits its max poll interval (about a minute) to find it.
	'history.transferProcessorMaxPollInterval="1s"'
	'history.timerProcessorMaxPollInterval="1s"'
	'history.visibilityProcessorMaxPollInterval="1s"'
	matching.numTaskqueueReadPartitions=1
	matching.numTaskqueueWritePartitions=1
	# Worker Versioning: a version that stopped being current or ramping is
	# reported drained (no open pinned workflow on it) within seconds, not
	# the default 3 + 3 minutes, so a rollout (and its test) sees it drain.
	'matching.wv.VersionDrainageStatusRefreshInterval="5s"'
	'matching.wv.VersionDrainageStatusVisibilityGracePeriod="5s"'
	# A developer machine and CI keep one server for many builds and test runs: each test process makes
	# its own deployments, and each benchmark process adds its own task queue to its build's version.
	# Temporal's defaults (100 deployments per namespace, 100 versions per deployment, 100 task queues
	# per version) fill up within a few `make test` runs.
	matching.maxDeployments=10000
	matching.maxVersionsInDeployment=10000
	matching.maxTaskQueuesInDeployment=100000
	matching.maxTaskQueuesInDeploymentVersion=10000
)

say() { printf 'dev-services: %s\n' "$*"; }
die() {
	printf 'dev-services: error: %s\n' "$*" >&2
	exit 1
}

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_uint "$TEMPORAL_PORT" || die "TEMPORAL_PORT must be a port number, got '$TEMPORAL_PORT'"
is_uint "$TEMPORAL_UI_PORT" || die "TEMPORAL_UI_PORT must be a port number, got '$TEMPORAL_UI_PORT'"
is_uint "$TEMPORAL_START_TIMEOUT" || die "TEMPORAL_START_TIMEOUT must be a number of seconds"
is_uint "$POSTGRES_START_TIMEOUT" || die "POSTGRES_START_TIMEOUT must be a number of seconds"
for kv in "${SQLITE_PRAGMAS[@]}"; do
	[[ $kv =~ ^[a-z_]+=[A-Za-z0-9_-]+$ ]] || die "TEMPORAL_SQLITE_PRAGMAS: '$kv' is not a pragma=value pair (such as journal_mode=wal)"
done

# The address clients use: a wildcard bind is reached through the loopback.
temporal_probe_host() {
	case $TEMPORAL_IP in
	0.0.0.0 | '' | '::') echo 127.0.0.1 ;;
	*) echo "$TEMPORAL_IP" ;;
	esac
}
TEMPORAL_ADDR=$(temporal_probe_host):$TEMPORAL_PORT

# ---------------------------------------------------------------------------- Temporal

# temporal_bin prints the path of the Temporal CLI, or nothing.
temporal_bin() {
	if command -v temporal >/dev/null 2>&1; then
		command -v temporal
		return
	fi
	local gobin
	gobin=$(go env GOBIN 2>/dev/null || true)
	[[ -n $gobin ]] || gobin=$(go env GOPATH 2>/dev/null)/bin
	if [[ -x $gobin/temporal ]]; then
		echo "$gobin/temporal"
	fi
}

ensure_temporal_cli() {
	TEMPORAL=$(temporal_bin)
	if [[ -n $TEMPORAL ]]; then
		return
	fi
	command -v go >/dev/null 2>&1 || die "the Temporal CLI is missing and so is go to install it"
	say "installing the Temporal CLI $TEMPORAL_CLI_VERSION with go install (a cold build takes a few minutes)"
	(cd "$ROOT" && go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION") ||
		die "go install github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION failed"
	TEMPORAL=$(temporal_bin)
	[[ -n $TEMPORAL ]] || die "go install succeeded but no temporal binary is in PATH, GOBIN or GOPATH/bin"
}

# ensure_stripe_mock: stripe-mock (Stripe's spec-checking mock, for the wire test of the Stripe backend
# and connector) is installed with go install when missing. Tests start their own on free ports.
STRIPE_MOCK_VERSION=${STRIPE_MOCK_VERSION:-v0.203.0}
ensure_stripe_mock() {
	local gobin
	gobin=$(go env GOBIN 2>/dev/null || true)
	[[ -n $gobin ]] || gobin=$(go env GOPATH 2>/dev/null)/bin
	if command -v stripe-mock >/dev/null 2>&1 || [[ -x $gobin/stripe-mock ]]; then
		return
	fi
	say "installing stripe-mock $STRIPE_MOCK_VERSION with go install"
	(cd "$ROOT" && go install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION") ||
		die "go install github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION failed"
}

# tcp_open HOST PORT: something accepts connections there.
tcp_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# temporal_serving: the frontend at TEMPORAL_ADDR answers its health check. The user's own Temporal
# environment (TEMPORAL_API_KEY, TLS, config files) is ignored: this is the local, plaintext dev server.
temporal_serving() {
	[[ -n ${TEMPORAL:-} ]] || return 1
	"$TEMPORAL" operator cluster health --address "$TEMPORAL_ADDR" \
		--disable-config-env --disable-config-file --command-timeout 3s >/dev/null 2>&1
}

# our_temporal_pid prints the pid from the pid file when that process is still our dev server.
our_temporal_pid() {
	[[ -f $TEMPORAL_PID ]] || return 1
	local pid
	pid=$(<"$TEMPORAL_PID")
	is_uint "$pid" || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	# Guard against a recycled pid: the process must be a temporal dev server.
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'start-dev' || return 1
	fi
	echo "$pid"
}

temporal_up() {
	local pid
	ensure_temporal_cli
	if temporal_serving; then
		if pid=$(our_temporal_pid); then
			say "temporal: already running (pid $pid) at $TEMPORAL_ADDR"
		else
			say "temporal: a server already answers at $TEMPORAL_ADDR (not started by this script; left alone)"
		fi
		return
	fi
	if ! pid=$(our_temporal_pid); then
		rm -f "$TEMPORAL_PID"
		if tcp_open "$(temporal_probe_host)" "$TEMPORAL_PORT"; then
			die "port $TEMPORAL_PORT is taken by something that does not answer as a Temporal server; free it or set TEMPORAL_PORT"
		fi
		if tcp_open "$(temporal_probe_host)" "$TEMPORAL_UI_PORT"; then
			die "UI port $TEMPORAL_UI_PORT is taken; free it or set TEMPORAL_UI_PORT"
		fi
		local args=(server start-dev
			--db-filename "$TEMPORAL_DB"
			--ip "$TEMPORAL_IP"
			--port "$TEMPORAL_PORT"
			--ui-port "$TEMPORAL_UI_PORT")
		local kv
		for kv in "${DYNAMIC_CONFIG[@]}"; do
			args+=(--dynamic-config-value "$kv")
		done
		for kv in "${SEARCH_ATTRIBUTES[@]}"; do
			args+=(--search-attribute "$kv")
		done
		for kv in "${SQLITE_PRAGMAS[@]}"; do
			args+=(--sqlite-pragma "$kv")
		done
		mkdir -p "$DATA_DIR"
		say "temporal: starting the dev server at $TEMPORAL_ADDR (log $TEMPORAL_LOG)"
		{
			printf '\n=== %s dev-services up: %s' "$(date -u +%FT%TZ)" "$TEMPORAL"
			printf ' %q' "${args[@]}"
			printf '\n'
		} >>"$TEMPORAL_LOG"
		# A new session (setsid, else nohup), so the server outlives this shell and its process group;
		# the inner shell writes its own pid and then becomes the server.
		local detach=(nohup)
		if command -v setsid >/dev/null 2>&1; then
			detach=(setsid)
		fi
		"${detach[@]}" bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$TEMPORAL_PID" "$TEMPORAL" "${args[@]}" \
			</dev/null >>"$TEMPORAL_LOG" 2>&1 &
		local waited=0
		while [[ ! -s $TEMPORAL_PID ]] && ((waited < 50)); do
			sleep 0.1
			waited=$((waited + 1))
		done
		pid=$(<"$TEMPORAL_PID") || die "temporal: the dev server did not record its pid"
	else
		say "temporal: dev server (pid $pid) is starting; waiting"
	fi
	local deadline=$((SECONDS + TEMPORAL_START_TIMEOUT))
	until temporal_serving; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$TEMPORAL_PID"
			echo "--- last lines of $TEMPORAL_LOG ---" >&2
			tail -n 20 "$TEMPORAL_LOG" >&2 || true
			die "temporal: the dev server exited before it answered"
		fi
		if ((SECONDS >= deadline)); then
			echo "--- last lines of $TEMPORAL_LOG ---" >&2
			tail -n 20 "$TEMPORAL_LOG" >&2 || true
			die "temporal: no answer at $TEMPORAL_ADDR after ${TEMPORAL_START_TIMEOUT}s (pid $pid still running; 'down' stops it)"
		fi
		sleep 0.5
	done
	say "temporal: serving at $TEMPORAL_ADDR (pid $pid), UI http://localhost:$TEMPORAL_UI_PORT"
}

temporal_down() {
	local pid
	if ! pid=$(our_temporal_pid); then
		rm -f "$TEMPORAL_PID"
		say "temporal: nothing started by this script is running"
		return
	fi
	say "temporal: stopping the dev server (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "temporal: still running after 10s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$TEMPORAL_PID"
}

temporal_status() {
	TEMPORAL=$(temporal_bin)
	if [[ -z $TEMPORAL ]]; then
		say "temporal: CLI not installed ('up' installs $TEMPORAL_CLI_VERSION)"
		return 1
	fi
	local pid=
	pid=$(our_temporal_pid) || pid=
	if temporal_serving; then
		if [[ -n $pid ]]; then
			say "temporal: serving at $TEMPORAL_ADDR (pid $pid, started by this script), UI http://localhost:$TEMPORAL_UI_PORT"
		else
			say "temporal: serving at $TEMPORAL_ADDR (not started by this script)"
		fi
		return 0
	fi
	if [[ -n $pid ]]; then
		say "temporal: dev server process $pid is running but not answering at $TEMPORAL_ADDR yet"
	else
		say "temporal: nothing answers at $TEMPORAL_ADDR"
	fi
	return 1
}

# ---------------------------------------------------------------------------- PostgreSQL

# Split DATABASE_URL (URL form) into the admin URL (same server, database "postgres") and the name.
parse_database_url() {
	case $DATABASE_URL in
	postgres://* | postgresql://*) ;;
	*) die "DATABASE_URL must be a postgres:// URL, got '$DATABASE_URL'" ;;
	esac
	local base=${DATABASE_URL%%\?*} query=
	if [[ $DATABASE_URL == *\?* ]]; then
		query="?${DATABASE_URL#*\?}"
	fi
	local rest=${base#*://}
	[[ $rest == */* ]] || die "DATABASE_URL names no database: '$DATABASE_URL'"
	DB_NAME=${rest##*/}
	[[ -n $DB_NAME ]] || die "DATABASE_URL names no database: '$DATABASE_URL'"
	[[ $DB_NAME =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] ||
		die "database name '$DB_NAME' in DATABASE_URL: use letters, digits and underscores"
	ADMIN_URL="${base%/*}/postgres$query"
	local authority=${rest%%/*}
	DB_HOST=${authority##*@}
	DB_HOST=${DB_HOST%%:*}
}

pg_answers() {
	pg_isready -q -t 3 -d "$ADMIN_URL" >/dev/null 2>&1
}

# Start the machine's own cluster when it is local and stopped (Debian's pg_ctlcluster).
postgres_start_local() {
	case $DB_HOST in
	'' | 127.0.0.1 | localhost | '[::1]') ;;
	*) return 1 ;;
	esac
	command -v pg_ctlcluster >/dev/null 2>&1 || return 1
	[[ -d /etc/postgresql ]] || return 1
	local version
	version=$(ls /etc/postgresql | sort -V | tail -n 1)
	[[ -n $version ]] || return 1
	say "postgres: not answering; starting cluster $version/main with pg_ctlcluster"
	pg_ctlcluster --skip-systemctl-redirect "$version" main start || return 1
	mkdir -p "$DATA_DIR"
	echo "$version" >"$POSTGRES_MARK"
}

# db_exists prints 1 when the database DB_NAME exists (the name is passed as a psql variable, quoted
# by psql, which only interpolates variables in input it reads, not in -c).
db_exists() {
	psql "$ADMIN_URL" -XAtq -v ON_ERROR_STOP=1 -v name="$DB_NAME" \
		<<<"SELECT 1 FROM pg_database WHERE datname = :'name'"
}

postgres_up() {
	parse_database_url
	command -v psql >/dev/null 2>&1 || die "psql is not installed (needed to create the database)"
	command -v pg_isready >/dev/null 2>&1 || die "pg_isready is not installed"
	if ! pg_answers; then
		postgres_start_local || die "postgres: nothing answers at ${ADMIN_URL%%\?*} and it cannot be started from here"
		local deadline=$((SECONDS + POSTGRES_START_TIMEOUT))
		until pg_answers; do
			((SECONDS < deadline)) || die "postgres: started but not answering after ${POSTGRES_START_TIMEOUT}s"
			sleep 0.5
		done
	fi
	say "postgres: answering at ${ADMIN_URL%%\?*}"
	local exists
	exists=$(db_exists) || die "postgres: cannot query pg_database as the admin user"
	if [[ $exists == 1 ]]; then
		say "postgres: database $DB_NAME exists"
		return
	fi
	# The name was checked against [A-Za-z_][A-Za-z0-9_]*; quoting keeps its case.
	if ! psql "$ADMIN_URL" -XAtq -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$DB_NAME\"" >/dev/null; then
		# Another process may have created it at the same moment.
		exists=$(db_exists || true)
		[[ $exists == 1 ]] || die "postgres: cannot create database $DB_NAME"
	fi
	say "postgres: created database $DB_NAME"
}

postgres_down() {
	[[ -f $POSTGRES_MARK ]] || return 0
	local version
	version=$(<"$POSTGRES_MARK")
	say "postgres: stopping cluster $version/main (started by 'up')"
	pg_ctlcluster --skip-systemctl-redirect "$version" main stop || say "postgres: stop failed; left as is"
	rm -f "$POSTGRES_MARK"
}

postgres_status() {
	parse_database_url
	if ! pg_answers; then
		say "postgres: nothing answers at ${ADMIN_URL%%\?*}"
		return 1
	fi
	local exists
	exists=$(db_exists 2>/dev/null || true)
	if [[ $exists == 1 ]]; then
		say "postgres: answering; database $DB_NAME exists"
		return 0
	fi
	say "postgres: answering; database $DB_NAME is missing ('up' creates it)"
	return 1
}

# ---------------------------------------------------------------------------- Temporal server

# shellcheck source=temporal-server.bash
source "$ROOT/scripts/temporal-server.bash"

# ---------------------------------------------------------------------------- main

usage() {
	echo "usage: $0 up|down|status [dev|server]" >&2
	exit 2
}

[[ $# -eq 1 || $# -eq 2 ]] || usage
case ${2:-dev} in
dev | server) ;;
*) usage ;;
esac
mode=${2:-${COMMITLAYER_TEMPORAL:-}}
case $mode in
'' | dev | server) ;;
*) die "COMMITLAYER_TEMPORAL is dev or server, got '$mode'" ;;
esac
case $1 in
up)
	postgres_up
	ensure_stripe_mock
	if [[ $mode == server ]]; then
		cluster_up
	else
		temporal_up
	fi
	;;
down)
	[[ $mode == server ]] || temporal_down
	[[ $mode == dev ]] || cluster_down
	postgres_down
	;;
status)
	rc=0
	case $mode in
	server) cluster_status || rc=1 ;;
	dev) temporal_status || rc=1 ;;
	*)
		temporal_status || rc=1
		# The real server is reported when this script started it; it does not count otherwise.
		if our_cluster_pid >/dev/null; then cluster_status || true; fi
		;;
	esac
	postgres_status || rc=1
	exit $rc
	;;
*) usage ;;
esac
