# ktcp-httpd: the user-space HTTP server (user/httpd), on core/'s protocol
# library and the user runtime (user/rt, $(RT_LIB)).

HTTPD_SRCS := $(sort $(wildcard user/httpd/*.c))
HTTPD_OBJS := $(patsubst user/httpd/%.c,$(BUILD)/user/httpd/%.o,$(HTTPD_SRCS))
HTTPD_LIBS := -lz -lurcu-cds $(TLS_LIBS) $(RT_LIBS)

BINS += $(BUILD)/ktcp-httpd

$(BUILD)/user/httpd/%.o: user/httpd/%.c $(wildcard user/httpd/*.h) $(wildcard user/rt/rt.h) $(wildcard user/tls/ktcp-tls.h) $(wildcard core/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iuser/httpd $(RT_CFLAGS) $(TLS_CFLAGS) -Iuser/common -c -o $@ $<

$(BUILD)/ktcp-httpd: $(HTTPD_OBJS) $(TLS_LIB) $(RT_LIB) $(BUILD)/libktcpcore.a $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $(HTTPD_OBJS) $(TLS_LIB) $(RT_LIB) $(BUILD)/libktcpcore.a $(KTCP_VERSION_OBJ) $(HTTPD_LIBS)
