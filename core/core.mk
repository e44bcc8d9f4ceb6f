# core/core.mk — the freestanding HTTP core, built two ways:
#   build/libktcpcore.a   linked by the user-space servers
#   make core-kcheck      compiled as the kernel would (no SSE/FPU, no libc)
# (and -fPIC for the differential test's library, tests/diff/diff.mk)

CORE_SRCS     := $(sort $(wildcard core/*.c))
CORE_OBJS     := $(patsubst core/%.c,$(BUILD)/core/%.o,$(CORE_SRCS))
CORE_PIC_OBJS := $(patsubst core/%.c,$(BUILD)/core/pic/%.o,$(CORE_SRCS))
CORE_LIB      := $(BUILD)/libktcpcore.a

BINS += $(CORE_LIB)

$(BUILD)/core/%.o: core/%.c $(FLAGS_STAMP) | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/core/pic/%.o: core/%.c $(FLAGS_STAMP) | $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(CORE_LIB): $(CORE_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

-include $(CORE_OBJS:.o=.d) $(CORE_PIC_OBJS:.o=.d)

# Kernel-like flags: a float, an SSE register, a libc call or a writable
# global would each break khttpd.ko; catch them here, without kernel headers.
CORE_KFLAGS := -std=gnu11 -O2 -Wall -Wextra -Werror -Icore -ffreestanding \
	-fno-builtin -fno-common -fno-pic -fno-stack-protector -mno-red-zone \
	-mcmodel=kernel -mno-sse -mno-mmx -mno-sse2 -mno-avx -mgeneral-regs-only \
	-Wframe-larger-than=1024
# The primitives compat.h promises exist in both worlds.
CORE_KSYMS := memcpy memmove memcmp memset memchr strlen

.PHONY: core-kcheck
core-kcheck: | $(BUILD)
	@mkdir -p $(BUILD)/core/kcheck
	@set -e; objs=; for src in $(CORE_SRCS); do \
		obj=$(BUILD)/core/kcheck/$$(basename $$src .c).o; \
		$(CC) $(CORE_KFLAGS) -c $$src -o $$obj; objs="$$objs $$obj"; \
		rw=$$(nm $$obj | awk '$$2 ~ /^[dDbBcC]$$/ {print $$3}'); \
		if [ -n "$$rw" ]; then echo "core-kcheck: $$src has mutable state: $$rw" >&2; exit 1; fi; \
	done; \
	nm --defined-only $$objs | awk 'NF == 3 {print $$3}' | sort -u > $(BUILD)/core/kcheck/defined; \
	nm -u $$objs | awk 'NF == 2 {print $$2}' | sort -u > $(BUILD)/core/kcheck/undefined; \
	bad=$$(comm -23 $(BUILD)/core/kcheck/undefined $(BUILD)/core/kcheck/defined | grep -vxE '$(subst $() ,|,$(CORE_KSYMS))' || true); \
	if [ -n "$$bad" ]; then echo "core-kcheck: core needs symbols the kernel lacks:" $$bad >&2; exit 1; fi; \
	echo "core-kcheck: $(words $(CORE_SRCS)) files ok (no FPU/SSE, no libc beyond $(CORE_KSYMS), no mutable globals)"

# The real thing: core/*.c built as a kernel module against $(KDIR) (the
# kernel the VM boots), with a tiny init that parses one request. Nothing is
# loaded; this only proves core compiles and links as kernel code.
CORE_KBUILD_DIR := $(CURDIR)/$(BUILD)/core/kbuild
.PHONY: core-kbuild
core-kbuild: | $(BUILD)
	@test -d $(KDIR) || { echo "no kernel headers at $(KDIR): run scripts/deps" >&2; exit 1; }
	@rm -rf $(CORE_KBUILD_DIR) && mkdir -p $(CORE_KBUILD_DIR)
	@for f in $(CORE_SRCS) $(wildcard core/*.h); do ln -s $(CURDIR)/$$f $(CORE_KBUILD_DIR)/; done
	@printf '%s\n' '#include <linux/module.h>' '#include "http_core.h"' \
		'static int __init core_check_init(void)' '{' \
		'	static const char req[] = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";' \
		'	struct http_parser p;' '	size_t used;' \
		'	http_parser_init(&p, NULL);' \
		'	return http_parse_request(&p, req, sizeof(req) - 1, &used) ? -EINVAL : 0;' \
		'}' 'module_init(core_check_init);' 'MODULE_LICENSE("GPL");' \
		> $(CORE_KBUILD_DIR)/core_check.c
	@printf 'obj-m := ktcp_core_check.o\nktcp_core_check-y := core_check.o %s\nccflags-y := -I$$(src) -Werror\n' \
		"$(notdir $(CORE_SRCS:.c=.o))" > $(CORE_KBUILD_DIR)/Kbuild
	$(MAKE) -C $(KDIR) M=$(CORE_KBUILD_DIR) modules
	@echo "core-kbuild: core/ builds as kernel code against $(KDIR)"
