# Helpers every user-space server links: listener set-up, argument parsing.
KTCP_USER_COMMON := $(BUILD)/user/common/ktcp-net.o

$(BUILD)/user/common/%.o: user/common/%.c user/common/ktcp-net.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
