#!/usr/bin/env bash
# Throwaway PostgreSQL + Redis for the "production" test tier.
#
#   .ci/services.sh start      start both (idempotent: reuses running ones)
#   .ci/services.sh stop       stop both
#   .ci/services.sh destroy    stop both and delete the data directory
#   .ci/services.sh status     exit 0 when both answer
#   .ci/services.sh available  exit 0 when the binaries are installed
#   .ci/services.sh env        print the exports the test suite reads:
#                                eval "$(.ci/services.sh env)"
#   .ci/services.sh run CMD    start both, run CMD with those exports (on a
#                              database of its own if another `run` is going)
#
# Everything lives under $EID_SERVICES_DIR (default /tmp/django-eid-services)
# on non-default ports, so it never touches a system cluster or Redis.
set -euo pipefail

BASE=${EID_SERVICES_DIR:-/tmp/django-eid-services}
PG_PORT=${EID_PG_PORT:-5439}
REDIS_PORT=${EID_REDIS_PORT:-6390}
DB_NAME=eid
DB_USER=eid
DB_PASSWORD=eid

PGDATA="$BASE/pg/data"
PGLOG="$BASE/pg/postgres.log"
PGSOCK="$BASE/pg"            # unix socket dir: must be writable by the server user
REDIS_DIR="$BASE/redis"

log() { echo "services: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- locating binaries --------------------------------------------------------

# Debian keeps the server binaries (initdb, pg_ctl) out of PATH, one dir per
# major version; take the newest.  EID_PG_BINDIR overrides.
pg_bindir() {
    if [[ -n ${EID_PG_BINDIR:-} ]]; then
        [[ -x $EID_PG_BINDIR/initdb ]] && echo "$EID_PG_BINDIR"
        return
    fi
    local dir
    dir=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n1)
    if [[ -n $dir && -x $dir/initdb ]]; then echo "$dir"; return; fi
    if command -v pg_config >/dev/null; then
        dir=$(pg_config --bindir 2>/dev/null || true)
        if [[ -n $dir && -x $dir/initdb ]]; then echo "$dir"; return; fi
    fi
    if command -v initdb >/dev/null; then dirname "$(command -v initdb)"; return; fi
    return 1
}

have_binaries() {
    local missing=()
    pg_bindir >/dev/null || missing+=("PostgreSQL server (initdb/pg_ctl)")
    command -v redis-server >/dev/null || missing+=("redis-server")
    command -v redis-cli >/dev/null || missing+=("redis-cli")
    if ((${#missing[@]})); then
        log "not installed: ${missing[*]}"
        return 1
    fi
}

# --- PostgreSQL ---------------------------------------------------------------

# initdb refuses to run as root, so as root the cluster belongs to the
# "postgres" user; an ordinary developer simply owns it.
if [[ $(id -u) -eq 0 ]]; then
    PG_OWNER=postgres
    as_pg_owner() { (cd / && runuser -u "$PG_OWNER" -- "$@"); }
else
    PG_OWNER=$(id -un)
    as_pg_owner() { (cd / && "$@"); }
fi

pg_running() {
    [[ -f $PGDATA/PG_VERSION ]] && as_pg_owner "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1
}

# Runs SQL as the cluster superuser over loopback TCP (trust auth, no sudo needed).
pg_sql() {
    "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tA "$@"
}

pg_init() {
    local version
    version=$("$PGBIN/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)?.*/\1/')
    # A half-made or other-major-version cluster is useless: start over.
    if [[ -d $PGDATA && $(cat "$PGDATA/PG_VERSION" 2>/dev/null || true) != "$version" ]]; then
        log "discarding unusable cluster in $PGDATA"
        rm -rf "$PGDATA"
    fi
    [[ -d $PGDATA ]] && return 0

    log "creating PostgreSQL $version cluster in $PGDATA"
    mkdir -p "$BASE/pg"
    chown "$PG_OWNER" "$BASE/pg"
    chmod 700 "$BASE/pg"
    # trust auth: a throwaway cluster that only listens on loopback.
    as_pg_owner "$PGBIN/initdb" -D "$PGDATA" -U postgres -A trust -E UTF8 --no-locale \
        >"$BASE/pg/initdb.log" 2>&1 || { cat "$BASE/pg/initdb.log" >&2; die "initdb failed"; }
    # Durability is worthless for test data; speed is not.
    cat >>"$PGDATA/postgresql.conf" <<EOF

# --- django-eid test cluster (.ci/services.sh) ---
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PGSOCK'
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
}

pg_start() {
    PGBIN=$(pg_bindir) || die "PostgreSQL server binaries not found (apt-get install postgresql)"
    if pg_running; then
        log "PostgreSQL already running on 127.0.0.1:$PG_PORT"
    else
        pg_init
        log "starting PostgreSQL on 127.0.0.1:$PG_PORT (log: $PGLOG)"
        # 9>&-: the daemon must not inherit (and so hold) our lock.
        as_pg_owner "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGLOG" -w -t 60 start >/dev/null 9>&- ||
            { tail -n 20 "$PGLOG" >&2 || true; die "PostgreSQL did not start (port $PG_PORT taken?)"; }
    fi
    # CREATEDB: pytest-django creates and drops its own test_<name> database.
    pg_sql <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_USER') THEN
    CREATE ROLE $DB_USER LOGIN CREATEDB PASSWORD '$DB_PASSWORD';
  END IF;
END \$\$;
SQL
    if [[ -z $(pg_sql -c "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'") ]]; then
        pg_sql -c "CREATE DATABASE $DB_NAME OWNER $DB_USER"
    fi
}

pg_stop() {
    PGBIN=$(pg_bindir) || return 0
    if pg_running; then
        log "stopping PostgreSQL"
        as_pg_owner "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
    fi
}

# --- Redis --------------------------------------------------------------------

redis_running() {
    [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]
}

# A database per pytest-xdist worker of each slot (tests/parallel.py, REDIS_DATABASES).
REDIS_DATABASES=144

redis_databases() {
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" config get databases 2>/dev/null | tail -n1
}

redis_start() {
    command -v redis-server >/dev/null || die "redis-server not found (apt-get install redis-server)"
    if redis_running; then
        if (($(redis_databases || echo 0) >= REDIS_DATABASES)); then
            log "Redis already running on 127.0.0.1:$REDIS_PORT"
            return 0
        fi
        # Started by an older version of this script: the throwaway Redis keeps nothing.
        log "Redis on 127.0.0.1:$REDIS_PORT has too few databases for parallel tests: restarting it"
        redis_stop
        for _ in $(seq 50); do redis_running || break; sleep 0.1; done
    fi
    mkdir -p "$REDIS_DIR"
    log "starting Redis on 127.0.0.1:$REDIS_PORT (log: $REDIS_DIR/redis.log)"
    # No RDB snapshots, no AOF: nothing is ever written to disk.
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --databases "$REDIS_DATABASES" \
        --save "" --appendonly no --dir "$REDIS_DIR" \
        --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log" 9>&-
    for _ in $(seq 50); do
        redis_running && return 0
        sleep 0.2
    done
    tail -n 20 "$REDIS_DIR/redis.log" >&2 || true
    die "Redis did not start (port $REDIS_PORT taken?)"
}

redis_stop() {
    if redis_running; then
        log "stopping Redis"
        redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    fi
}

# --- commands -------------------------------------------------------------------

print_env() {  # print_env [SLOT]
    local slot=${1:-0} db=$DB_NAME
    ((slot == 0)) || db="${DB_NAME}_$slot"
    echo "export DATABASE_URL=postgres://$DB_USER:$DB_PASSWORD@127.0.0.1:$PG_PORT/$db"
    echo "export EID_TEST_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/$slot"
}

# `run CMD...`: start the services, then run CMD with the env of a slot no
# other `run` holds. Two test runs at once (a shared box) would otherwise
# share the test database (pytest-django drops test_eid under the other run)
# and the Redis keys. Slot 0 is the plain `env` above; slot N uses database
# eid_N (so test_eid_N) and Redis database N. The slot's lock is an open file
# descriptor inherited by CMD, released when CMD and its children exit.
run_in_slot() {
    "$0" start
    local slot
    for slot in $(seq 0 15); do
        exec 8>"$BASE/slot.$slot"
        if flock -n 8; then
            eval "$(print_env "$slot")"
            if ((slot > 0)); then
                log "slot 0 is busy (another run); using database ${DB_NAME}_$slot and Redis db $slot"
                PGBIN=$(pg_bindir)
                if [[ -z $(pg_sql -c "SELECT 1 FROM pg_database WHERE datname = '${DB_NAME}_$slot'") ]]; then
                    pg_sql -c "CREATE DATABASE ${DB_NAME}_$slot OWNER $DB_USER"
                fi
            fi
            exec "$@"
        fi
        exec 8>&-
    done
    die "all 16 slots are busy"
}

with_lock() {
    # Serialise concurrent start/stop (two `make test` runs at once).
    mkdir -p "$BASE"
    chmod 755 "$BASE"
    exec 9>"$BASE/.lock"
    flock -w 120 9 || die "could not lock $BASE/.lock"
    "$@"
}

case ${1:-} in
    start)
        # Fast path without the lock: both already up (the usual second run).
        if PGBIN=$(pg_bindir) && pg_running && redis_running &&
            (($(redis_databases || echo 0) >= REDIS_DATABASES)); then
            log "PostgreSQL (127.0.0.1:$PG_PORT) and Redis (127.0.0.1:$REDIS_PORT) already running"
            exit 0
        fi
        with_lock eval 'pg_start; redis_start' ;;
    stop)      with_lock eval 'pg_stop; redis_stop' ;;
    destroy)   with_lock eval 'pg_stop; redis_stop'; rm -rf "$BASE"; log "removed $BASE" ;;
    status)    PGBIN=$(pg_bindir) && pg_running && redis_running ;;
    available) have_binaries ;;
    env)       print_env ;;
    run)       shift; (($#)) || die "usage: $0 run COMMAND..."; run_in_slot "$@" ;;
    *)         echo "usage: $0 start|stop|destroy|status|available|env|run CMD..." >&2; exit 2 ;;
esac
