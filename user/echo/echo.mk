# ktcp-echo: the user-space twin of kecho.ko, on the user runtime (user/rt).
ECHO_SRCS := user/echo/echo-main.c user/echo/echo-conn.c
ECHO_OBJS := $(ECHO_SRCS:%.c=$(BUILD)/%.o)
BINS += $(BUILD)/ktcp-echo

$(BUILD)/ktcp-echo: $(ECHO_OBJS) $(RT_LIB) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $(ECHO_OBJS) $(RT_LIB) $(KTCP_VERSION_OBJ) $(RT_LIBS)

$(BUILD)/user/echo/%.o: user/echo/%.c user/echo/echo.h user/rt/rt.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(RT_CFLAGS) -Iuser/common -c -o $@ $<
