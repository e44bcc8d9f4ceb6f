# ktcp-httpd: the user-space HTTP server (user/httpd), on core/'s protocol
# library. Runtime files are rt-*, HTTP files httpd-*.

HTTPD_SRCS := $(sort $(wildcard user/httpd/*.c))
HTTPD_OBJS := $(patsubst user/httpd/%.c,$(BUILD)/user/httpd/%.o,$(HTTPD_SRCS))
HTTPD_LIBS := -lz -lurcu-cds -lurcu-memb -lurcu-common

BINS += $(BUILD)/ktcp-httpd

$(BUILD)/user/httpd/%.o: user/httpd/%.c $(wildcard user/httpd/*.h) $(wildcard core/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iuser/httpd -Iuser/common -c -o $@ $<

$(BUILD)/ktcp-httpd: $(HTTPD_OBJS) $(BUILD)/libktcpcore.a $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $(HTTPD_OBJS) $(BUILD)/libktcpcore.a $(KTCP_VERSION_OBJ) $(HTTPD_LIBS)

# Unit test of the runtime (timer heap, coroutine switch), run by make check.
UNIT_TESTS += $(BUILD)/test-httpd-rt

$(BUILD)/test-httpd-rt: user/httpd/tests/test-rt.c $(BUILD)/user/httpd/rt-coro.o $(BUILD)/user/httpd/rt-timer.o
	$(CC) $(CFLAGS) -Iuser/httpd -o $@ $^ $(LDFLAGS) $(HTTPD_LIBS)
