# trajlog developer tasks.  `make help` lists them.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
# make's built-in default is cc; ours is gcc unless CC is set by the caller
ifeq ($(origin CC),default)
CC := gcc
endif
FUZZ_SECONDS ?= 60
ATHERIS_RUNS ?= 100000
FUZZ_API_RUNS ?= 1000000
FUZZ_API_MODE ?= fast
CSRC := $(wildcard csrc/tl_*.c)
CWARN := -std=c11 -Wall -Wextra -Werror -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g
FUZZ_TARGETS := scan decode roundtrip json
SAN_ENV = LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
BUILD := build
# Every install is held to the versions the suite was run on (constraints.txt; `make lock`
# upgrades them on purpose).
CONSTRAINTS := constraints.txt
PIP_INSTALL = $(PIP) install --quiet --disable-pip-version-check -c $(CONSTRAINTS)

.PHONY: help demo build install-test deps-test deps-check check install-fuzz fuzz-tools lock browser postgres test test-c test-python test-pg peers peers-pg sanitize cwarn symbols lint \
        c-tools format-check \
        fuzz-regress fuzz fuzz-atheris fuzz-api soak ha bench sdist-roundtrip ci clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

demo: build  ## install and run the demo on an embedded default database
	$(PYTHON) -m trajlog demo

build:  ## install trajlog in editable mode, compiling the C core
	$(PIP_INSTALL) -e .

install-test: browser postgres deps-test  ## install trajlog and everything the tests need

deps-test:  ## the Python packages of the tests, lints and peers (pinned by constraints.txt)
	$(PIP_INSTALL) -e '.[test,lint]' -r peers/requirements.txt

install-fuzz: deps-test  ## atheris, for fuzz-atheris and fuzz-api
	$(PIP_INSTALL) -e '.[test,fuzz]'

# libFuzzer ships with clang's runtime (Debian's clang and libclang-rt-dev); installed here when
# the compiler cannot link a fuzzer.
fuzz-tools:  ## clang and libFuzzer from Debian's packages, if they are missing
	@if printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
		| clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null; then :; else \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq clang libclang-rt-dev \
			>/dev/null; fi
	@clang --version | head -n 1

# Resolves the newest releases of everything the suite installs in a throwaway virtualenv and
# writes them to constraints.txt: the one deliberate way to upgrade what the tests run on.
lock:  ## re-resolve constraints.txt from the newest releases (then run make test)
	rm -rf $(BUILD)/lock && $(PYTHON) -m venv $(BUILD)/lock
	$(BUILD)/lock/bin/pip install --quiet --disable-pip-version-check \
		-e '.[test,lint,fuzz]' -r peers/requirements.txt build
	sed -n '1,/^$$/{/^#/p}' $(CONSTRAINTS) > $(BUILD)/lock/constraints.txt
	$(BUILD)/lock/bin/pip freeze --exclude-editable | grep -v -i -E '^(trajlog|pip|setuptools|wheel)==' \
		>> $(BUILD)/lock/constraints.txt
	mv $(BUILD)/lock/constraints.txt $(CONSTRAINTS)
	@echo "constraints.txt rewritten: review the diff, run make test, commit"

# The viewer's tests drive Debian's Chromium through its chromedriver (never a
# downloaded browser build); installed here when missing.
browser:  ## Chromium and chromedriver from Debian's packages, if they are missing
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; else \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver \
			>/dev/null; fi
	@chromium --version

# The suite's PostgreSQL run starts a throwaway cluster of Debian's server (initdb and pg_ctl in
# a temporary directory, tests/kits/pgcluster.py); installed here when missing.  PGBIN: the
# newest installed server's binaries (Debian's package is 15 on bookworm, 17 on trixie), found
# when the recipe runs, after `postgres` installed it.
PGBIN = $${TRAJLOG_PGBIN:-$$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)}
postgres:  ## PostgreSQL's server (initdb, pg_ctl) from Debian's package, if it is missing
	@if command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	else if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; fi
	@ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | tail -n 1 || command -v initdb

test: install-test  ## install, then run the whole suite under both kernels, on PostgreSQL, and the peers' suites
	@for t in test-c test-python test-pg peers peers-pg; do start=$$(date +%s); \
		$(MAKE) --no-print-directory $$t || exit 1; \
		echo "== make $$t took $$(( $$(date +%s) - start )) s"; done

# The adapters against their peers' own test suites (pinned in
# peers/requirements.txt; the sdists that ship the tests are fetched once into
# build/peers/).  Each peers/<name>/run.py prints what passed and what it
# deselects, and why.
PEER_RUNS := $(sort $(wildcard peers/*/run.py))
peers: deps-test  ## the Agents SDK, LangGraph and eventsourcing suites against our adapters
	@for run in $(PEER_RUNS); do echo "== $$run"; $(PYTHON) $$run || exit 1; done
	@# the README's adapter examples, each on a database of its own
	@for ex in $(sort $(wildcard examples/*.py)); do echo "== $$ex"; \
		rm -rf $(BUILD)/examples && mkdir -p $(BUILD)/examples && \
		(cd $(BUILD)/examples && $(PYTHON) $(CURDIR)/$$ex > out.txt) || exit 1; \
		tail -n 3 $(BUILD)/examples/out.txt; done

# The Agents SDK's and LangGraph's suites again, our adapters on a PostgreSQL store
# (TRAJLOG_TEST_DB=postgresql: peers/postgres.py starts the cluster as the suite does).
PEER_PG_RUNS := peers/agents/run.py peers/langgraph_checkpoint/run.py peers/langgraph_store/run.py
peers-pg: deps-test postgres  ## the Agents SDK and LangGraph suites against our adapters on PostgreSQL
	@for run in $(PEER_PG_RUNS); do echo "== $$run (PostgreSQL)"; \
		TRAJLOG_PGBIN=$(PGBIN) TRAJLOG_TEST_DB=postgresql $(PYTHON) $$run || exit 1; done

test-c: deps-test
	TRAJLOG_BACKEND=c TRAJLOG_REQUIRE_C=1 $(PYTHON) -m pytest -q

# The kill -9 loop (200 kills), the damage property test (300 damaged files),
# the race test (1,500 reads), the power-loss loops (200 crashes, 20 repack
# kills), the cache bound over 10,000 sessions, the whole CLI suite and the
# browser tests run at full CI size once, under the C kernel; the other runs
# of the suite use shorter loops (the soaks: make soak).
LIGHT = TRAJLOG_CRASH_ITERATIONS=50 TRAJLOG_DAMAGE_CASES=60 TRAJLOG_CONCURRENCY_READS=500 \
        TRAJLOG_POWERLOSS_CRASHES=80 TRAJLOG_REPACK_KILLS=8 \
        TRAJLOG_GOLDEN=0 TRAJLOG_BROWSER=0 TRAJLOG_CLI=quick

test-python: deps-test
	TRAJLOG_BACKEND=python $(LIGHT) $(PYTHON) -m pytest -q

# The suite again with every store on PostgreSQL: TRAJLOG_TEST_DB=postgresql makes tests/conftest.py
# start a throwaway cluster (it fails the run if the cluster cannot start, never skips) and open
# each store path as a tenant of it, child processes included; the tests marked sqlite_only are
# deselected (docs/postgresql.md lists them).  Under the C kernel, with the short loops.
test-pg: deps-test postgres
	TRAJLOG_PGBIN=$(PGBIN) TRAJLOG_TEST_DB=postgresql TRAJLOG_BACKEND=c TRAJLOG_REQUIRE_C=1 \
		$(LIGHT) $(PYTHON) -m pytest -q

# The inner loop: the suite once, under the C kernel, with short loops and the properties on
# fewer examples; no soaks, browser or peers (under 3 minutes on a 2-core machine).  A change to
# csrc/ needs `make build` first; `make test` stays the full gate.
QUICK = TRAJLOG_CRASH_ITERATIONS=10 TRAJLOG_DAMAGE_CASES=20 TRAJLOG_CONCURRENCY_READS=100 \
        TRAJLOG_POWERLOSS_CRASHES=20 TRAJLOG_REPACK_KILLS=2 TRAJLOG_REPACK_POWERLOSSES=2 \
        TRAJLOG_RESOURCE_THREADS=200 TRAJLOG_RESOURCE_SESSIONS=2000 \
        TRAJLOG_GOLDEN=0 TRAJLOG_BROWSER=0 TRAJLOG_CLI=quick HYPOTHESIS_PROFILE=check

check: deps-check  ## the fast inner loop: one kernel, short loops, no soaks, browser or peers
	TRAJLOG_BACKEND=c TRAJLOG_REQUIRE_C=1 $(QUICK) $(PYTHON) -m pytest -q -p no:cacheprovider

# what check needs, installed only when it is missing (deps-test re-runs pip every time)
deps-check:
	@$(PYTHON) -c "import trajlog._tlcore, pytest, pytest_asyncio, hypothesis, apsw" 2>/dev/null \
		|| $(MAKE) deps-test

# The suite against a copy of the package whose C core is built with
# AddressSanitizer + UBSan; the interpreter gets libasan preloaded.  Left out
# there: the tests of layers that reach the core only through the append and
# read paths the rest of the suite already drives (the importers, the shell,
# the viewer, the context builder, the provider converters, the adapters, the PostgreSQL
# backend's own tests) and the static checks: they
# run under both kernels in `make test`, and keep the sanitized run short.
SAN_SKIP := $(foreach t,tests/viewer tests/postgres tests/cli/test_cli.py tests/cli/test_cli_edges.py \
	tests/interop/test_aider.py tests/interop/test_claude_code.py \
	tests/interop/test_cli_interop.py tests/interop/test_codex.py \
	tests/interop/test_inspect_ai.py tests/interop/test_openhands.py \
	tests/interop/test_swe_agent.py tests/interop/test_realdata.py \
	tests/projections/test_context.py tests/project/test_architecture.py tests/project/test_api_surface.py \
	tests/providers tests/adapters,--ignore=$(t))
sanitize: deps-test cwarn  ## run the test suite on an ASan+UBSan build of the C core
	rm -rf $(BUILD)/asan && mkdir -p $(BUILD)/asan
	cp -r src/trajlog $(BUILD)/asan/trajlog && rm -rf $(BUILD)/asan/trajlog/_tlcore* \
		$$(find $(BUILD)/asan/trajlog -name __pycache__)
	TRAJLOG_SANITIZE=1 TRAJLOG_ABS_SOURCES=1 $(PYTHON) -c "import sys; sys.path.insert(0, 'csrc'); \
		from ffibuild import ffibuilder; ffibuilder.compile(tmpdir='$(BUILD)/asan')"
	PYTHONPATH=$(CURDIR)/$(BUILD)/asan $(SAN_ENV) $(PYTHON) -c "import trajlog._tlcore as t; \
		assert '/$(BUILD)/asan/' in t.__file__, t.__file__; print('sanitized core:', t.__file__)"
	PYTHONPATH=$(CURDIR)/$(BUILD)/asan TRAJLOG_BACKEND=c TRAJLOG_REQUIRE_C=1 $(SAN_ENV) \
		$(LIGHT) $(PYTHON) -m pytest -q -p no:cacheprovider -x tests $(SAN_SKIP)

cwarn: c-tools  ## compile the C core warning-free with gcc and clang (-Werror)
	for f in $(CSRC); do $(CC) $(CWARN) -fvisibility=hidden -Icsrc -c $$f -o /dev/null || exit 1; done
	@echo "$(CC): clean"
	@if command -v clang >/dev/null; then \
		for f in $(CSRC); do clang $(CWARN) -fvisibility=hidden -Icsrc -c $$f -o /dev/null || exit 1; done; \
		echo "clang: clean"; fi

symbols: deps-test  ## the extension exports only PyInit__tlcore
	$(PYTHON) -m pytest -q tests/project/test_api_surface.py -k exported

lint: deps-test cwarn format-check  ## ruff, mypy, the C warning check and the C format check
	$(PYTHON) -m ruff check src tests benchmarks fuzz peers examples
	$(PYTHON) -m mypy

c-tools:  ## clang and clang-format from Debian's packages, if they are missing
	@command -v clang-format >/dev/null && command -v clang >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq clang clang-format >/dev/null; }

format-check: c-tools  ## the C files follow .clang-format
	clang-format --dry-run --Werror csrc/*.c csrc/*.h fuzz/*.c fuzz/*.h
	@echo "clang-format: clean"

$(BUILD)/fuzz/%_replay: fuzz/fuzz_%.c fuzz/regression_driver.c $(CSRC) csrc/*.h fuzz/fuzz_helpers.h
	@mkdir -p $(BUILD)/fuzz
	$(CC) -std=c11 -O1 -Wall -Wextra -Werror $(SAN) -Icsrc -Ifuzz $< fuzz/regression_driver.c $(CSRC) -o $@

fuzz-regress: $(addprefix $(BUILD)/fuzz/,$(addsuffix _replay,$(FUZZ_TARGETS)))  ## replay the fuzz corpus under ASan+UBSan (no fuzzer needed)
	for t in $(FUZZ_TARGETS); do \
		UBSAN_OPTIONS=halt_on_error=1 $(BUILD)/fuzz/$${t}_replay fuzz/corpus/$$t || exit 1; done

$(BUILD)/fuzz/%_libfuzzer: fuzz/fuzz_%.c $(CSRC) csrc/*.h fuzz/fuzz_helpers.h | fuzz-tools
	@mkdir -p $(BUILD)/fuzz
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Icsrc -Ifuzz $< $(CSRC) -o $@

fuzz: $(addprefix $(BUILD)/fuzz/,$(addsuffix _libfuzzer,$(FUZZ_TARGETS)))  ## libFuzzer on each C target for FUZZ_SECONDS
	for t in $(FUZZ_TARGETS); do mkdir -p $(BUILD)/fuzz/corpus-$$t; \
		$(BUILD)/fuzz/$${t}_libfuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(BUILD)/fuzz/$$t- $(BUILD)/fuzz/corpus-$$t fuzz/corpus/$$t || exit 1; done

fuzz-atheris: install-fuzz  ## atheris: C vs Python kernel on the same bytes
	$(PYTHON) fuzz/fuzz_differential.py -atheris_runs=$(ATHERIS_RUNS) fuzz/corpus/scan

# FUZZ_API_MODE=fast shares :memory: stores between inputs (each in sessions of its own);
# FUZZ_API_MODE=fresh opens a store per input, as a host would.
fuzz-api: install-fuzz  ## atheris over the public API against a model of the log (fuzz/fuzz_api.py)
	mkdir -p $(BUILD)/fuzz/api-corpus $(BUILD)/fuzz/api-findings
	FUZZ_API_MODE=$(FUZZ_API_MODE) FUZZ_API_FINDINGS=$(CURDIR)/$(BUILD)/fuzz/api-findings \
		$(PYTHON) fuzz/fuzz_api.py \
		-atheris_runs=$(FUZZ_API_RUNS) -max_len=360 -timeout=120 \
		-artifact_prefix=$(BUILD)/fuzz/api- $(BUILD)/fuzz/api-corpus fuzz/corpus/api
	@ls $(BUILD)/fuzz/api-findings | grep '\.txt$$' && exit 1 || echo "fuzz-api: no findings"

soak: deps-test  ## the long property runs: damage (5,000 cases), races (10,000 reads), crashes (500 kills)
	TRAJLOG_SOAK=1 $(PYTHON) -m pytest -q -p no:cacheprovider tests/integrity/test_integrity_damage.py \
		tests/integrity/test_integrity_concurrency.py
	TRAJLOG_CRASH_ITERATIONS=500 $(PYTHON) -m pytest -q -p no:cacheprovider tests/integrity/test_crash.py

# The failover test: etcd + two Patroni-managed PostgreSQL nodes (synchronous replication) on
# loopback, the leader SIGKILLed under appending clients; Debian's patroni and etcd-server are
# installed here when missing.  Figures: benchmarks/results-ha.md.
ha: deps-check  ## the Patroni + etcd failover test (TRAJLOG_HA=1), figures in benchmarks/results-ha.md
	@command -v patroni >/dev/null && command -v etcd >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq patroni etcd-server \
			>/dev/null; }
	TRAJLOG_HA=1 TRAJLOG_BACKEND=c $(PYTHON) -m pytest -q -s -p no:cacheprovider tests/postgres/test_pg_ha.py

bench: deps-test  ## every benchmark, quick mode
	for b in benchmarks/bench_*.py; do $(PYTHON) $$b --quick || exit 1; done

# The sdist must hold every tracked file of the package, the C core, the tests
# and their data (checked against git), build and install from scratch, and
# pass the tests that read that data and exercise the installed package; the
# whole suite already ran three times (test-c, test-python, sanitize).
SDIST_TESTS := tests/format/test_vectors.py tests/project/test_api_surface.py tests/project/test_architecture.py \
	tests/storage/test_migration.py tests/cli/test_cli.py tests/api/test_store.py \
	tests/interop/test_export.py tests/interop/test_realdata.py tests/viewer/test_document.py \
	tests/api/test_replay.py tests/project/test_readme.py

sdist-roundtrip:  ## build an sdist, check it holds every tracked file, install it, run tests
	rm -rf $(BUILD)/sdist && mkdir -p $(BUILD)/sdist
	$(PYTHON) -m build --version >/dev/null 2>&1 || $(PIP_INSTALL) build
	$(PYTHON) -m build --sdist --outdir $(BUILD)/sdist .
	if git rev-parse --git-dir >/dev/null 2>&1; then \
		tar tzf $(BUILD)/sdist/trajlog-*.tar.gz | sed 's|^[^/]*/||' | grep -v '/$$' \
			| sort > $(BUILD)/sdist/packed.txt; \
		git ls-files src csrc tests fuzz benchmarks peers examples FORMAT.md README.md CHANGELOG.md docs Makefile \
			pyproject.toml setup.py | sort > $(BUILD)/sdist/tracked.txt; \
		comm -23 $(BUILD)/sdist/tracked.txt $(BUILD)/sdist/packed.txt > $(BUILD)/sdist/missing.txt; \
		if [ -s $(BUILD)/sdist/missing.txt ]; then echo "missing from the sdist:"; \
			cat $(BUILD)/sdist/missing.txt; exit 1; fi; \
		echo "sdist: every tracked file is in it"; fi
	$(PYTHON) -m venv $(BUILD)/sdist/venv
	$(BUILD)/sdist/venv/bin/pip install --quiet -c $(CONSTRAINTS) "$$(ls $(BUILD)/sdist/trajlog-*.tar.gz)[test]"
	cd $(BUILD)/sdist && tar xzf trajlog-*.tar.gz && cd trajlog-*/ && \
		TRAJLOG_REQUIRE_C=1 TRAJLOG_CLI=quick ../venv/bin/python -m pytest -q -p no:cacheprovider -x \
		$(SDIST_TESTS)

ci: test sanitize fuzz-regress lint sdist-roundtrip  ## everything .ci/run checks

clean:
	rm -rf $(BUILD) src/trajlog/_tlcore*.so src/trajlog/*.c src/trajlog/*.o *.egg-info src/*.egg-info
