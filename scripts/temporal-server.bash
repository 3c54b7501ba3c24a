# temporal-server.bash: a real Temporal server (Temporal's own server binary, PostgreSQL persistence
# and visibility) for scripts/dev-services.sh. Sourced, not run: it uses dev-services.sh's say, die,
# is_uint, tcp_open, ensure_temporal_cli, parse_database_url, DATA_DIR, SEARCH_ATTRIBUTES and
# DYNAMIC_CONFIG.
#
# `dev-services.sh up server`:
#   1. installs go.temporal.io/server/cmd/server and cmd/tools/sql at TEMPORAL_SERVER_VERSION into
#      TEMPORAL_SERVER_BIN_DIR when missing (go install with TEMPORAL_SERVER_TOOLCHAIN: the server needs
#      a newer Go than the project; the project's go.mod is not touched). Cold: several minutes.
#   2. creates the databases and applies the schemas with Temporal's SQL tool (the schemas embedded in
#      the tool, i.e. the module's schema/postgresql/v12/{temporal,visibility}; only newer versions
#      are applied on later runs);
#   3. writes a config (development-postgres12 style) and a dynamic config under
#      $COMMITLAYER_DATA_DIR/temporal-server and starts the server in the background;
#   4. creates the namespace and registers CommitLayer's search attributes.
#
# Environment (all optional):
#   TEMPORAL_SERVER_VERSION     v1.32.2
#   TEMPORAL_SERVER_TOOLCHAIN   go1.27.3       GOTOOLCHAIN for the install (server needs Go >= 1.26.10)
#   TEMPORAL_SERVER_BIN_DIR     $(go env GOPATH)/bin/temporal-server-$TEMPORAL_SERVER_VERSION
#   TEMPORAL_CLUSTER_PORT       7243           frontend gRPC; history +1, matching +2, worker +6,
#                                              membership -300 (+0/+1/+2/+6), frontend HTTP +10
#   TEMPORAL_CLUSTER_METRICS_PORT 8243         Prometheus metrics (127.0.0.1)
#   TEMPORAL_CLUSTER_DB         temporal       persistence database (on DATABASE_URL's server)
#   TEMPORAL_CLUSTER_VIS_DB     temporal_visibility
#   TEMPORAL_CLUSTER_SHARDS     4              history shards: fixed once the database is set up
#   TEMPORAL_CLUSTER_NAMESPACE  default
#   TEMPORAL_CLUSTER_RETENTION  72h            retention of a namespace created here

TEMPORAL_SERVER_VERSION=${TEMPORAL_SERVER_VERSION:-v1.32.2}
TEMPORAL_SERVER_TOOLCHAIN=${TEMPORAL_SERVER_TOOLCHAIN:-go1.27.3}
TEMPORAL_CLUSTER_PORT=${TEMPORAL_CLUSTER_PORT:-7243}
TEMPORAL_CLUSTER_METRICS_PORT=${TEMPORAL_CLUSTER_METRICS_PORT:-8243}
TEMPORAL_CLUSTER_DB=${TEMPORAL_CLUSTER_DB:-temporal}
TEMPORAL_CLUSTER_VIS_DB=${TEMPORAL_CLUSTER_VIS_DB:-temporal_visibility}
TEMPORAL_CLUSTER_SHARDS=${TEMPORAL_CLUSTER_SHARDS:-4}
TEMPORAL_CLUSTER_NAMESPACE=${TEMPORAL_CLUSTER_NAMESPACE:-default}
TEMPORAL_CLUSTER_RETENTION=${TEMPORAL_CLUSTER_RETENTION:-72h}

is_uint "$TEMPORAL_CLUSTER_PORT" && ((TEMPORAL_CLUSTER_PORT > 300 && TEMPORAL_CLUSTER_PORT < 65525)) ||
	die "TEMPORAL_CLUSTER_PORT must be a port number between 301 and 65524, got '$TEMPORAL_CLUSTER_PORT'"
is_uint "$TEMPORAL_CLUSTER_METRICS_PORT" || die "TEMPORAL_CLUSTER_METRICS_PORT must be a port number"
is_uint "$TEMPORAL_CLUSTER_SHARDS" && ((TEMPORAL_CLUSTER_SHARDS > 0)) ||
	die "TEMPORAL_CLUSTER_SHARDS must be a positive number"
for _name in "$TEMPORAL_CLUSTER_DB" "$TEMPORAL_CLUSTER_VIS_DB" "$TEMPORAL_CLUSTER_NAMESPACE"; do
	[[ $_name =~ ^[A-Za-z_][A-Za-z0-9_-]*$ ]] || die "'$_name': database and namespace names take letters, digits, '_' and '-'"
done
[[ $TEMPORAL_CLUSTER_RETENTION =~ ^[0-9]+[hmsd]$ ]] || die "TEMPORAL_CLUSTER_RETENTION: a duration like 72h"

CLUSTER_DIR=$DATA_DIR/temporal-server
CLUSTER_CONFIG=$CLUSTER_DIR/config.yaml
CLUSTER_DYNCONFIG=$CLUSTER_DIR/dynamicconfig.yaml
CLUSTER_LOG=$CLUSTER_DIR/temporal-server.log
CLUSTER_PID=$CLUSTER_DIR/temporal-server.pid
CLUSTER_SCHEMA_LOG=$CLUSTER_DIR/schema.log
CLUSTER_ADDR=127.0.0.1:$TEMPORAL_CLUSTER_PORT

# The ports the server listens on (frontend first).
cluster_ports() {
	local p=$TEMPORAL_CLUSTER_PORT
	echo "$p $((p + 1)) $((p + 2)) $((p + 6)) $((p - 300)) $((p - 299)) $((p - 298)) $((p - 294)) $((p + 10)) $TEMPORAL_CLUSTER_METRICS_PORT"
}

cluster_bin_dir() {
	if [[ -n ${TEMPORAL_SERVER_BIN_DIR:-} ]]; then
		echo "$TEMPORAL_SERVER_BIN_DIR"
		return
	fi
	local gopath
	gopath=$(go env GOPATH 2>/dev/null || true)
	[[ -n $gopath ]] || gopath=$HOME/go
	echo "$gopath/bin/temporal-server-$TEMPORAL_SERVER_VERSION"
}

# ensure_cluster_binaries sets CLUSTER_SERVER and CLUSTER_SQL_TOOL, installing them when missing.
ensure_cluster_binaries() {
	local dir
	dir=$(cluster_bin_dir)
	CLUSTER_SERVER=$dir/server
	CLUSTER_SQL_TOOL=$dir/sql
	if [[ -x $CLUSTER_SERVER && -x $CLUSTER_SQL_TOOL ]]; then
		return
	fi
	command -v go >/dev/null 2>&1 || die "the Temporal server is not installed in $dir and go is missing to install it"
	say "temporal-server: installing go.temporal.io/server $TEMPORAL_SERVER_VERSION (server, sql tool) into $dir"
	say "temporal-server: with GOTOOLCHAIN=$TEMPORAL_SERVER_TOOLCHAIN; a cold build takes 5-15 minutes"
	mkdir -p "$dir"
	local started=$SECONDS
	# Outside the repository, so the project's go.mod and toolchain line play no part.
	(cd / && GOTOOLCHAIN=$TEMPORAL_SERVER_TOOLCHAIN GOBIN=$dir GOFLAGS=-buildvcs=false \
		go install "go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION" \
		"go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION") ||
		die "go install go.temporal.io/server@$TEMPORAL_SERVER_VERSION failed (GOTOOLCHAIN=$TEMPORAL_SERVER_TOOLCHAIN)"
	[[ -x $CLUSTER_SERVER && -x $CLUSTER_SQL_TOOL ]] || die "go install succeeded but $dir lacks server or sql"
	say "temporal-server: installed in $((SECONDS - started))s"
}

# cluster_pg splits DATABASE_URL's authority into PG_USER, PG_PASSWORD, PG_HOST, PG_PORT: Temporal's
# databases live on the same PostgreSQL server as CommitLayer's.
cluster_pg() {
	parse_database_url
	local rest=${DATABASE_URL#*://}
	local authority=${rest%%/*} userinfo=
	if [[ $authority == *@* ]]; then
		userinfo=${authority%@*}
		authority=${authority##*@}
	fi
	PG_USER=${userinfo%%:*}
	PG_PASSWORD=
	[[ $userinfo == *:* ]] && PG_PASSWORD=${userinfo#*:}
	[[ -n $PG_USER ]] || PG_USER=postgres
	if [[ $authority == \[* ]]; then # [v6]:port
		PG_HOST=${authority%%]*}
		PG_HOST=${PG_HOST#[}
		PG_PORT=${authority#*]}
		PG_PORT=${PG_PORT#:}
	elif [[ $authority == *:* ]]; then
		PG_HOST=${authority%:*}
		PG_PORT=${authority##*:}
	else
		PG_HOST=$authority
		PG_PORT=
	fi
	[[ -n $PG_PORT ]] || PG_PORT=5432
	[[ -n $PG_HOST ]] || PG_HOST=127.0.0.1
	is_uint "$PG_PORT" || die "DATABASE_URL: port '$PG_PORT' is not a number"
	[[ $PG_PASSWORD != *%* ]] || die "DATABASE_URL: a percent-encoded password is not supported for the Temporal server; use one without %"
}

# sql_tool runs Temporal's SQL tool; its (verbose) output goes to CLUSTER_SCHEMA_LOG, and its end to
# standard error when it fails.
sql_tool() {
	mkdir -p "$CLUSTER_DIR"
	printf '\n=== %s sql %s\n' "$(date -u +%FT%TZ)" "$*" >>"$CLUSTER_SCHEMA_LOG"
	if ! SQL_PASSWORD=$PG_PASSWORD "$CLUSTER_SQL_TOOL" --plugin postgres12 \
		--endpoint "$PG_HOST" --port "$PG_PORT" --user "$PG_USER" "$@" >>"$CLUSTER_SCHEMA_LOG" 2>&1; then
		echo "--- last lines of $CLUSTER_SCHEMA_LOG ---" >&2
		tail -n 5 "$CLUSTER_SCHEMA_LOG" >&2 || true
		return 1
	fi
}

# pg_query DB SQL: one value from a database on the same server (psql reads the URL's password).
pg_query() {
	local url=${ADMIN_URL%%\?*} query=
	[[ $ADMIN_URL == *\?* ]] && query="?${ADMIN_URL#*\?}"
	psql "${url%/*}/$1$query" -XAtq -v ON_ERROR_STOP=1 -c "$2"
}

db_exists_named() {
	[[ $(psql "$ADMIN_URL" -XAtq -v ON_ERROR_STOP=1 -v name="$1" <<<"SELECT 1 FROM pg_database WHERE datname = :'name'") == 1 ]]
}

# cluster_schema DB SCHEMA: the database exists and carries the newest version of the embedded schema.
cluster_schema() {
	local db=$1 schema=$2
	if ! db_exists_named "$db"; then
		say "temporal-server: creating database $db"
		sql_tool --database "$db" create-database || db_exists_named "$db" ||
			die "temporal-server: cannot create database $db"
	fi
	# setup-schema sets the version to 0.0: only on a database that has no version table yet.
	if [[ $(pg_query "$db" "SELECT to_regclass('public.schema_version') IS NOT NULL") != t ]]; then
		say "temporal-server: setting up the schema version table in $db"
		sql_tool --database "$db" setup-schema -v 0.0 || die "temporal-server: setup-schema on $db failed"
	fi
	local before after
	before=$(pg_query "$db" "SELECT curr_version FROM schema_version LIMIT 1" 2>/dev/null || true)
	sql_tool --database "$db" update-schema --schema-name "$schema" ||
		die "temporal-server: update-schema $schema on $db failed"
	after=$(pg_query "$db" "SELECT curr_version FROM schema_version LIMIT 1")
	if [[ $before == "$after" ]]; then
		say "temporal-server: database $db at schema $schema $after"
	else
		say "temporal-server: database $db updated to schema $schema $after (was ${before:-none})"
	fi
}

# cluster_shards_check refuses a shard count that differs from the one the database was set up with.
cluster_shards_check() {
	local n
	n=$(pg_query "$TEMPORAL_CLUSTER_DB" "SELECT count(*) FROM shards" 2>/dev/null || echo 0)
	if is_uint "$n" && ((n > 0 && n != TEMPORAL_CLUSTER_SHARDS)); then
		die "temporal-server: database $TEMPORAL_CLUSTER_DB was set up with $n history shards, TEMPORAL_CLUSTER_SHARDS is $TEMPORAL_CLUSTER_SHARDS (a shard count is fixed for a database's life)"
	fi
}

yaml_str() { printf '"%s"' "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<<"$1")"; }

write_cluster_config() {
	local p=$TEMPORAL_CLUSTER_PORT
	mkdir -p "$CLUSTER_DIR"
	local tmp=$CLUSTER_CONFIG.tmp
	(
		umask 077 # the file may hold the database password
		cat >"$tmp" <<EOF
# Generated by scripts/dev-services.sh (up server); rewritten at each start. Edit the script instead.
log:
  stdout: true
  level: warn
  format: json

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: $TEMPORAL_CLUSTER_SHARDS
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: $(yaml_str "$TEMPORAL_CLUSTER_DB")
        connectAddr: $(yaml_str "$PG_HOST:$PG_PORT")
        connectProtocol: tcp
        user: $(yaml_str "$PG_USER")
        password: $(yaml_str "$PG_PASSWORD")
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: $(yaml_str "$TEMPORAL_CLUSTER_VIS_DB")
        connectAddr: $(yaml_str "$PG_HOST:$PG_PORT")
        connectProtocol: tcp
        user: $(yaml_str "$PG_USER")
        password: $(yaml_str "$PG_PASSWORD")
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: 127.0.0.1:$TEMPORAL_CLUSTER_METRICS_PORT

services:
  frontend:
    rpc:
      grpcPort: $p
      membershipPort: $((p - 300))
      bindOnLocalHost: true
      httpPort: $((p + 10))
  history:
    rpc:
      grpcPort: $((p + 1))
      membershipPort: $((p - 299))
      bindOnLocalHost: true
  matching:
    rpc:
      grpcPort: $((p + 2))
      membershipPort: $((p - 298))
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: $((p + 6))
      membershipPort: $((p - 294))
      bindOnLocalHost: true

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: 127.0.0.1:$p
      httpAddress: 127.0.0.1:$((p + 10))

dcRedirectionPolicy:
  policy: noop

dynamicConfigClient:
  filepath: $(yaml_str "$CLUSTER_DYNCONFIG")
  pollInterval: 10s
EOF
	)
	mv "$tmp" "$CLUSTER_CONFIG"

	# The dev server's tuning (DYNAMIC_CONFIG in dev-services.sh) in the file format, and the
	# search attribute cache read through so a freshly registered attribute is usable at once.
	{
		echo "# Generated by scripts/dev-services.sh (up server) from its DYNAMIC_CONFIG."
		local kv key val
		for kv in "${DYNAMIC_CONFIG[@]}"; do
			key=${kv%%=*}
			val=${kv#*=}
			printf '%s:\n  - value: %s\n' "$key" "$val"
		done
		printf 'system.forceSearchAttributesCacheRefreshOnRead:\n  - value: true\n'
		printf 'limit.maxIDLength:\n  - value: 255\n'
	} >"$CLUSTER_DYNCONFIG.tmp"
	mv "$CLUSTER_DYNCONFIG.tmp" "$CLUSTER_DYNCONFIG"
}

cluster_cli() {
	"$TEMPORAL" "$@" --address "$CLUSTER_ADDR" --disable-config-env --disable-config-file
}

cluster_serving() {
	[[ -n ${TEMPORAL:-} ]] || return 1
	cluster_cli operator cluster health --command-timeout 3s >/dev/null 2>&1
}

our_cluster_pid() {
	[[ -f $CLUSTER_PID ]] || return 1
	local pid
	pid=$(<"$CLUSTER_PID")
	is_uint "$pid" || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	if [[ -r /proc/$pid/cmdline ]]; then
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$CLUSTER_CONFIG" || return 1
	fi
	echo "$pid"
}

# cluster_namespace: the namespace exists and has every search attribute, registering what is
# missing (the frontend may need a moment after a start or a namespace creation).
cluster_namespace() {
	local ns=$TEMPORAL_CLUSTER_NAMESPACE deadline=$((SECONDS + TEMPORAL_START_TIMEOUT)) out
	until cluster_cli operator namespace describe --namespace "$ns" --command-timeout 5s >/dev/null 2>&1; do
		if out=$(cluster_cli operator namespace create --namespace "$ns" --retention "$TEMPORAL_CLUSTER_RETENTION" \
			--command-timeout 10s 2>&1); then
			say "temporal-server: created namespace $ns (retention $TEMPORAL_CLUSTER_RETENTION)"
		elif ((SECONDS >= deadline)); then
			die "temporal-server: cannot create namespace $ns: $out"
		fi
		sleep 1
	done
	local kv name type missing=() have
	while :; do
		have=$(cluster_cli operator search-attribute list --namespace "$ns" --command-timeout 5s 2>/dev/null) || have=
		missing=()
		for kv in "${SEARCH_ATTRIBUTES[@]}"; do
			name=${kv%%=*}
			grep -qw -- "$name" <<<"$have" || missing+=("$kv")
		done
		((${#missing[@]} > 0)) || break
		local args=()
		for kv in "${missing[@]}"; do
			name=${kv%%=*}
			type=${kv#*=}
			args+=(--name "$name" --type "$type")
		done
		if out=$(cluster_cli operator search-attribute create --namespace "$ns" "${args[@]}" --command-timeout 10s 2>&1); then
			say "temporal-server: registered ${#missing[@]} search attributes in $ns"
		elif ((SECONDS >= deadline)); then
			die "temporal-server: cannot register search attributes in $ns: $out"
		else
			sleep 1
		fi
	done
	say "temporal-server: namespace $ns has CommitLayer's ${#SEARCH_ATTRIBUTES[@]} search attributes"
}

cluster_up() {
	local pid
	ensure_temporal_cli
	if cluster_serving; then
		if pid=$(our_cluster_pid); then
			say "temporal-server: already running (pid $pid) at $CLUSTER_ADDR"
		else
			say "temporal-server: a server already answers at $CLUSTER_ADDR (not started by this script; left alone)"
		fi
		cluster_namespace
		return
	fi
	ensure_cluster_binaries
	if ! pid=$(our_cluster_pid); then
		rm -f "$CLUSTER_PID"
		local port
		for port in $(cluster_ports); do
			if tcp_open 127.0.0.1 "$port"; then
				die "port $port (of the Temporal server at TEMPORAL_CLUSTER_PORT=$TEMPORAL_CLUSTER_PORT) is taken; free it or set TEMPORAL_CLUSTER_PORT"
			fi
		done
		cluster_pg
		cluster_schema "$TEMPORAL_CLUSTER_DB" postgresql/v12/temporal
		cluster_schema "$TEMPORAL_CLUSTER_VIS_DB" postgresql/v12/visibility
		cluster_shards_check
		write_cluster_config
		say "temporal-server: starting $TEMPORAL_SERVER_VERSION at $CLUSTER_ADDR (log $CLUSTER_LOG)"
		printf '\n=== %s dev-services up server: %s --config-file %s\n' "$(date -u +%FT%TZ)" "$CLUSTER_SERVER" "$CLUSTER_CONFIG" >>"$CLUSTER_LOG"
		local detach=(nohup)
		command -v setsid >/dev/null 2>&1 && detach=(setsid)
		"${detach[@]}" bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$CLUSTER_PID" \
			"$CLUSTER_SERVER" --config-file "$CLUSTER_CONFIG" --allow-no-auth start \
			</dev/null >>"$CLUSTER_LOG" 2>&1 &
		local waited=0
		while [[ ! -s $CLUSTER_PID ]] && ((waited < 50)); do
			sleep 0.1
			waited=$((waited + 1))
		done
		pid=$(<"$CLUSTER_PID") || die "temporal-server: the server did not record its pid"
	else
		say "temporal-server: server (pid $pid) is starting; waiting"
	fi
	local started=$SECONDS deadline=$((SECONDS + TEMPORAL_START_TIMEOUT))
	until cluster_serving; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$CLUSTER_PID"
			echo "--- last lines of $CLUSTER_LOG ---" >&2
			tail -n 20 "$CLUSTER_LOG" >&2 || true
			die "temporal-server: the server exited before it answered"
		fi
		if ((SECONDS >= deadline)); then
			echo "--- last lines of $CLUSTER_LOG ---" >&2
			tail -n 20 "$CLUSTER_LOG" >&2 || true
			die "temporal-server: no answer at $CLUSTER_ADDR after ${TEMPORAL_START_TIMEOUT}s (pid $pid still running; 'down server' stops it)"
		fi
		sleep 0.5
	done
	say "temporal-server: serving at $CLUSTER_ADDR (pid $pid) after $((SECONDS - started))s; metrics http://127.0.0.1:$TEMPORAL_CLUSTER_METRICS_PORT/metrics"
	cluster_namespace
}

cluster_down() {
	local pid
	if ! pid=$(our_cluster_pid); then
		rm -f "$CLUSTER_PID"
		say "temporal-server: nothing started by this script is running"
		return
	fi
	say "temporal-server: stopping the server (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	local i
	for ((i = 0; i < 300; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "temporal-server: still running after 30s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$CLUSTER_PID"
}

cluster_status() {
	TEMPORAL=$(temporal_bin)
	if [[ -z $TEMPORAL ]]; then
		say "temporal-server: the Temporal CLI is not installed ('up' installs $TEMPORAL_CLI_VERSION)"
		return 1
	fi
	local pid=
	pid=$(our_cluster_pid) || pid=
	if cluster_serving; then
		local who="not started by this script"
		[[ -n $pid ]] && who="pid $pid, started by this script"
		local n=0 have kv
		have=$(cluster_cli operator search-attribute list --namespace "$TEMPORAL_CLUSTER_NAMESPACE" --command-timeout 5s 2>/dev/null) || have=
		for kv in "${SEARCH_ATTRIBUTES[@]}"; do
			grep -qw -- "${kv%%=*}" <<<"$have" && n=$((n + 1))
		done
		say "temporal-server: serving at $CLUSTER_ADDR ($who); namespace $TEMPORAL_CLUSTER_NAMESPACE has $n/${#SEARCH_ATTRIBUTES[@]} search attributes"
		((n == ${#SEARCH_ATTRIBUTES[@]}))
		return
	fi
	if [[ -n $pid ]]; then
		say "temporal-server: process $pid is running but not answering at $CLUSTER_ADDR yet"
	else
		say "temporal-server: nothing answers at $CLUSTER_ADDR"
	fi
	return 1
}
