# Helpers every user-space server links: listener set-up (the command line
# is the runtime's, user/rt/rt-cli.c).
KTCP_USER_COMMON := $(BUILD)/user/common/ktcp-net.o

$(BUILD)/user/common/%.o: user/common/%.c user/common/ktcp-net.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
