#!/usr/bin/env bash
# `make test`: every check, in order, continuing past failures so one run
# shows all of them; a summary at the end; non-zero exit if any step failed.
#
#   1. lint              ruff check, ruff format --check, mypy
#   2. pytest            whole suite on SQLite + local-memory cache
#   3. production tier   whole suite again on PostgreSQL + Redis (.ci/services.sh)
#   4. version matrix    tox: the suite on Django 5.2, 6.0 and 6.1 and Python 3.11,
#                        3.12 and 3.13 (tox.ini; CI, or MATRIX=yes)
#   5. docs              mkdocs build --strict (when mkdocs.yml exists)
#
# The production tier is mandatory when CI=true, EID_REQUIRE_PRODUCTION=1 or
# PRODUCTION=yes; with PRODUCTION=auto (default) it runs when PostgreSQL and
# Redis are installed here and is skipped, with a message, when they are not;
# PRODUCTION=no skips it. PostgreSQL and Redis that the tier started are stopped
# again at the end (KEEP_SERVICES=yes leaves them running for the next run);
# ones that were already running stay. The summary says which.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

MAKE=${MAKE:-make}
CHROMIUM=/usr/bin/chromium     # keep in step with tests/conftest.py
results=()
failed=0

step() {  # step NAME COMMAND...
    local name=$1
    shift
    echo
    echo "==> $name"
    if "$@"; then
        results+=("PASS     $name")
    else
        results+=("FAIL     $name")
        failed=1
    fi
}

skip() {  # skip NAME WHY
    echo
    echo "==> $1: $2"
    results+=("SKIPPED  $2")
}

# shellcheck disable=SC2317  # called through step
submake() { "$MAKE" --no-print-directory "$@"; }

production_mode() {
    if [[ ${CI:-} == true || ${EID_REQUIRE_PRODUCTION:-0} != 0 ]]; then
        echo required
    else
        case ${PRODUCTION:-auto} in
            yes | required) echo required ;;
            no | off) echo off ;;
            *) echo auto ;;
        esac
    fi
}

# Whether the throwaway services were up before this run: only what the run
# started is stopped at the end.
services_were_running=no
if .ci/services.sh status 2>/dev/null; then services_were_running=yes; fi
services_note=""

stop_started_services() {
    if [[ $services_were_running == yes ]]; then
        services_note="NOTE     PostgreSQL and Redis (.ci/services.sh) were already running before make test and are left running"
    elif ! .ci/services.sh status 2>/dev/null; then
        return 0  # the tier did not get them up: nothing to stop
    elif [[ ${KEEP_SERVICES:-no} == yes ]]; then
        services_note="NOTE     PostgreSQL and Redis started for the production tier are left running (KEEP_SERVICES=yes); 'make services-stop' stops them"
    elif .ci/services.sh stop; then
        services_note="NOTE     PostgreSQL and Redis started for the production tier were stopped again (KEEP_SERVICES=yes leaves them running)"
    else
        services_note="FAIL     stopping PostgreSQL and Redis started for the production tier; 'make services-stop' stops them"
        failed=1
    fi
}

step "lint" submake lint
step "pytest (SQLite)" submake test-sqlite

case $(production_mode) in
    required)
        step "production tier (PostgreSQL + Redis)" submake test-production ;;
    off)
        skip "production" "production tier skipped: PRODUCTION=no" ;;
    auto)
        if .ci/services.sh status 2>/dev/null; then
            step "production tier (PostgreSQL + Redis)" submake test-production
        elif ! .ci/services.sh available; then
            skip "production" "production tier skipped: PostgreSQL server and/or redis-server not installed (mandatory in CI; apt-get install postgresql redis-server to run it here)"
        elif ! .ci/services.sh start; then
            skip "production" "production tier skipped: PostgreSQL/Redis are installed but did not start (see the error above; mandatory in CI)"
        else
            step "production tier (PostgreSQL + Redis)" submake test-production
        fi ;;
esac
stop_started_services

# The supported Django and Python versions (tox.ini); mandatory in CI, on request elsewhere.
if [[ ${CI:-} == true || ${MATRIX:-no} == yes ]]; then
    step "version matrix (tox: $(sed -nE 's/^env_list *= *//p' tox.ini))" submake tox
else
    skip "matrix" "version matrix skipped: run it with 'make test MATRIX=yes' or 'make tox'"
fi

if [[ -f mkdocs.yml ]]; then
    step "docs (mkdocs build --strict)" submake docs
else
    skip "docs" "docs skipped: no mkdocs.yml yet"
fi

echo
echo "==================================== make test summary ===================================="
for line in "${results[@]}"; do echo "$line"; done
if [[ -n $services_note ]]; then echo "$services_note"; fi
if [[ ! -x $CHROMIUM ]]; then
    if [[ ${EID_REQUIRE_BROWSER:-0} != 0 ]]; then
        echo "FAIL     browser tests: Chromium not installed ($CHROMIUM) but EID_REQUIRE_BROWSER=1"
    else
        echo "SKIPPED  browser tests skipped: Chromium not installed ($CHROMIUM); apt-get install chromium to run them"
    fi
fi
if ((failed)); then
    echo "make test: FAILED"
else
    echo "make test: OK"
fi
exit "$failed"
