# ktcp-echo: the user-space twin of kecho.ko.
ECHO_SRCS := user/echo/echo-main.c user/echo/echo-worker.c
ECHO_OBJS := $(ECHO_SRCS:%.c=$(BUILD)/%.o)
BINS += $(BUILD)/ktcp-echo

$(BUILD)/ktcp-echo: $(ECHO_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/user/echo/%.o: user/echo/%.c user/echo/echo.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
