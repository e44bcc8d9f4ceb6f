# ktcp-tlsd: the TLS agent that hands kTLS sockets to khttpd, on the
# project's TLS layer (user/tls; only its runtime-free objects are linked).
TLSD_CFLAGS := $(CFLAGS) -Iuser/common $(TLS_CFLAGS)
TLSD_HDRS := user/tls/ktcp-tls.h user/common/ktcp-net.h

$(BUILD)/user/tlsd/%.o: user/tlsd/%.c $(TLSD_HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TLSD_CFLAGS) -c -o $@ $<

$(BUILD)/ktcp-tlsd: $(BUILD)/user/tlsd/tlsd-main.o $(TLS_LIB) $(KTCP_USER_COMMON) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/user/tlsd/tlsd-main.o $(TLS_LIB) $(KTCP_USER_COMMON) $(KTCP_VERSION_OBJ) $(TLS_LIBS)

BINS += $(BUILD)/ktcp-tlsd
