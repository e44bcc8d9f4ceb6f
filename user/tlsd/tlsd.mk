# ktcp-tlsd: the TLS agent that hands kTLS sockets to khttpd (OpenSSL 3).
TLSD_CFLAGS := $(CFLAGS) -Iuser/common
TLSD_HDRS := user/tlsd/tlsd-ktls.h user/common/ktcp-net.h

$(BUILD)/user/tlsd/%.o: user/tlsd/%.c $(TLSD_HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TLSD_CFLAGS) -c -o $@ $<

$(BUILD)/ktcp-tlsd: $(addprefix $(BUILD)/user/tlsd/,tlsd-main.o tlsd-ktls.o) $(KTCP_USER_COMMON) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lssl -lcrypto

BINS += $(BUILD)/ktcp-tlsd
