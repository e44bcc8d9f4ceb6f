# tests/unit/unit.mk — the C unit tests, all on unit.h and run by make
# check-unit: core's (test_http_*.c, one program per core file, each
# linked against build/libktcpcore.a) here; the runtime's (test_rt*.c) in
# user/rt/rt.mk and the bench tools' (test_hist.c,
# test_htstress_response.c) in tools/tools.mk, beside what they link.

CORE_UNIT_SRCS := $(sort $(wildcard tests/unit/test_http_*.c))
CORE_UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(CORE_UNIT_SRCS))

UNIT_TESTS += $(CORE_UNIT_BINS)

$(BUILD)/tests/unit/%: tests/unit/%.c tests/unit/unit.h $(CORE_LIB) $(FLAGS_STAMP) | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(CORE_LIB) $(LDFLAGS)

.PHONY: check-core
check-core: $(CORE_UNIT_BINS) $(CORE_FUZZ_REPLAY)
	@set -e; for t in $^; do echo "== $$t"; $$t; done
