# Load generators: htstress (HTTP), lat (round-trip floors), echo-bench,
# msg-bench (the length-prefixed message servers, docs/kcm.md); floor, the
# least HTTP server, the bench's reference.
# libc + pthreads only (htstress: OpenSSL too, for https://); the shared
# pieces are small objects linked into each.

TOOLS_CFLAGS := $(CFLAGS) -Itools -Iuser/common

$(BUILD)/tools/%.o: tools/%.c tools/*.h $(FLAGS_STAMP) | $(BUILD)
	@mkdir -p $(BUILD)/tools
	$(CC) $(TOOLS_CFLAGS) -c -o $@ $<

$(BUILD)/htstress: $(addprefix $(BUILD)/tools/,htstress.o htstress-worker.o http-response.o hist.o common.o) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lssl -lcrypto

$(BUILD)/lat: $(addprefix $(BUILD)/tools/,lat.o hist.o common.o) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/echo-bench: $(addprefix $(BUILD)/tools/,echo-bench.o hist.o common.o) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/msg-bench: $(addprefix $(BUILD)/tools/,msg-bench.o hist.o common.o) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ -lm

# floor: the least an HTTP server can do, the bench's reference (floor.c)
$(BUILD)/floor: $(addprefix $(BUILD)/tools/,floor.o common.o) $(KTCP_USER_COMMON) $(KTCP_VERSION_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

# the tools' unit tests (tests/unit, on unit.h)
$(BUILD)/hist-test: tests/unit/test_hist.c tests/unit/unit.h $(BUILD)/tools/hist.o
	$(CC) $(CFLAGS) -Itools -Itests/unit -o $@ $< $(BUILD)/tools/hist.o $(LDFLAGS)

$(BUILD)/http-response-test: tests/unit/test_htstress_response.c tests/unit/unit.h $(BUILD)/tools/http-response.o
	$(CC) $(CFLAGS) -Itools -Itests/unit -o $@ $< $(BUILD)/tools/http-response.o $(LDFLAGS)

BINS += $(BUILD)/htstress $(BUILD)/lat $(BUILD)/echo-bench $(BUILD)/msg-bench $(BUILD)/floor
UNIT_TESTS += $(BUILD)/hist-test $(BUILD)/http-response-test
