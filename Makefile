# Developer and CI entry points. `make test` is what CI runs (.ci/run).
#
#   make venv              .venv with django-eid editable + its test, browser, dev and docs extras
#   make lint              ruff check, ruff format --check, mypy (strict)
#   make test              lint + pytest + production tier + docs (see .ci/test.sh)
#   make test-fast         the edit-test loop: SQLite, no browser, in parallel (about 1 min)
#   make test-sqlite       the suite on SQLite, the browser tests included
#   make test-production   the suite on PostgreSQL + Redis (starts .ci/services.sh)
#   make coverage          branch coverage of django_eid/ over both (htmlcov/)
#   make docs              mkdocs build --strict
#   make tox               the matrix of tox.ini: Django 5.2 / 6.0 / 6.1 on Python
#                          3.11 / 3.12 / 3.13 (SQLite; .ci/pythons.sh finds them)
#   make screenshots       refresh the documentation's pictures in docs/img/ (Chromium)
#   make messages          refresh and compile the translation catalogs (needs GNU gettext)
#   make demo              example project on http://127.0.0.1:8000/ (DEMO_PORT=8001: another port)
#   make bench             benchmarks
#   make bench-million     the million-identification benchmark (long)
#   make services-start / services-stop
#   make clean / distclean
#
# Knobs: PYTHON=python3.12, PYTEST_ARGS='-x -k flow', XDIST=auto|0|N (pytest-xdist's
# workers: one per core, at most 8; 0 runs in one process), PRODUCTION=auto|yes|no,
# KEEP_SERVICES=yes (make test leaves the PostgreSQL/Redis it started running),
# MATRIX=yes (make test runs tox's matrix too, as CI does).

PYTHON ?= python3
# Some machines (CI's image among them) set PYTHONDONTWRITEBYTECODE: then every Python the
# tests start compiles django-eid and the tests again, and pytest rewrites the asserts of every
# test module again (collecting the suite took 27 s instead of 11 in each process).
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
PRODUCTION ?= auto
export PRODUCTION
# pytest-xdist: a worker per core (each with its own test database and Redis database;
# tests/parallel.py allows 8 per run, so a crashed worker is not replaced by a ninth).
XDIST ?= auto
PYTEST := $(PY) -m pytest -n $(XDIST) --maxprocesses=8 --max-worker-restart=0

.DEFAULT_GOAL := test
.PHONY: venv lint test test-fast test-sqlite test-production coverage docs tox screenshots messages demo \
	bench bench-million \
	services-start services-stop clean distclean

# --- environment ----------------------------------------------------------------

venv: $(VENV)/.installed

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "$(PYTHON) is older than Python 3.11; run make PYTHON=python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall only when pyproject.toml changed since the last install (the stamp).
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test,browser,dev,docs]'
	@touch $@

# The demo needs the package and the example project's settings reader only.
$(VENV)/.installed-demo: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[example]'
	@touch $@

$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	@touch $@

# --- checks ---------------------------------------------------------------------

# All three always run, so one pass shows every problem.
lint: venv
	@rc=0; \
	echo "ruff check ."; $(VENV)/bin/ruff check . || rc=1; \
	echo "ruff format --check ."; $(VENV)/bin/ruff format --check . || rc=1; \
	echo "mypy django_eid"; $(VENV)/bin/mypy django_eid || rc=1; \
	exit $$rc

test:
	@MAKE="$(MAKE)" bash .ci/test.sh

# The tiers leave the tests of the others out: the SQLite tier the production tests (the
# production tier runs them), the production tier the browser tests (once per run is
# enough: they test the pages, not the database), the packaging test and the tests that run
# their case in a child process on SQLite of its own (own_process: the same in both tiers).
SQLITE_TIER := -m "not production"
PRODUCTION_TIER := -m "not packaging and not browser and not own_process"
# The production tier draws a quarter of the property tests' examples (tests/examples.py):
# the SQLite tier draws them all. EXAMPLES=all: every one (make test in CI, where the
# SQLite tier leaves these tests to the production tier and tox).
EXAMPLES ?= fewer

# The edit-test loop: what needs neither Chromium nor PostgreSQL, nor builds the wheel.
test-fast: venv
	env -u DATABASE_URL -u EID_TEST_REDIS_URL -u EID_REQUIRE_PRODUCTION -u EID_REQUIRE_BROWSER \
		$(PYTEST) -m "not production and not browser and not packaging" $(PYTEST_ARGS)

# The SQLite tier ignores any DATABASE_URL/Redis of the shell.
test-sqlite: venv
	env -u DATABASE_URL -u EID_TEST_REDIS_URL -u EID_REQUIRE_PRODUCTION \
		$(PYTEST) $(SQLITE_TIER) $(PYTEST_ARGS)

# A production test skipping here means a broken setup, so on the whole suite
# that is an error (not with PYTEST_ARGS: a narrowed run may hold none).
test-production: venv
	.ci/services.sh run env -u EID_REQUIRE_BROWSER EID_TEST_EXAMPLES=$(EXAMPLES) \
		$(if $(PYTEST_ARGS),,EID_REQUIRE_PRODUCTION=1) \
		$(PYTEST) $(PRODUCTION_TIER) $(PYTEST_ARGS)

# Branch coverage of django_eid/ over both tiers (the figure issue 23 keeps from dropping;
# [tool.coverage.report] fail_under guards it). The production tier needs PostgreSQL and
# Redis: without them the figure is the SQLite tier's, and says so. The packaging test
# runs in other interpreters, so it adds no coverage here.
coverage: venv
	rm -f .coverage
	env -u DATABASE_URL -u EID_TEST_REDIS_URL -u EID_REQUIRE_PRODUCTION \
		$(PYTEST) -m "not production and not packaging" --cov --cov-report= -q $(PYTEST_ARGS)
	@if .ci/services.sh available 2>/dev/null; then \
		.ci/services.sh run env -u EID_REQUIRE_BROWSER \
			$(PYTEST) $(PRODUCTION_TIER) --cov --cov-append --cov-report= -q $(PYTEST_ARGS); \
	else \
		echo "coverage: PostgreSQL/Redis not installed: the SQLite tier's coverage alone"; \
	fi
	$(VENV)/bin/coverage html -q
	$(VENV)/bin/coverage report

docs: venv
	@if [ -f mkdocs.yml ]; then \
		$(VENV)/bin/mkdocs build --strict; \
	else \
		echo "docs skipped: no mkdocs.yml yet"; \
	fi

# tox's interpreters come from pyenv where they are not on PATH; a missing one
# fails here, by name.
tox: venv
	.ci/pythons.sh $(VENV)/bin/tox $(TOX_ARGS)

# The tests write every screenshot under build/screenshots/; this run of the
# tests that take the documentation's pictures copies those into docs/img/.
screenshots: venv
	@test -x /usr/bin/chromium || { echo "screenshots need Chromium: apt-get install chromium"; exit 1; }
	EID_DOCS_IMG=docs/img env -u DATABASE_URL -u EID_TEST_REDIS_URL \
		$(PY) -m pytest -p no:randomly -m browser tests/browser

# The shipped languages; keep in step with tests/test_i18n.py. After a run, translate
# the new and fuzzy entries of django_eid/locale/*/LC_MESSAGES/django.po (and of the
# example project's own pages, example_project/locale), drop their "#, fuzzy" flags,
# and run it again to compile them.
LANGUAGES := nb sv da fi
CATALOGS := django_eid example_project

messages: venv
	@command -v msgfmt >/dev/null || { echo "GNU gettext is missing: apt-get install gettext"; exit 1; }
	@set -e; for c in $(CATALOGS); do \
		(cd $$c && env -u DJANGO_SETTINGS_MODULE ../$(VENV)/bin/django-admin makemessages \
			$(addprefix --locale=,$(LANGUAGES)) --no-obsolete --add-location=file && \
		env -u DJANGO_SETTINGS_MODULE ../$(VENV)/bin/django-admin compilemessages); \
		for l in $(LANGUAGES); do printf '%s %s: ' $$c $$l; \
			msgfmt --statistics -o /dev/null $$c/locale/$$l/LC_MESSAGES/django.po; done; \
	done

# --- running things -------------------------------------------------------------

# The site calls its embedded sandbox over HTTP, so the sandbox's URL follows the port.
DEMO_PORT ?= 8000

demo: $(VENV)/.installed-demo
	$(PY) manage.py migrate --noinput
	$(PY) manage.py eid_demo_user
	EID_SANDBOX_URL=http://127.0.0.1:$(DEMO_PORT)/eid-sandbox \
		$(PY) manage.py runserver 127.0.0.1:$(DEMO_PORT)

bench: $(VENV)/.installed-bench
	$(PY) -m benchmarks

# Issue 15's million identifications (docs/benchmarks.md): a run of its own, 15+ minutes.
bench-million: $(VENV)/.installed-bench
	$(PY) -m benchmarks.million

services-start:
	.ci/services.sh start
	@.ci/services.sh env

services-stop:
	.ci/services.sh stop

# --- cleaning -------------------------------------------------------------------

clean:
	rm -rf build dist site htmlcov .coverage .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o -path ./.tox -prune -o \
		\( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +

# Also the virtualenvs and the throwaway PostgreSQL/Redis (data included).
distclean: clean
	rm -rf $(VENV) .tox
	.ci/services.sh destroy
