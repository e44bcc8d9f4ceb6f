# The user-space runtime every ktcp server links (user/rt): connections,
# coroutines, the threads / epoll / mn models, timers, counters. It knows
# nothing of the protocols its users speak; see user/rt/rt.h.

RT_SRCS := $(sort $(wildcard user/rt/rt-*.c))
RT_OBJS := $(patsubst user/rt/%.c,$(BUILD)/user/rt/%.o,$(RT_SRCS))
RT_LIB  := $(BUILD)/librt-ktcp.a
# What a program linking $(RT_LIB) adds to its link line (the archive holds
# user/common's helpers too).
RT_LIBS := -lurcu-memb -lurcu-common
# What a program compiling against rt.h adds to its CFLAGS.
RT_CFLAGS := -Iuser/rt

$(BUILD)/user/rt/%.o: user/rt/%.c $(wildcard user/rt/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iuser/rt -Iuser/common -c -o $@ $<

# The coroutine switch (rt-switch.c): hand-written for x86-64 and aarch64
# (RT_CORO=asm, the default), or ucontext's (RT_CORO=ucontext: any
# architecture with getcontext/makecontext/swapcontext; a system call per
# switch). Another architecture without RT_CORO=ucontext stops at an
# #error. The choice is in CFLAGS, so build/gen/flags rebuilds on a change.
RT_CORO ?= asm
ifeq ($(RT_CORO),ucontext)
CFLAGS += -DRT_CORO_UCONTEXT
else ifneq ($(RT_CORO),asm)
$(error RT_CORO=$(RT_CORO): asm (x86-64, aarch64) or ucontext)
endif

# The switch is top-level assembly, which a link-time-optimised object
# hides from nm (scripts/check-layers): compiled plainly.
$(BUILD)/user/rt/rt-switch.o: CFLAGS += -fno-lto

$(RT_LIB): $(RT_OBJS) $(KTCP_USER_COMMON)
	@rm -f $@
	$(AR) rcs $@ $^

# Unit test of the runtime (timer heap, coroutine switch), run by make check.
UNIT_TESTS += $(BUILD)/test-rt

# (the test compiles rt-sched.c in: a change to it rebuilds the test)
$(BUILD)/test-rt: tests/unit/test_rt.c tests/unit/unit.h $(BUILD)/user/rt/rt-coro.o $(BUILD)/user/rt/rt-switch.o $(BUILD)/user/rt/rt-timer.o \
		user/rt/rt-sched.c user/rt/rt-internal.h
	$(CC) $(CFLAGS) -Iuser/rt -Itests/unit -o $@ $< $(filter %.o,$^) $(LDFLAGS) $(RT_LIBS)

# Unit test of admission (--max-conns, --max-conns-per-ip and its table).
UNIT_TESTS += $(BUILD)/test-rt-admit

$(BUILD)/test-rt-admit: tests/unit/test_rt_admit.c $(BUILD)/user/rt/rt-admit.o $(BUILD)/user/rt/rt-core.o $(KTCP_USER_COMMON) \
		tests/unit/unit.h
	$(CC) $(CFLAGS) -Iuser/rt -Itests/unit -o $@ $(filter-out %.h,$^) $(LDFLAGS) $(RT_LIBS)

# Unit test of the context switch alone (needs libc only): here for this
# build's switch; make check-portable builds it for aarch64 too.
UNIT_TESTS += $(BUILD)/test-rt-switch

$(BUILD)/test-rt-switch: tests/unit/test_rt_switch.c $(BUILD)/user/rt/rt-switch.o tests/unit/unit.h
	$(CC) $(CFLAGS) -Iuser/rt -Itests/unit -o $@ $(filter-out %.h,$^) $(LDFLAGS)

# make check-portable (part of make check): what the default build does
# not cover. (1) The ucontext switch, in a build of its own (make
# BUILD=build/ucontext RT_CORO=ucontext user): the runtime's unit tests,
# then the HTTP conformance suite on the mn model (the one whose
# connections are coroutines) against that build's ktcp-httpd
# (KTCP_HTTPD_BIN). (2) aarch64: ktcp-httpd, ktcp-echo and the runtime's
# unit tests built with Debian's cross compiler, statically, against
# Debian's arm64 liburcu and zlib (scripts/arm64-libs, in the project
# cache), into build/aarch64; the unit tests run under qemu-aarch64
# (qemu-user), then the echo suite on the mn model against that ktcp-echo
# (KTCP_ECHO_BIN). The switch's test and the runtime's also run built with
# RT_CORO=ucontext for aarch64. (Debian 12's qemu-user has no openat2,
# which ktcp-httpd opens every file with: the HTTP suite cannot run under
# it.) Most of the time is the two suites'.
PORTABLE_BUILD = build/ucontext
AARCH64_CC    ?= aarch64-linux-gnu-gcc
AARCH64_AR    ?= aarch64-linux-gnu-ar
AARCH64_QEMU  ?= qemu-aarch64
AARCH64_BUILD ?= build/aarch64
AARCH64_BINS  ?= ktcp-httpd ktcp-echo test-rt test-rt-admit test-rt-switch

.PHONY: check-portable check-ucontext check-aarch64 aarch64-build
check-portable: check-ucontext check-aarch64
check-ucontext: user
	$(MAKE) --no-print-directory BUILD=$(PORTABLE_BUILD) RT_CORO=ucontext user
	@set -e; for t in test-rt test-rt-admit test-rt-switch; do \
		echo "== $(PORTABLE_BUILD)/$$t"; $(PORTABLE_BUILD)/$$t; done
	KTCP_HTTPD_BIN=$(CURDIR)/$(PORTABLE_BUILD)/ktcp-httpd $(PYTHON) -m pytest -q tests/http -k user-mn $(PYTEST_ARGS)

# The cross build alone: AARCH64_BINS into AARCH64_BUILD (RT_CORO as usual).
aarch64-build:
	@a=$$(scripts/arm64-libs dir) && set -x && \
	CFLAGS="-O2 -g -isystem $$a/usr/include/aarch64-linux-gnu" \
	LDFLAGS="-static -L$$a/usr/lib/aarch64-linux-gnu" \
	$(MAKE) --no-print-directory BUILD=$(AARCH64_BUILD) CC=$(AARCH64_CC) AR=$(AARCH64_AR) LTO= \
		$(addprefix $(AARCH64_BUILD)/,$(AARCH64_BINS))

check-aarch64: user
	$(MAKE) --no-print-directory aarch64-build
	$(MAKE) --no-print-directory aarch64-build AARCH64_BUILD=$(AARCH64_BUILD)-ucontext RT_CORO=ucontext \
		AARCH64_BINS="test-rt test-rt-switch"
	@set -e; for t in $(AARCH64_BUILD)/test-rt $(AARCH64_BUILD)/test-rt-admit $(AARCH64_BUILD)/test-rt-switch \
		$(AARCH64_BUILD)-ucontext/test-rt $(AARCH64_BUILD)-ucontext/test-rt-switch; do \
		echo "== $(AARCH64_QEMU) $$t"; $(AARCH64_QEMU) $$t; done
	printf '#!/bin/sh\nexec $(AARCH64_QEMU) $(CURDIR)/$(AARCH64_BUILD)/ktcp-echo "$$@"\n' >$(AARCH64_BUILD)/ktcp-echo-qemu
	chmod +x $(AARCH64_BUILD)/ktcp-echo-qemu
	KTCP_ECHO_BIN=$(CURDIR)/$(AARCH64_BUILD)/ktcp-echo-qemu $(PYTHON) -m pytest -q tests/test_echo.py -k user-mn $(PYTEST_ARGS)
