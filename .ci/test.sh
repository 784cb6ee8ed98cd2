#!/usr/bin/env bash
# `make test`: every check, in order, continuing past failures so one run
# shows all of them; a summary at the end; non-zero exit if any step failed.
#
#   1. lint              ruff check, ruff format --check, mypy
#   2. SQLite tier       the suite on SQLite + local-memory cache, the browser tests
#                        included (make test-sqlite); in CI the browser and packaging
#                        tests only (the production tier and tox run the others)
#   3. production tier   the suite on PostgreSQL + Redis (.ci/services.sh), the browser,
#                        packaging and own_process tests aside (make test-production)
#   4. version matrix    tox: the suite on Django 5.2, 6.0 and 6.1 and Python 3.11,
#                        3.12 and 3.13 (tox.ini; CI, or MATRIX=yes), but for the
#                        environment .venv is, which the tiers have just run
#   5. docs              mkdocs build --strict (when mkdocs.yml exists)
#
# The test tiers run in parallel (pytest-xdist, a worker per core) and in random order
# (pytest-randomly: a failure prints the seed that replays it). Each step's time is
# printed as it ends and again in the summary, with what passed, what was skipped and
# why, and the known limits (the xfails): tests/run_summary.py counts them.
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
SUMMARIES=build/test-summary   # one JSON file per pytest run (tests/run_summary.py)
PY=${PY:-.venv/bin/python}
results=()
failed=0
began=$SECONDS
rm -rf "$SUMMARIES"
mkdir -p "$SUMMARIES"

minutes() {  # minutes SECONDS -> "3 min 07 s" / "42 s"
    local s=$1
    if ((s >= 60)); then printf '%d min %02d s' $((s / 60)) $((s % 60)); else printf '%d s' "$s"; fi
}

# What the pytest runs of a step did, from their summaries: "1,234 passed, 7 skipped ...";
# says so when a run ended before writing one (a crash, an interrupted install).
counts() {  # counts GLOB
    "$PY" - "$SUMMARIES" "$1" <<'PY' 2>&1
import json, pathlib, sys
files = sorted(pathlib.Path(sys.argv[1]).glob(sys.argv[2]))
total = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "xfailed": 0, "xpassed": 0}
unread = []
for f in files:
    try:
        data = json.loads(f.read_text())
        for key in ("passed", "failed", "errors", "xpassed"):
            total[key] += data[key]
        total["skipped"] += sum(data["skipped"].values())
        total["xfailed"] += sum(data["xfailed"].values())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        unread.append(f.name)
words = [f"{n:,} {key}" for key, n in total.items() if n or key == "passed"]
if not files:
    words = ["no summary: pytest ended before writing it"]
elif unread:
    words.append(f"unreadable summary: {', '.join(unread)}")
print(", ".join(words))
PY
}

step() {  # step NAME SUMMARY_GLOB COMMAND...
    local name=$1 glob=$2 start=$SECONDS verdict detail took
    shift 2
    echo
    echo "==> $name"
    if "$@"; then verdict=PASS; else verdict=FAIL; failed=1; fi
    took=$((SECONDS - start))
    detail=""
    if [[ -n $glob ]]; then detail=$(counts "$glob"); fi
    echo "==> $name: $verdict in $(minutes "$took")${detail:+ ($detail)}"
    results+=("$(printf '%-8s %-44s %10s  %s' "$verdict" "$name" "$(minutes "$took")" "$detail")")
}

skip() {  # skip NAME WHY
    echo
    echo "==> $1: $2"
    results+=("$(printf '%-8s %s' SKIPPED "$2")")
}

# shellcheck disable=SC2317  # called through step
submake() { "$MAKE" --no-print-directory "$@"; }

# shellcheck disable=SC2317  # called through step
tier() {  # tier SUMMARY_NAME MAKE_TARGET: a pytest tier, its summary written
    local name=$1
    shift
    EID_TEST_SUMMARY="$PWD/$SUMMARIES/$name.json" submake "$@"
}

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

matrix=no
if [[ ${CI:-} == true || ${MATRIX:-no} == yes ]]; then matrix=yes; fi
cores=$(nproc 2>/dev/null || echo 2)
echo "make test: lint, the suite on SQLite with the browser tests, the suite on PostgreSQL +"
echo "Redis, the docs$([[ $matrix == yes ]] && echo ", and the version matrix (tox)")."
echo "On a 2-core machine it takes about 5 minutes$([[ $matrix == yes ]] && echo ", 9 to 16 with the matrix")"
echo "(this one has $cores); 'make test-fast' (about a minute) is the edit-test loop."

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

step "environment (.venv, test extras)" "" submake venv

# The matrix: tox's environments but the one .venv already is. The tiers run the whole suite on
# .venv's Python and Django (on CI's Debian 12, Python 3.11 and Django 5.2, the newest Django for
# 3.11), so tox runs the others only. Their installing, and a first collection that compiles the
# tests for their Pythons, run in the background from here on: the browser tests leave a core
# idle half the time.
prepare_matrix() {  # prepare_matrix ENV,ENV...
    local env
    submake tox TOX_ARGS="run-parallel -e $1 --parallel all --parallel-no-spinner --notest" || return 1
    for env in ${1//,/ }; do
        env -u DATABASE_URL -u EID_TEST_REDIS_URL ".tox/$env/bin/python" -m pytest --collect-only -q \
            -p no:randomly -p no:cacheprovider >/dev/null || return 1
    done
}
if [[ $matrix == yes ]]; then
    tiers_cell=$("$PY" -c 'import sys, django; print("py%d%d-django%d%d" % (*sys.version_info[:2], *django.VERSION[:2]))')
    matrix_envs=$(sed -nE 's/^env_list *= *//p' tox.ini | tr -d ' ' | tr ',' '\n' | grep -vxF "$tiers_cell" | paste -sd, -)
    prepare_matrix "$matrix_envs" >build/test-matrix-setup.log 2>&1 &
    matrix_prepared=$!
fi

step "lint" "" submake lint
# With the matrix and a mandatory production tier (CI), every test but the browser and
# packaging tests runs on .venv's Python and Django in the production tier, and on SQLite in
# each of tox's environments: the SQLite tier runs those two kinds only, and the production
# tier, now the only run on .venv's versions, draws every example of the property tests.
if [[ $matrix == yes && $(production_mode) == required ]]; then
    step "SQLite tier (browser and packaging tests; tox runs the rest on SQLite)" "sqlite.json" \
        tier sqlite test-sqlite SQLITE_TIER='-m "browser or packaging"'
    production_examples=all
else
    step "SQLite tier (browser tests included)" "sqlite.json" tier sqlite test-sqlite
    production_examples=fewer
fi

production="production tier (PostgreSQL + Redis)"
case $(production_mode) in
    required)
        step "$production" "production.json" tier production test-production EXAMPLES=$production_examples ;;
    off)
        skip "production" "production tier skipped: PRODUCTION=no" ;;
    auto)
        if .ci/services.sh status 2>/dev/null; then
            step "$production" "production.json" tier production test-production EXAMPLES=$production_examples
        elif ! .ci/services.sh available; then
            skip "production" "production tier skipped: PostgreSQL server and/or redis-server not installed (mandatory in CI; apt-get install postgresql redis-server to run it here)"
        elif ! .ci/services.sh start; then
            skip "production" "production tier skipped: PostgreSQL/Redis are installed but did not start (see the error above; mandatory in CI)"
        else
            step "$production" "production.json" tier production test-production EXAMPLES=$production_examples
        fi ;;
esac
stop_started_services

# The supported Django and Python versions (tox.ini); mandatory in CI, on request elsewhere.
# tox's environments were made beside the SQLite tier (prepare_matrix); they test side by side
# with the cores shared out (on 2 cores, each pytest in a single process).
# shellcheck disable=SC2317  # called through step
matrix_step() {  # matrix_step ENV,ENV...
    local workers=$((cores / $(tr ',' '\n' <<<"$1" | wc -l)))
    ((workers > 1)) || workers=0  # 0: pytest in the tox process itself, no xdist worker
    if ! wait "$matrix_prepared"; then
        echo "making tox's environments failed (build/test-matrix-setup.log):"
        tail -n 40 build/test-matrix-setup.log
    fi
    EID_TOX_WORKERS=$workers submake tox TOX_ARGS="run-parallel -e $1 --parallel all --parallel-no-spinner"
}
if [[ $matrix == yes ]]; then
    step "version matrix (tox: $matrix_envs; $tiers_cell: the tiers above)" "tox-*.json" matrix_step "$matrix_envs"
else
    skip "matrix" "version matrix skipped: run it with 'make test MATRIX=yes' or 'make tox'"
fi

if [[ -f mkdocs.yml ]]; then
    step "docs (mkdocs build --strict)" "" submake docs
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
        failed=1
    else
        echo "SKIPPED  browser tests skipped: Chromium not installed ($CHROMIUM); apt-get install chromium to run them"
    fi
fi
# The skips and the known limits of every pytest run, by reason.
"$PY" - "$SUMMARIES" <<'PY'
import json, pathlib, sys
runs = {}
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    try:
        runs[f.stem] = json.loads(f.read_text())
    except (OSError, ValueError):
        print(f"(unreadable: {f})")
for key, title in (("skipped", "Skipped tests, and why"), ("xfailed", "Known limits (xfail)")):
    rows = {}
    for run, data in runs.items():
        for reason, count in dict(data.get(key) or {}).items():
            rows.setdefault(reason, []).append(f"{count} in {run}")
    if rows:
        print(f"{title}:")
        for reason, where in rows.items():
            print(f"  {reason[:150]}  [{', '.join(where)}]")
PY
total=$((SECONDS - began))
if ((failed)); then
    echo "make test: FAILED after $(minutes "$total")"
else
    echo "make test: OK in $(minutes "$total")"
fi
exit "$failed"
