# tests/diff/diff.mk — the library tests/test_core_diff.py loads with
# ctypes: core/ built -fPIC plus the flat, struct-free parser entry points
# of tests/diff/http_flat.c (a test binding, not part of core's API).

CORE_DIFF_LIB := $(BUILD)/tests/diff/libcoreflat.so
CORE_DIFF_OBJ := $(BUILD)/tests/diff/http_flat.o

BINS += $(CORE_DIFF_LIB)

$(CORE_DIFF_OBJ): tests/diff/http_flat.c tests/diff/http_flat.h $(FLAGS_STAMP) | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -Itests/diff -MMD -MP -c $< -o $@

$(CORE_DIFF_LIB): $(CORE_PIC_OBJS) $(CORE_DIFF_OBJ)
	$(CC) -shared -o $@ $^

-include $(CORE_DIFF_OBJ:.o=.d)
