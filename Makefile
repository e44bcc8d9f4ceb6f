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
# The kernel the VM boots; modules are built against its headers, not uname -r.
KVER     ?= $(shell scripts/kver)
KDIR     ?= /lib/modules/$(KVER)/build

BINS        :=   # user-space programs, each $(BUILD)/<name>
UNIT_TESTS  :=   # C test programs run by make check, each exits non-zero on failure

.PHONY: all modules user check check-unit check-host check-vm run bench bench-quick bench-echo bench-kcm fmt fmt-check deps clean
all: user modules

include $(sort $(wildcard core/*.mk user/*/*.mk tools/*.mk tests/*/*.mk))

user: $(BINS) $(UNIT_TESTS)

$(BUILD):
	mkdir -p $@

modules:
	@test -d $(KDIR) || { echo "no kernel headers at $(KDIR): run scripts/deps" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR)/kernel modules

deps:
	scripts/deps

# make check: set up what is missing, build, run the user-space tests on the
# host, then boot the VM once and run the kernel tests inside it.
check: deps
	$(MAKE) fmt-check
	$(MAKE) all
	$(MAKE) check-unit
	$(MAKE) check-host
	$(MAKE) check-vm

check-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

check-host: user
	$(PYTHON) -m pytest -q tests $(PYTEST_ARGS)

# The suites that have kernel engines; host-only tests (core differential,
# tools, bench) are not repeated under emulation.
VM_TESTS = $(wildcard tests/test_echo.py tests/test_kernel_modules.py tests/http \
	tests/test_khttpd_kernel.py tests/test_kcm.py)
check-vm: all
	scripts/vm --timeout 2400 -- env KTCP_ENGINES=kernel $(CURDIR)/$(PYTHON) -m pytest -q -rs $(VM_TESTS) $(PYTEST_ARGS)

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

C_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
fmt:
	clang-format -i $(C_SOURCES)
fmt-check:
	@clang-format --dry-run --Werror $(C_SOURCES) && echo "format ok"

clean:
	rm -rf $(BUILD)
	$(MAKE) -C $(KDIR) M=$(CURDIR)/kernel clean 2>/dev/null || true
