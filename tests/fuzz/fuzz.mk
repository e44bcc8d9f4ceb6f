# tests/fuzz/fuzz.mk — libFuzzer targets for core/ and their regression
# corpus. `make fuzz` builds the fuzzers with clang; `make fuzz-run`
# runs each for FUZZ_SECONDS; make check replays tests/fuzz/corpus/<target>/
# through a plain gcc driver (no libFuzzer needed).
#
# A target is a file tests/fuzz/fuzz_<name>.c; each has its corpus in
# tests/fuzz/corpus/<name>/ (the replay fails on an empty or missing one).
# FUZZ_TARGETS=name... limits fuzz and fuzz-run to some of them.

FUZZ_ALL      := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_TARGETS  ?= $(FUZZ_ALL)
FUZZ_CC       ?= clang
FUZZ_FLAGS    := -g -O1 -std=gnu11 -Wall -Wextra -Werror -Icore \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_SECONDS  ?= 60
FUZZ_MAX_LEN  ?= 4096
FUZZ_BINS     := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)
CORE_FUZZ_REPLAY := $(FUZZ_ALL:%=$(BUILD)/tests/fuzz/replay_%)

UNIT_TESTS += $(CORE_FUZZ_REPLAY)

.PHONY: fuzz fuzz-run
fuzz: $(FUZZ_BINS)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(CORE_SRCS) $(wildcard core/*.h) | $(BUILD)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(CORE_SRCS)

$(BUILD)/tests/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h tests/fuzz/replay_main.c $(CORE_LIB) | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DCORPUS_DIR='"tests/fuzz/corpus/$*"' -o $@ \
		tests/fuzz/replay_main.c $< $(CORE_LIB) $(LDFLAGS)

# New inputs go to build/ (scratch); crashes are copied into the corpus by
# hand once fixed, so the corpus stays small and meaningful.
fuzz-run: fuzz
	@set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(BUILD)/fuzz/corpus-$$t; \
		$(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) \
			-artifact_prefix=$(BUILD)/fuzz/$$t- \
			$(BUILD)/fuzz/corpus-$$t tests/fuzz/corpus/$$t; \
	done
