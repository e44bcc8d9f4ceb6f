# ktcp — one command per habit: make, make check, make run, make bench, make fmt.
#
# Non-recursive: every part adds itself through a fragment (core/core.mk,
# user/*/*.mk, tools/*.mk, tests/*/*.mk) that appends to the variables below.

CC       ?= gcc
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror -pthread -D_GNU_SOURCE -Icore
LDFLAGS  += -pthread
BUILD    := build
PYTHON   := .venv/bin/python
# Kernels: KERNEL is the one `make modules` / `make check-vm` use (6.1, 6.12,
# or host = uname -r on a machine that loads modules); KERNELS are the ones
# `make check` tests. 6.1 and 6.12 come from the project cache (scripts/kernels).
KERNEL   ?= 6.1
KERNELS  ?= 6.1 6.12
ifeq ($(KERNEL),host)
KVER     := $(shell uname -r)
KDIR     ?= /lib/modules/$(KVER)/build
else
KVER     := $(shell scripts/kernels release $(KERNEL) 2>/dev/null)
KDIR     ?= $(if $(KVER),$(shell scripts/kernels dir $(KERNEL))/lib/modules/$(KVER)/build)
endif
# Objects of each kernel apart: a tree of links to kernel/ and core/ per release.
MODDIR   := $(BUILD)/modules/$(KVER)

BINS        :=   # user-space programs, each $(BUILD)/<name>
UNIT_TESTS  :=   # C test programs run by make check, each exits non-zero on failure

.PHONY: all modules user check check-unit check-host check-vm check-debug run bench bench-quick bench-echo bench-kcm fmt fmt-check deps clean
all: user modules

include $(sort $(wildcard core/*.mk user/*/*.mk tools/*.mk tests/*/*.mk))

user: $(BINS) $(UNIT_TESTS)

$(BUILD):
	mkdir -p $@

# W=1 and every warning an error, on every kernel.
modules:
	@test -n "$(KVER)" || { scripts/kernels release $(KERNEL); exit 1; }
	@test -d "$(KDIR)" || { echo "no kernel headers at $(KDIR): for KERNEL=host install your distribution's headers for $(KVER); else run scripts/deps" >&2; exit 1; }
	@mkdir -p $(MODDIR) && cp -rsf $(CURDIR)/kernel $(CURDIR)/core $(MODDIR)/
	$(MAKE) -C $(KDIR) M=$(CURDIR)/$(MODDIR)/kernel W=1 KCFLAGS=-Werror modules

deps:
	scripts/deps

# make check: set up what is missing, build, run the user-space tests on the
# host, then boot the VM once and run the kernel tests inside it.
check: deps
	$(MAKE) fmt-check
	$(MAKE) user
	$(MAKE) check-unit
	$(MAKE) check-host
	@set -e; for k in $(KERNELS); do $(MAKE) check-vm KERNEL=$$k; done
	@if scripts/kernels release debug >/dev/null 2>&1; then $(MAKE) check-debug; else \
		echo "check: check-debug skipped: no debug kernel (build it once with scripts/debug-kernel, ~2 h on 2 cores)"; fi

check-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

check-host: user
	$(PYTHON) -m pytest -q tests $(PYTEST_ARGS)

# The suites that have kernel engines; host-only tests (core differential,
# tools, bench) are not repeated under emulation.
VM_TESTS = $(wildcard tests/test_echo.py tests/test_kernel_modules.py tests/http \
	tests/test_khttpd_kernel.py tests/test_kcm.py)
check-vm: user modules
	scripts/vm --kernel $(KERNEL) --timeout 2400 -- env KTCP_ENGINES=kernel $(CURDIR)/$(PYTHON) -m pytest -q -rs $(VM_TESTS) $(PYTEST_ARGS)

# make check-debug: the same kernel suites on the debug kernel (KASAN, KFENCE,
# lockdep, kmemleak...; scripts/debug-kernel builds it once, docs/reliability.md),
# after tests/kmod proves its detectors fail on purposeful faults. scripts/vm
# fails on any report in the guest's dmesg and on any kmemleak leak.
check-debug: user
	scripts/debug-kernel
	$(MAKE) modules kmod KERNEL=debug
	KTCP_DEBUG_SELFTEST=1 $(PYTHON) -m pytest -q tests/kmod
	scripts/vm --kernel debug --timeout 14400 -- env KTCP_ENGINES=kernel $(CURDIR)/$(PYTHON) -m pytest -q -rs $(VM_TESTS) $(PYTEST_ARGS)

# make run: serve over the VM with a port forwarded to the host's loopback.
run: deps all
	scripts/run

bench-echo: deps all
	scripts/vm --timeout 3000 -- scripts/bench-echo
bench-kcm: deps user
	scripts/vm --timeout 1800 -- user/kcm/experiment.sh

# make bench: every engine beside nginx, host then one VM boot, <= 15 min
# (bench-quick <= 3 min); results/<timestamp>/ (see BENCHMARKS.md).
.PHONY: bench-quick
bench: deps all
	$(PYTHON) tools/bench/bench.py --profile full
bench-quick: deps all
	$(PYTHON) tools/bench/bench.py --profile quick

# clang-format pinned in requirements.txt; the file list needs no git. Each
# tree's nearest .clang-format applies (kernel/ has the kernel's style).
CLANG_FORMAT = .venv/bin/clang-format
C_SOURCES = $(shell find core kernel user tools tests -name '*.[ch]' -not -name '*.mod.c' | sort)
fmt:
	$(CLANG_FORMAT) -i $(C_SOURCES)
fmt-check:
	@$(CLANG_FORMAT) --dry-run --Werror $(C_SOURCES) && echo "format ok"

clean:
	rm -rf $(BUILD)
	find kernel \( -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' \) -delete 2>/dev/null || true
