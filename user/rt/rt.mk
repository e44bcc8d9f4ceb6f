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

# The coroutine switch is top-level assembly, which a link-time-optimised
# object hides from nm (scripts/check-layers): compiled plainly.
$(BUILD)/user/rt/rt-coro.o: CFLAGS += -fno-lto

$(RT_LIB): $(RT_OBJS) $(KTCP_USER_COMMON)
	@rm -f $@
	$(AR) rcs $@ $^

# Unit test of the runtime (timer heap, coroutine switch), run by make check.
UNIT_TESTS += $(BUILD)/test-rt

# (the test compiles rt-sched.c in: a change to it rebuilds the test)
$(BUILD)/test-rt: user/rt/tests/test-rt.c $(BUILD)/user/rt/rt-coro.o $(BUILD)/user/rt/rt-timer.o \
		user/rt/rt-sched.c user/rt/rt-internal.h
	$(CC) $(CFLAGS) -Iuser/rt -o $@ $< $(filter %.o,$^) $(LDFLAGS) $(RT_LIBS)

# Unit test of admission (--max-conns, --max-conns-per-ip and its table).
UNIT_TESTS += $(BUILD)/test-rt-admit

$(BUILD)/test-rt-admit: user/rt/tests/test-rt-admit.c $(BUILD)/user/rt/rt-admit.o $(BUILD)/user/rt/rt-core.o $(KTCP_USER_COMMON)
	$(CC) $(CFLAGS) -Iuser/rt -o $@ $^ $(LDFLAGS) $(RT_LIBS)
