SHELL := /bin/bash

# scened build. `make` builds everything into build/; `make test` runs every test;
# `make test SANITIZE=1` does the same under ASan + UBSan (objects in build/sanitize/).

CC       ?= cc
OPT      ?= -O2
CPPFLAGS := -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Iproto -Iserver -Iserver/core
CFLAGS   := -std=c11 -Wall -Wextra -Werror -g $(OPT) -MMD -MP
LDLIBS   := -lm

ifeq ($(SANITIZE),1)
  BUILD   := build/sanitize
  CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS += -fsanitize=address,undefined
else
  BUILD   := build
endif

# The daemon's layers, lowest first (see README, Architecture): a file may call functions of
# its own layer and of the layers before it, never of one after it (make layering checks).
SERVER_LAYERS := server/ops server/store server/net server/stream server/cluster server/cmd
# Directories whose modules keep their state in a struct reached from the server handle, none
# in file-scope variables (make layering checks the objects).
STATELESS_DIRS := server/net server/cluster

CORE_SRC  := $(wildcard server/core/*.c)
PROTO_SRC := $(wildcard proto/*.c)
SERVER_SRC := $(wildcard server/*.c $(addsuffix /*.c,$(SERVER_LAYERS)))
CLIENT_SRC := client/client.c client/client_packed.c

CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
PROTO_OBJ := $(PROTO_SRC:%.c=$(BUILD)/obj/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/obj/%.o)

CORE_LIB  := $(BUILD)/libscncore.a
PROTO_LIB := $(BUILD)/libscnproto.a
SCENED    := $(BUILD)/scened
CLIENT_LIB := $(BUILD)/libscnclient.a
SCENE_BENCH := $(BUILD)/scene-bench
SCENECTL  := $(BUILD)/scenectl
UNIT_TEST_BIN := $(BUILD)/unit-tests
INTEGRATION_TEST_BIN := $(BUILD)/integration-tests
JOURNAL_TEST_BIN := $(BUILD)/journal-tests
TEST_PROGRAMS := $(UNIT_TEST_BIN) $(INTEGRATION_TEST_BIN) $(JOURNAL_TEST_BIN)
BENCH_BIN := $(BUILD)/bench-core
DECODE_BENCH := $(BUILD)/bench-decode
INTEREST_BENCH := $(BUILD)/bench-interest
PACKED_BENCH := $(BUILD)/bench-packed

DEPS_STAMP := build/.deps-checked

# The staging view: web/ plus the JavaScript client module (client/js/scened.mjs) and three.js
# from the npm registry (web/package-lock.json), copied to www/ next to the daemon, where it
# looks for them by default. The npm packages (three, and ws
# and playwright-core for tests/web) are installed once per lock file in build/web-npm.
NPM_DIR    := build/web-npm
NPM_STAMP  := $(NPM_DIR)/.installed
WWW        := $(BUILD)/www
WWW_STAMP  := $(BUILD)/.www-built
WEB_SRC    := $(wildcard web/*.html web/*.js web/*.css)
JS_CLIENT  := client/js/scened.mjs
THREE      := $(NPM_DIR)/node_modules/three

# Keep intermediate objects (the fuzz targets build theirs through a pattern rule).
.SECONDARY:

.PHONY: all deps test test-suites test-examples test-web test-python test-csharp test-timeout-check test-runner-check www bench soak run clean format exhaustive-f32 layering fuzz valgrind cluster

all: $(SCENED) $(SCENECTL) $(SCENE_BENCH) $(CORE_LIB) $(PROTO_LIB) $(TEST_PROGRAMS) $(BENCH_BIN) $(DECODE_BENCH) $(INTEREST_BENCH) $(BUILD)/f32-exhaustive \
     $(WWW_STAMP)

# Install missing system packages once per checkout (re-checked when the script changes).
$(DEPS_STAMP): scripts/install-deps.sh
	@mkdir -p build
	@scripts/install-deps.sh
	@touch $@

deps: $(DEPS_STAMP)

$(NPM_STAMP): web/package.json web/package-lock.json | $(DEPS_STAMP)
	@mkdir -p $(NPM_DIR)
	cp web/package.json web/package-lock.json $(NPM_DIR)/
	cd $(NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(WWW_STAMP): $(WEB_SRC) $(JS_CLIENT) $(NPM_STAMP)
	rm -rf $(WWW)
	mkdir -p $(WWW)/vendor/three/build $(WWW)/vendor/three/examples/jsm/controls
	cp $(WEB_SRC) $(JS_CLIENT) $(WWW)/
	cp $(THREE)/build/three.module.js $(THREE)/build/three.core.js $(WWW)/vendor/three/build/
	cp $(THREE)/examples/jsm/controls/OrbitControls.js $(WWW)/vendor/three/examples/jsm/controls/
	cp $(THREE)/LICENSE $(WWW)/vendor/three/
	@touch $@

www: $(WWW_STAMP)

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	$(AR) rcs $@ $^

$(PROTO_LIB): $(PROTO_OBJ)
	$(AR) rcs $@ $^

SERVER_LIBS := -luv -lcjson -lhttp_parser -lwslay -lnettle -lcurl -lssl -lcrypto

$(SCENED): $(SERVER_OBJ) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS) $(LDLIBS)

$(CLIENT_LIB): $(CLIENT_OBJ)
	$(AR) rcs $@ $^

# The client library speaks TLS through OpenSSL.
CLIENT_LIBS := -lcjson -lssl -lcrypto

SCENE_BENCH_OBJ := $(patsubst %,$(BUILD)/obj/client/%.o,scene_bench scene_bench_near \
		scene_bench_stream scene_bench_check scene_bench_decode scene_bench_ws)
$(SCENE_BENCH): $(SCENE_BENCH_OBJ) $(CLIENT_LIB) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -lpthread $(LDLIBS)

# scenectl's parts that need neither the daemon nor the line editor, which the unit suites test.
CTL_PARTS_OBJ := $(addprefix $(BUILD)/obj/client/,ctl_complete.o ctl_suggest.o ctl_words.o)

$(SCENECTL): $(BUILD)/obj/client/scenectl.o $(BUILD)/obj/client/ctl_near.o $(BUILD)/obj/client/ctl_packed.o \
		$(BUILD)/obj/client/ctl_readline.o $(BUILD)/obj/client/ctl_fields.o $(CTL_PARTS_OBJ) \
		$(CLIENT_LIB) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS) -ledit $(LDLIBS)

# The test programs (tests/): each runs its suites one process per suite (tests/runner).
# Which headers each directory of tests may include: the runner's, the seeded random sources
# both programs' suites use (tests/common), the integration harness, and the servers the
# cluster suites start (tests/fixtures).
$(BUILD)/obj/tests/unit/%.o: CPPFLAGS += -Itests/runner -Itests/common -Iclient
$(BUILD)/obj/tests/integration/%.o: CPPFLAGS += -Itests/runner -Itests/common -Itests/fixtures
$(BUILD)/obj/tests/fixtures/%.o: CPPFLAGS += -Itests/runner -Itests/integration
$(BUILD)/obj/tests/journal/%.o: CPPFLAGS += -Itests/runner -Itests/common -Itests/integration

test_objects = $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(addsuffix /*.c,$(1))))
RUNNER_OBJ := $(call test_objects,tests/runner)

# The unit suites need no daemon: the core, the protocol, scenectl's completion and suggestions,
# and the daemon's files they test in this process: the store's files (they need only libc) and
# the cluster's ownership core, which the cluster_owners suite drives with made-up events (it
# needs no etcd, store or loop), and the owner's backlog of a group's records (libc only).
UNIT_TEST_SERVER_OBJ := $(addprefix $(BUILD)/obj/server/,stream/frame.o store/history_file.o \
                        store/snapshot.o store/crc32c.o store/files.o store/path.o ops/log.o \
                        cluster/owners.o cluster/claims.o cluster/move.o cluster/followers.o \
                        cluster/backlog.o \
                        ops/json_arena.o)
$(UNIT_TEST_BIN): $(call test_objects,tests/unit) $(RUNNER_OBJ) $(UNIT_TEST_SERVER_OBJ) $(CTL_PARTS_OBJ) \
                  $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcunit -lcjson $(LDLIBS)

# The integration suites start $(SCENED) (SCENED_BIN) and talk to it, through the client
# library among other ways.
$(INTEGRATION_TEST_BIN): $(call test_objects,tests/integration tests/fixtures) $(RUNNER_OBJ) \
                         $(CLIENT_LIB) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcunit $(CLIENT_LIBS) $(LDLIBS)

# The journal's property without a daemon: the dispatcher and the store in this process.
JOURNAL_TEST_OBJ := $(call test_objects,tests/journal) $(RUNNER_OBJ) \
                    $(addprefix $(BUILD)/obj/tests/integration/,workload.o harness.o)
$(JOURNAL_TEST_BIN): $(JOURNAL_TEST_OBJ) $(filter-out %/server/main.o,$(SERVER_OBJ)) $(CLIENT_LIB) \
                     $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcunit $(SERVER_LIBS) $(LDLIBS)

$(BENCH_BIN): $(BUILD)/obj/tests/bench/bench_core.o $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(INTEREST_BENCH): $(BUILD)/obj/tests/bench/bench_interest.o $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(PACKED_BENCH): $(BUILD)/obj/tests/bench/bench_packed.o $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(DECODE_BENCH): $(BUILD)/obj/tests/bench/bench_decode.o $(BUILD)/obj/server/ops/json_arena.o $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcjson -lnettle $(LDLIBS)

$(BUILD)/f32-exhaustive: $(BUILD)/obj/tests/tools/f32_exhaustive.o $(PROTO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread $(LDLIBS)

# The layers hold: the core includes only cglm and libc, proto/ and client/ no server header,
# and no server file calls a function of a layer above its own (from the objects' symbols);
# the self-test shows each kind of breach is caught. The STATELESS_DIRS keep no writable
# variables. No file under server/ is over 900 lines, no function over 120 (check-sizes.py).
layering: $(SCENED) $(CLIENT_LIB) $(SCENECTL) $(SCENE_BENCH)
	@scripts/layering.sh $(BUILD)/obj $(SERVER_LAYERS)
	@scripts/module-state.sh $(BUILD)/obj $(STATELESS_DIRS)
	@scripts/layering-selftest.sh $(CC) >/dev/null
	@python3 scripts/check-sizes.py server
	@python3 scripts/check-sizes.py --selftest

# The documents first (the flags of scened --help against docs/operations.md, and the links
# between the documents), the three test programs, then the documents' shell examples run
# against a daemon (test-examples), the runner's own checks, then the WebSocket and browser tests
# (Node's test runner; the browser test needs Debian's Chromium, which scripts/install-deps.sh
# installs). SUITE=word[,word...] runs only the suites whose names contain a word, and nothing
# else: make test SUITE=daemon_commands.
TEST_ENV := SCENED_BIN=$(abspath $(SCENED)) SCENECTL_BIN=$(abspath $(SCENECTL))
ifeq ($(SUITE),)
test: layering test-suites
	python3 scripts/check-docs.py $(SCENED)
	@$(MAKE) --no-print-directory test-examples
	@$(MAKE) --no-print-directory test-runner-check
	@$(MAKE) --no-print-directory test-web
	@$(MAKE) --no-print-directory test-python
	@$(MAKE) --no-print-directory test-csharp
else
test: test-suites
endif

test-suites: $(TEST_PROGRAMS) $(SCENED) $(SCENECTL) $(SCENE_BENCH)
	$(TEST_ENV) tests/tools/run_tests.sh "$(SUITE)" $(TEST_PROGRAMS)

# Every ```sh block of README.md and docs/*.md runs against a daemon of its own, but those marked
# <!-- not run: REASON --> (scripts/check-examples.py); its self-test shows each fault is caught.
test-examples: $(SCENED) $(SCENECTL) $(SCENE_BENCH)
	python3 scripts/check-examples.py --bin $(BUILD)
	python3 scripts/check-examples.py --selftest --bin $(BUILD)

# Every test runs under a time limit (SCENED_TEST_TIMEOUT seconds overrides the default); this
# shows that a test that hangs is named and its daemon killed (about a second).
test-timeout-check: $(INTEGRATION_TEST_BIN) $(SCENED)
	SCENED_BIN=$(abspath $(SCENED)) tests/tools/check_timeout.sh $(INTEGRATION_TEST_BIN)

# The runner's own checks: the time limit above, and a suite whose process dies is named and
# counted while the next suites still run.
test-runner-check: test-timeout-check $(UNIT_TEST_BIN)
	tests/tools/check_crash.sh $(UNIT_TEST_BIN)

WEB_TESTS := tests/web/ws.test.mjs tests/web/wss.test.mjs tests/web/static.test.mjs tests/web/client.test.mjs \
  tests/web/packed.test.mjs tests/web/package.test.mjs tests/web/cluster.test.mjs \
  tests/web/replicas.test.mjs
ifneq ($(wildcard /usr/bin/chromium),)
  WEB_TESTS += tests/web/browser.test.mjs
endif

test-web: $(SCENED) $(WWW_STAMP)
	@test -x /usr/bin/chromium || echo "note: /usr/bin/chromium is not installed: skipping the browser test (scripts/install-deps.sh installs it)"
	SCENED_BIN=$(abspath $(SCENED)) SCENED_NODE_MODULES=$(abspath $(NPM_DIR))/node_modules \
	  SCENED_SCREENSHOT=$(abspath build/staging-view.png) $(if $(filter 1,$(SANITIZE)),SCENED_WEB_MIN_FPS=0.5) \
	  node --test $(WEB_TESTS)

# The Python package (client/python) installed as a user installs it, into a virtual
# environment that also sees Debian's pytest and setuptools (so no network is needed), then its
# tests against real daemons (and etcd, for MOVED). In-tree build leftovers are removed first:
# a module deleted from src/ must not ship from an old build/lib.
PYTHON ?= /usr/bin/python3
PYENV  := build/pyenv
test-python: $(SCENED)
	@test -x $(PYENV)/bin/python || $(PYTHON) -m venv --system-site-packages $(PYENV)
	rm -rf client/python/build client/python/src/scened.egg-info
	$(PYENV)/bin/pip install -q --no-build-isolation --no-index --force-reinstall ./client/python
	rm -rf client/python/build client/python/src/scened.egg-info
	SCENED_BIN=$(abspath $(SCENED)) $(PYENV)/bin/python -m pytest -q -p no:cacheprovider client/python/tests

# The C# client (client/csharp), built with Mono's mcs and run under mono against real daemons:
# standalone, TLS (RSA certificates: Mono's TLS takes no ECDSA) and a cluster with etcd.
test-csharp: $(SCENED) $(SCENECTL) | $(DEPS_STAMP)
	BUILD=$(BUILD) SCENED_BIN=$(abspath $(SCENED)) SCENECTL_BIN=$(abspath $(SCENECTL)) tests/csharp/run.sh

run: $(SCENED) $(SCENECTL) $(WWW_STAMP)
	@echo "scened: protocol on 127.0.0.1:7878, metrics on http://127.0.0.1:7879/metrics"
	@echo "  staging view: http://127.0.0.1:7879/  (WebSocket: ws://127.0.0.1:7879/ws)"
	@echo "  talk to it:  $(SCENECTL) ping   |   $(SCENECTL) world.create world=main"
	@echo "  interactive: $(SCENECTL)   (Ctrl-C here stops the daemon)"
	$(SCENED)

# An example cluster: a local etcd and three daemons sharing build/cluster-data (Ctrl-C stops).
cluster: $(SCENED) $(SCENECTL) $(WWW_STAMP)
	BUILD=$(BUILD) scripts/cluster.sh

# The unit suites and the journal's property under valgrind (each suite's process exits 99 on
# a leak or memory error, and the runner names it), then integration suites with the daemon
# itself under valgrind (it exits 99 the same way, which the suites check). Suites that time
# ticks or load the machine are left to the sanitizer build.
VALGRIND := valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite,indirect \
            --error-exitcode=99
VALGRIND_SUITES := daemon_commands,daemon_parts,daemon_persist,clients,daemon_ops,daemon_acl,daemon_tls
valgrind: $(TEST_PROGRAMS) $(SCENED) $(SCENECTL)
	$(VALGRIND) $(UNIT_TEST_BIN)
	SCENED_SEEDS=3 $(VALGRIND) $(JOURNAL_TEST_BIN)
	SCENED_BIN=$(abspath scripts/valgrind-scened.sh) SCENED_REAL=$(abspath $(SCENED)) \
	  SCENECTL_BIN=$(abspath $(SCENECTL)) $(INTEGRATION_TEST_BIN) $(VALGRIND_SUITES)

bench: $(BENCH_BIN) $(DECODE_BENCH) $(INTEREST_BENCH) $(PACKED_BENCH) $(SCENED) $(SCENE_BENCH) $(SCENECTL)
	BUILD=$(BUILD) scripts/bench.sh

# A long mixed load (SOAK_MINUTES, default 3): fails when the daemon's memory keeps growing.
# Then the randomized durability tests with many seeds (SOAK_SEEDS, SOAK_CLUSTER_SEEDS): the
# journal's replay, kill -9 and restarts of a daemon, takeovers and moves in a cluster, and
# takeovers from in-sync followers with replicas.
SOAK_SEEDS ?= 200
SOAK_CLUSTER_SEEDS ?= 30
soak: $(SCENED) $(SCENE_BENCH) $(INTEGRATION_TEST_BIN) $(JOURNAL_TEST_BIN)
	BUILD=$(BUILD) scripts/soak.sh
	SCENED_SEEDS=$(SOAK_SEEDS) SCENED_TEST_TIMEOUT=7200 $(JOURNAL_TEST_BIN)
	SCENED_SEEDS=$(SOAK_SEEDS) SCENED_TEST_TIMEOUT=7200 SCENED_BIN=$(abspath $(SCENED)) \
	  $(INTEGRATION_TEST_BIN) daemon_crash
	SCENED_SEEDS=$(SOAK_CLUSTER_SEEDS) SCENED_TEST_TIMEOUT=7200 SCENED_BIN=$(abspath $(SCENED)) \
	  $(INTEGRATION_TEST_BIN) cluster_crash
	SCENED_SEEDS=$(SOAK_CLUSTER_SEEDS) SCENED_TEST_TIMEOUT=7200 SCENED_BIN=$(abspath $(SCENED)) \
	  $(INTEGRATION_TEST_BIN) cluster_crash_replicas

exhaustive-f32: $(BUILD)/f32-exhaustive
	$(BUILD)/f32-exhaustive

# Fuzzing with libFuzzer (clang): each target runs FUZZ_SECONDS from its seed corpus in
# tests/fuzz/corpus/TARGET; what it finds new is kept in build/fuzz/corpus/TARGET.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_BUILD   := build/fuzz
FUZZ_TARGETS := framing request dispatch persist acl packed
FUZZ_CFLAGS  := -std=c11 -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer -MMD -MP \
                -fsanitize=fuzzer-no-link,address,undefined
FUZZ_LIB_SRC := $(CORE_SRC) $(PROTO_SRC) $(filter-out server/main.c,$(SERVER_SRC))
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)

$(FUZZ_BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(SERVER_LIBS) -lm

fuzz: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	  $(FUZZ_BUILD)/fuzz_$$t $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	    -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -close_fd_mask=3 2>&1 | \
	    grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|DONE|ERROR|SUMMARY|Done' ; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
