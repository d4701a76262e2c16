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

CORE_SRC  := $(wildcard server/core/*.c)
PROTO_SRC := $(wildcard proto/*.c)
UNIT_SRC  := $(wildcard tests/unit/*.c)
SERVER_SRC := $(wildcard server/*.c)
CLIENT_SRC := client/client.c

CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
PROTO_OBJ := $(PROTO_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_OBJ  := $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/obj/%.o)

CORE_LIB  := $(BUILD)/libscncore.a
PROTO_LIB := $(BUILD)/libscnproto.a
SCENED    := $(BUILD)/scened
CLIENT_LIB := $(BUILD)/libscnclient.a
SCENE_BENCH := $(BUILD)/scene-bench
SCENECTL  := $(BUILD)/scenectl
TEST_BIN  := $(BUILD)/scened-tests
BENCH_BIN := $(BUILD)/bench-core

DEPS_STAMP := build/.deps-checked

.PHONY: all deps test bench run clean format exhaustive-f32 layering fuzz valgrind

all: $(SCENED) $(SCENECTL) $(SCENE_BENCH) $(CORE_LIB) $(PROTO_LIB) $(TEST_BIN) $(BENCH_BIN) $(BUILD)/f32-exhaustive

# Install missing system packages once per checkout (re-checked when the script changes).
$(DEPS_STAMP): scripts/install-deps.sh
	@mkdir -p build
	@scripts/install-deps.sh
	@touch $@

deps: $(DEPS_STAMP)

$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	$(AR) rcs $@ $^

$(PROTO_LIB): $(PROTO_OBJ)
	$(AR) rcs $@ $^

$(SCENED): $(SERVER_OBJ) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -luv -lcjson -lhttp_parser $(LDLIBS)

$(CLIENT_LIB): $(CLIENT_OBJ)
	$(AR) rcs $@ $^

$(SCENE_BENCH): $(BUILD)/obj/client/scene_bench.o $(CLIENT_LIB) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcjson $(LDLIBS)

$(SCENECTL): $(BUILD)/obj/client/scenectl.o $(CLIENT_LIB) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcjson -ledit $(LDLIBS)

$(TEST_BIN): $(UNIT_OBJ) $(CLIENT_LIB) $(PROTO_LIB) $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lcunit -lcjson $(LDLIBS)

$(BENCH_BIN): $(BUILD)/obj/tests/bench/bench_core.o $(CORE_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/f32-exhaustive: $(BUILD)/obj/tests/tools/f32_exhaustive.o $(PROTO_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread $(LDLIBS)

# The core knows nothing of sockets, JSON or the server: enforce it.
layering:
	@! grep -nE '#include *[<"](uv|cjson/|cJSON|server/|proto/|net|conn)' server/core/*.c server/core/*.h include/scn_core.h \
	  || { echo "layering: the core must not include libuv, cJSON or server headers"; exit 1; }

# Integration suites start $(SCENED) on an ephemeral port; SCENED_BIN tells them where it is.
test: layering $(TEST_BIN) $(SCENED) $(SCENECTL)
	SCENED_BIN=$(abspath $(SCENED)) SCENECTL_BIN=$(abspath $(SCENECTL)) $(TEST_BIN)

run: $(SCENED) $(SCENECTL)
	@echo "scened: protocol on 127.0.0.1:7878, metrics on http://127.0.0.1:7879/metrics"
	@echo "  talk to it:  $(SCENECTL) ping   |   $(SCENECTL) world.create world=main"
	@echo "  interactive: $(SCENECTL)   (Ctrl-C here stops the daemon)"
	$(SCENED)

# The core and protocol suites under valgrind, then the integration suites with the daemon
# itself under valgrind (a leak or memory error makes it exit 99, which the suites check).
# Suites that time ticks or load the machine are left to the sanitizer build.
VALGRIND_SUITES := daemon_commands,daemon_persist,clients,daemon_ops
valgrind: $(TEST_BIN) $(SCENED) $(SCENECTL)
	valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite,indirect \
	  --error-exitcode=99 $(TEST_BIN) core_,proto,f32fmt
	SCENED_BIN=$(abspath scripts/valgrind-scened.sh) SCENED_REAL=$(abspath $(SCENED)) \
	  SCENECTL_BIN=$(abspath $(SCENECTL)) $(TEST_BIN) $(VALGRIND_SUITES)

bench: $(BENCH_BIN) $(SCENED) $(SCENE_BENCH)
	BUILD=$(BUILD) scripts/bench.sh

exhaustive-f32: $(BUILD)/f32-exhaustive
	$(BUILD)/f32-exhaustive

# Fuzzing with libFuzzer (clang): each target runs FUZZ_SECONDS from its seed corpus in
# tests/fuzz/corpus/TARGET; what it finds new is kept in build/fuzz/corpus/TARGET.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_BUILD   := build/fuzz
FUZZ_TARGETS := framing request dispatch persist
FUZZ_CFLAGS  := -std=c11 -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer \
                -fsanitize=fuzzer-no-link,address,undefined
FUZZ_LIB_SRC := $(CORE_SRC) $(PROTO_SRC) $(filter-out server/main.c,$(SERVER_SRC))
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)

$(FUZZ_BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ -luv -lcjson -lhttp_parser -lm

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
