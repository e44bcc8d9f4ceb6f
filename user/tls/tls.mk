# The TLS layer of the user-space servers (user/tls, docs/tls.md): a
# library on OpenSSL 3 (libssl-dev), its non-blocking server connections
# and their transport on the runtime (tls-rt.c, which alone uses rt.h).

TLS_SRCS := $(sort $(wildcard user/tls/tls-*.c))
TLS_OBJS := $(patsubst user/tls/%.c,$(BUILD)/user/tls/%.o,$(TLS_SRCS))
TLS_LIB  := $(BUILD)/libktcp-tls.a
# What a program linking $(TLS_LIB) adds to its link line and CFLAGS.
TLS_LIBS := -lssl -lcrypto
TLS_CFLAGS := -Iuser/tls

$(BUILD)/user/tls/%.o: user/tls/%.c $(wildcard user/tls/*.h) user/rt/rt.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iuser/tls $(RT_CFLAGS) -c -o $@ $<

$(TLS_LIB): $(TLS_OBJS)
	rm -f $@
	$(AR) rcs $@ $^
