# The KCM message server and its plain-TCP twin (their load, msg-bench, is
# built by tools/tools.mk).
KCM_CFLAGS := $(CFLAGS) $(RT_CFLAGS) -Itools -Iuser/common
KCM_HDRS := user/kcm/msg.h user/kcm/kcm.h user/kcm/kcm-parser.h user/rt/rt.h

$(BUILD)/user/kcm/%.o: user/kcm/%.c $(KCM_HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(KCM_CFLAGS) -c -o $@ $<

# The length parser: restricted C compiled for BPF (Debian's clang; the BPF
# headers from libbpf-dev, linux/ from linux-libc-dev, asm/ from the
# multiarch directory, which -target bpf does not search), embedded in
# ktcp-kcm-server by .incbin and loaded with libbpf.
BPF_CLANG  ?= clang
BPF_CFLAGS := -O2 -g -target bpf -Wall -Wextra -Werror \
	-I/usr/include/$(shell $(CC) -print-multiarch) -Iuser/kcm
KCM_PARSER_OBJ := $(BUILD)/user/kcm/kcm-parser.bpf.o

$(KCM_PARSER_OBJ): user/kcm/kcm-parser.bpf.c user/kcm/kcm-parser.h
	@mkdir -p $(dir $@)
	$(BPF_CLANG) $(BPF_CFLAGS) -c -o $@ $<

$(BUILD)/user/kcm/kcm-parser-obj.o: user/kcm/kcm-parser-obj.S $(KCM_PARSER_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -DKCM_PARSER_OBJ='"$(KCM_PARSER_OBJ)"' -c -o $@ $<

# Both servers run on the user runtime (user/rt).
$(BUILD)/ktcp-kcm-server: $(addprefix $(BUILD)/user/kcm/,kcm-server.o kcm-bpf.o kcm-parser-obj.o msg-common.o) $(RT_LIB) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lbpf $(RT_LIBS)

$(BUILD)/ktcp-msg-server: $(addprefix $(BUILD)/user/kcm/,msg-server.o msg-common.o) $(RT_LIB) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(RT_LIBS)

BINS += $(BUILD)/ktcp-kcm-server $(BUILD)/ktcp-msg-server
