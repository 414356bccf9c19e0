# Temporal as production runs it (`up.sh --temporal postgres`): Debian's PostgreSQL, the release's schema applied by
# temporal-sql-tool, and Temporal's server (all four services in one process) on it. Sourced by up.sh, after lib.sh.
# shellcheck shell=bash

pg_data=$run/postgres
temporal_server_config=$run/temporal-server

# PostgreSQL refuses to run as root: as root, it runs as Debian's postgres user (its package makes it).
as_postgres=()
[ "$(id -u)" != 0 ] || as_postgres=(setpriv --reuid postgres --regid postgres --init-groups --)

# psql DATABASE SQL: one query's rows, unaligned. The cluster trusts connections from this machine (below).
pg_query() { "$(postgres_bin)/psql" -h "$host" -p "$postgres_port" -U temporal -d "$1" -Atq -c "$2"; }

# A cluster of its own in the run directory, on its own port, on 127.0.0.1 only, no Unix socket. Its superuser is
# `temporal`, trusted without a password: the local stack's database answers this machine only, and a password
# would be one more secret in a file.
start_postgres() {
  [ -x "$(postgres_bin)/postgres" ] || die "PostgreSQL is missing: run deploy/local/install.sh postgres"
  if [ ! -f "$pg_data/PG_VERSION" ]; then
    log "creating a PostgreSQL cluster in $pg_data"
    rm -rf "$pg_data" && mkdir -p "$pg_data"
    [ "$(id -u)" != 0 ] || chown postgres: "$pg_data"
    "${as_postgres[@]}" "$(postgres_bin)/initdb" -D "$pg_data" -U temporal --auth=trust -E UTF8 --locale=C.UTF-8 \
      >"$run/logs/postgres-initdb.log" 2>&1 || die "initdb failed (log: $run/logs/postgres-initdb.log)"
  fi
  start postgres postgres_healthy "${as_postgres[@]}" "$(postgres_bin)/postgres" -D "$pg_data" \
    -c listen_addresses="$host" -c port="$postgres_port" -c unix_socket_directories= -c max_connections=100
}

# The release's schemas, once per data directory and release: the stores' databases, their base schema, then every
# versioned update up to the release's (update-schema is idempotent).
apply_temporal_schema() {
  local stamp=$pg_data/.ferry-temporal-schema db dir
  [ "$(cat "$stamp" 2>/dev/null)" != "$TEMPORAL_SERVER_VERSION" ] || return 0
  for db in temporal temporal_visibility; do
    dir=$temporal_server_dir/schema/postgresql/v12/$([ $db = temporal ] && echo temporal || echo visibility)
    local tool=("$temporal_server_dir/temporal-sql-tool" --plugin postgres12 --ep "$host" -p "$postgres_port"
      -u temporal --db "$db")
    if [ -z "$(pg_query postgres "select 1 from pg_database where datname = '$db'")" ]; then
      log "creating Temporal's database $db"
      "${tool[@]}" create-database >>"$run/logs/temporal-schema.log" 2>&1 || die "creating $db failed"
    fi
    if [ -z "$(pg_query "$db" "select 1 from pg_tables where tablename = 'schema_version'")" ]; then
      "${tool[@]}" setup-schema -v 0.0 >>"$run/logs/temporal-schema.log" 2>&1 || die "setting up $db failed"
    fi
    "${tool[@]}" update-schema -d "$dir/versioned" >>"$run/logs/temporal-schema.log" 2>&1 ||
      die "updating $db's schema failed (log: $run/logs/temporal-schema.log)"
  done
  log "Temporal's schema $(pg_query temporal 'select curr_version from schema_version') applied"
  echo "$TEMPORAL_SERVER_VERSION" > "$stamp"
}

# sql_store_yaml NAME DATABASE CONNECTIONS: a datastore of the server's configuration.
sql_store_yaml() {
  cat <<YAML
    $1:
      sql:
        pluginName: postgres12
        databaseName: $2
        connectAddr: "$host:$postgres_port"
        connectProtocol: tcp
        user: temporal
        maxConns: $3
        maxIdleConns: $3
        maxConnLifetime: 1h
YAML
}

# service_yaml NAME GRPC-PORT MEMBERSHIP-PORT: one of the server's four services, on 127.0.0.1.
service_yaml() {
  printf '  %s:\n    rpc:\n      grpcPort: %s\n      membershipPort: %s\n      bindOnIP: %s\n' "$@" "$host"
}

# The server's configuration: the dev server's settings where they matter to a comparison (one frontend port, the same
# metrics and HTTP ports, the history cache and visibility rate it sets), Temporal's development PostgreSQL
# configuration for the rest (4 history shards; production runs more).
write_temporal_server_config() {
  mkdir -p "$temporal_server_config"
  local p=$temporal_port
  cat > "$temporal_server_config/dynamicconfig.yaml" <<YAML
history.hostLevelCacheMaxSize:
  - value: 8096
frontend.namespaceRPS.visibility:
  - value: 100
YAML
  cat > "$temporal_server_config/config.yaml" <<YAML
log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: 4
  datastores:
$(sql_store_yaml postgres-default temporal 20)
$(sql_store_yaml postgres-visibility temporal_visibility 10)
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "$host"
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: "$host:$temporal_metrics_port"
services:
$(service_yaml frontend "$p" $((p - 300)))
      httpPort: $temporal_http_port
$(service_yaml history $((p + 1)) $((p - 299)))
$(service_yaml matching $((p + 2)) $((p - 298)))
$(service_yaml worker $((p + 6)) $((p - 294)))
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
      rpcAddress: "$host:$p"
      httpAddress: "$host:$temporal_http_port"
dcRedirectionPolicy:
  policy: noop
archival:
  history:
    state: disabled
  visibility:
    state: disabled
namespaceDefaults:
  archival:
    history:
      state: disabled
    visibility:
      state: disabled
dynamicConfigClient:
  filepath: "$temporal_server_config/dynamicconfig.yaml"
  pollInterval: 60s
YAML
}

# Namespace `default` and Ferry's search attributes, as the dev server creates them at its start. A new namespace
# reaches the frontend's cache within its refresh (10 s): the list answers once it has.
register_namespace() {
  local t=("$temporal" --address "$host:$temporal_port") a
  if ! "${t[@]}" operator namespace describe --namespace default >/dev/null 2>&1; then
    "${t[@]}" operator namespace create --namespace default --retention 72h >/dev/null ||
      die "creating Temporal's namespace default failed"
  fi
  wait_for "namespace default" 60 "${t[@]}" workflow list --namespace default --limit 1 ||
    die "namespace default did not answer within 60 s"
  local have
  have=$("${t[@]}" operator search-attribute list --namespace default 2>/dev/null || true)
  for a in "${search_attributes[@]}"; do
    grep -qw "${a%%=*}" <<<"$have" && continue
    "${t[@]}" operator search-attribute create --namespace default --name "${a%%=*}" --type "${a#*=}" >/dev/null ||
      die "creating the search attribute ${a%%=*} failed"
  done
}

start_temporal_server() {
  [ -x "$temporal_server_dir/temporal-server" ] ||
    die "Temporal's server is missing: run deploy/local/install.sh postgres"
  postgres_healthy || die "PostgreSQL is not running: up.sh --temporal postgres starts it first"
  apply_temporal_schema
  write_temporal_server_config
  start temporal temporal_healthy "$temporal_server_dir/temporal-server" \
    --config-file "$temporal_server_config/config.yaml" --allow-no-auth start
  register_namespace
}
