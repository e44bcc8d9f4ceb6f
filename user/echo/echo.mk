# ktcp-echo: the user-space twin of kecho.ko.
ECHO_SRCS := user/echo/echo-main.c user/echo/echo-worker.c
ECHO_OBJS := $(ECHO_SRCS:%.c=$(BUILD)/%.o)
BINS += $(BUILD)/ktcp-echo

$(BUILD)/ktcp-echo: $(ECHO_OBJS) $(KTCP_USER_COMMON) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/user/echo/%.o: user/echo/%.c user/echo/echo.h user/common/ktcp-net.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iuser/common -c -o $@ $<
