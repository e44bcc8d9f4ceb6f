# The KCM message server, its plain-TCP twin and the message bench.
# msg-bench links the load generators' histogram and helpers (tools/).
KCM_CFLAGS := $(CFLAGS) -Itools -Iuser/common
KCM_HDRS := user/kcm/msg.h user/kcm/kcm.h

$(BUILD)/user/kcm/%.o: user/kcm/%.c $(KCM_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(KCM_CFLAGS) -c -o $@ $<

$(BUILD)/ktcp-kcm-server: $(addprefix $(BUILD)/user/kcm/,kcm-server.o kcm-bpf.o msg-common.o) $(KTCP_USER_COMMON) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/ktcp-msg-server: $(addprefix $(BUILD)/user/kcm/,msg-server.o msg-common.o) $(KTCP_USER_COMMON) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/msg-bench: $(BUILD)/user/kcm/msg-bench.o $(addprefix $(BUILD)/tools/,hist.o common.o) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lm

BINS += $(BUILD)/ktcp-kcm-server $(BUILD)/ktcp-msg-server $(BUILD)/msg-bench
