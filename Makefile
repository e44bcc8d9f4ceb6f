# ktcp — one command per habit: make, make check, make run, make bench, make fmt.
#
# Non-recursive: every part adds itself through a fragment (core/core.mk,
# user/*/*.mk, tools/*.mk, tests/*/*.mk) that appends to the variables below.

CC       ?= gcc
CFLAGS   ?= -O2 -g
# Link-time optimisation: core's planner and parser, the runtime and the
# engine are inlined across files (about 290 fewer instructions per
# keep-alive request, BENCHMARKS.md). Thread-locals stay behind noinline
# accessors (user/rt/rt.h), which LTO keeps out of line. LTO= turns it
# off.
LTO      ?= -flto=auto
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror -pthread -D_GNU_SOURCE -Icore $(LTO)
LDFLAGS  += -pthread $(LTO)
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
# Objects of each kernel apart: a tree of links to the sources of kernel/ and
# core/ per release (links to sources only, so Kbuild never writes through one).
MODDIR   := $(BUILD)/modules/$(KVER)

BINS        :=   # user-space programs, each $(BUILD)/<name>
UNIT_TESTS  :=   # C test programs run by make check, each exits non-zero on failure

.PHONY: all modules user check check-plan check-kernels check-unit check-layers check-host check-vm check-debug check-detectors run bench bench-quick bench-echo bench-kcm fmt fmt-check checkpatch deps clean
all: user modules

# The version --version prints: VERSION plus git describe, regenerated only
# when it changes, in one object every binary links. Expanded only when that
# object is built (git describe over 9p in the VM is slow).
KTCP_VERSION      = $(shell cat VERSION)$(shell d=$$(git describe --always --dirty 2>/dev/null) && echo " ($$d)")
KTCP_VERSION_OBJ := $(BUILD)/gen/version.o
$(BUILD)/gen/version.c: FORCE
	@mkdir -p $(@D)
	@printf '#include <stdio.h>\n#include "ktcp-version.h"\nconst char ktcp_version[] = "%s";\nvoid ktcp_print_version(const char *prog) { printf("%%s %%s\\n", prog, ktcp_version); }\n' '$(KTCP_VERSION)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(KTCP_VERSION_OBJ): $(BUILD)/gen/version.c user/common/ktcp-version.h $(FLAGS_STAMP)
	$(CC) $(CFLAGS) -Iuser/common -c -o $@ $<
.PHONY: FORCE
FORCE:

# The compiler and flags the objects were built with, rewritten only when
# they change: every object depends on it, so `make LTO=` or another CC or
# CFLAGS rebuilds what was built otherwise (not only what changed since).
FLAGS_STAMP := $(BUILD)/gen/flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(CFLAGS) $(LDFLAGS)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

# The libraries' fragments first (core/, the user runtime user/rt, the
# helpers of user/common): the programs' fragments name what they define.
LIB_MKS := $(sort $(wildcard core/*.mk user/rt/*.mk user/common/*.mk user/tls/*.mk))
include $(LIB_MKS) $(filter-out $(LIB_MKS),$(sort $(wildcard user/*/*.mk tools/*.mk tests/*/*.mk)))

user: $(BINS) $(UNIT_TESTS)

$(BUILD):
	mkdir -p $@

# W=1 and every warning an error, on every kernel.
modules:
	@test -n "$(KVER)" || { scripts/kernels release $(KERNEL); exit 1; }
	@test -d "$(KDIR)" || { echo "no kernel headers at $(KDIR): for KERNEL=host install your distribution's headers for $(KVER); else run scripts/deps" >&2; exit 1; }
	@mkdir -p $(MODDIR) && find $(MODDIR) -xtype l -delete && \
	for f in $$(find kernel core \( -name '*.[ch]' -o -name Kbuild \) -not -name '*.mod.c'); do \
		mkdir -p $(MODDIR)/$$(dirname $$f) && ln -sfn $(CURDIR)/$$f $(MODDIR)/$$f || exit 1; done
	$(MAKE) -C $(KDIR) M=$(CURDIR)/$(MODDIR)/kernel W=1 KCFLAGS=-Werror modules

deps:
	scripts/deps

# make check: set up what is missing, build, run the user-space tests on the
# host, the portable runtime's (check-portable, user/rt/rt.mk: the ucontext
# switch's build and the aarch64 switch under qemu), then boot the VM once per kernel and run the kernel tests inside it.
# make check CHECK_DEBUG=1 (with the debug kernel built: a 6.12 of the same
# version with KASAN, lockdep, kmemleak...) runs 6.12's kernel suites on it
# (make check-debug, about an hour more under emulation), and the release
# 6.12 boot runs only what a release kernel alone can: the slab
# measurements, the DKMS package and the BTF trace (pytest -m
# release_kernel). Without CHECK_DEBUG=1 every suite runs on the release
# kernels, whatever is cached, so make check takes the same time on every
# machine, and check says how to run check-debug.
DEBUG_BASE = 6.12
CHECK_DEBUG ?= 0
check: deps
	$(MAKE) fmt-check
	$(MAKE) checkpatch
	$(MAKE) user
	$(MAKE) check-unit
	$(MAKE) check-layers
	$(MAKE) check-host
	$(MAKE) check-portable
	$(MAKE) check-detectors KERNEL=6.1
	$(MAKE) check-kernels

# make check-kernels: make check's VM boots alone, in the order make
# check-plan prints (scripts/check-plan).
CHECK_PLAN = scripts/check-plan $(CHECK_DEBUG) $(DEBUG_BASE) $(KERNELS)
check-plan:
	@$(CHECK_PLAN)
check-kernels:
	@set -e; plan=$$($(CHECK_PLAN)); \
	for k in $$plan; do \
		case $$k in \
		debug) $(MAKE) check-debug ;; \
		release:*) $(MAKE) check-vm KERNEL=$${k#release:} PYTEST_ARGS="-m release_kernel $(PYTEST_ARGS)" ;; \
		*) $(MAKE) check-vm KERNEL=$$k ;; \
		esac; \
	done; \
	[ "$(CHECK_DEBUG)" = 1 ] || echo "check: check-debug not run (make check CHECK_DEBUG=1, or make check-debug alone; docs/reliability.md)"

check-unit: $(UNIT_TESTS)
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

# No import circle between the files of a component, and a runtime that
# uses nothing above it: read from the objects (scripts/check-layers), the
# kernel modules' too when built.
check-layers: user
	$(PYTHON) scripts/check-layers

check-host: user
	$(PYTHON) -m pytest -q tests $(PYTEST_ARGS)

# The suites that have kernel engines; host-only tests (core differential,
# tools, bench) are not repeated under emulation.
VM_TESTS = $(wildcard tests/test_echo.py tests/test_kernel_modules.py tests/test_drop_tcp_socket.py tests/http \
	tests/test_khttpd_kernel.py tests/test_khttpd_tls.py tests/test_defer_accept.py tests/test_kcm.py tests/test_conn_per_ip.py tests/test_access.py tests/test_server_flags.py tests/test_dkms.py tests/test_scaleout.py)
# VM_HTTPS=1 (the default): also the HTTP suite's transport files over
# kTLS (tests/http/conftest.py's KTLS_FILES; 6.12: khttpd unbound behind
# ktcp-tlsd and ktcp-httpd epoll; 6.1: khttpd kthread and mn; 8 to 9 min
# a kernel with three guests on the host, docs/tls.md). VM_HTTPS=0 skips it.
VM_HTTPS ?= 1
check-vm: user modules dkms-prebuild
	scripts/vm --kernel $(KERNEL) --timeout 2400 -- env KTCP_ENGINES=kernel KTCP_VM_HTTPS=$(VM_HTTPS) $(CURDIR)/$(PYTHON) -m pytest -q -rs $(VM_TESTS) $(PYTEST_ARGS)

# make check-detectors: the release kernel's own memory detectors, which
# scripts/vm switches on at boot (slub_debug=FZPU, page_poison=1, KFENCE on
# 6.12), fail a run on purposeful slab faults of tests/kmod/ktcp_fault.ko
# (a write after free, a double free): one boot, run by make check on 6.1.
check-detectors:
	$(MAKE) kmod KERNEL=$(KERNEL)
	KTCP_RELEASE_SELFTEST=$(KERNEL) $(PYTHON) -m pytest -q -s tests/kmod/test_release_detectors.py

# make check-debug: every kernel suite on the debug kernel (KASAN, KFENCE,
# lockdep, kmemleak...; scripts/debug-kernel builds it once,
# docs/reliability.md), after tests/kmod proves its detectors fail on
# purposeful faults (one boot), then the soak for 60 s with 20 reloads.
# scripts/vm fails on any report in the guest's dmesg and on any kmemleak
# leak. The tests marked release_kernel (slab figures, which KASAN's
# redzones and quarantine change, and the DKMS package) are left to the
# release kernels. About 35 min under emulation on two cores.
DEBUG_TESTS = $(VM_TESTS) tests/soak
DEBUG_SOAK_SECONDS ?= 60
DEBUG_TIMEOUT ?= 3600
check-debug: user
	scripts/debug-kernel
	$(MAKE) modules kmod KERNEL=debug
	KTCP_DEBUG_SELFTEST=1 $(PYTHON) -m pytest -q tests/kmod
	scripts/vm --kernel debug --timeout $(DEBUG_TIMEOUT) -- env KTCP_ENGINES=kernel KTCP_VM_HTTPS=$(VM_HTTPS) KTCP_SOAK=1 KTCP_SOAK_SECONDS=$(DEBUG_SOAK_SECONDS) $(CURDIR)/$(PYTHON) -m pytest -q -rs -m "not release_kernel" $(DEBUG_TESTS) $(PYTEST_ARGS)

# make soak: the bounded soak alone (tests/soak; KTCP_SOAK_SECONDS, default
# 120, at most 600, plus 20 reloads of both modules) on KERNEL; figures in
# build/soak/.
.PHONY: soak
soak: user modules
	scripts/vm --kernel $(KERNEL) --timeout 1500 -- env KTCP_ENGINES=kernel KTCP_SOAK=1 KTCP_SOAK_SECONDS=$(or $(KTCP_SOAK_SECONDS),120) $(CURDIR)/$(PYTHON) -m pytest -q -s -rs tests/soak $(PYTEST_ARGS)

# make run: serve over the VM with a port forwarded to the host's loopback.
# What needs the kernels is built by a make started after scripts/deps:
# this one read KVER before deps ran, when a fresh machine has no kernel
# cached yet and a machine whose cache deps has just moved to Debian's
# newer ABI has the old one.
run: deps
	$(MAKE) all
	scripts/run

# make bench-echo, make bench-kcm: the echo bench (kecho.ko in each mode and
# ktcp-echo) and the KCM experiment, profiles of tools/bench that boot the VM
# once each; results/<timestamp>-echo/, results/<timestamp>-kcm/.
bench-echo: deps
	$(MAKE) all
	$(PYTHON) tools/bench/bench.py --profile echo
bench-kcm: deps user
	$(PYTHON) tools/bench/bench.py --profile kcm

# make bench: every engine beside nginx, host then one VM boot, <= 15 min
# (bench-quick <= 3 min); results/<timestamp>/ (see BENCHMARKS.md).
# BENCH_FLAGS passes options on (e.g. --no-vm for the host phase alone).
# make bench-publish RESULTS=results/<timestamp>: that run's figures to
# docs/bench/bench-<env>.json and its plots to docs/bench/, and the tables
# of BENCHMARKS.md regenerated from them.
# make bench-https: the HTTPS points alone (host, then one VM boot: KERNEL
# picks the guest), published as docs/bench/https-<env>.json.
.PHONY: bench-quick bench-publish bench-https
# (all in a make of its own after deps, as for make run)
bench: deps
	$(MAKE) all
	$(PYTHON) tools/bench/bench.py --profile full $(BENCH_FLAGS)
bench-quick: deps
	$(MAKE) all
	$(PYTHON) tools/bench/bench.py --profile quick $(BENCH_FLAGS)
bench-https: deps
	$(MAKE) all
	$(PYTHON) tools/bench/bench.py --profile https $(BENCH_FLAGS)
bench-publish:
	@test -n "$(RESULTS)" || { echo "make bench-publish RESULTS=results/<timestamp>"; exit 2; }
	$(PYTHON) tools/bench/bench.py --publish $(RESULTS)

# make bench-floor: every HTTP engine against tools/floor.c and nginx,
# alternating rounds in a network namespace of its own (tools/bench/floor_ab.py,
# ~3 min); make bench-floor-publish RESULTS=results/floor-<ts> fills
# BENCHMARKS.md's floor tables from it.
.PHONY: bench-floor bench-floor-publish
bench-floor: deps user
	$(PYTHON) tools/bench/floor_ab.py $(BENCH_FLAGS)
bench-floor-publish:
	@test -n "$(RESULTS)" || { echo "make bench-floor-publish RESULTS=results/floor-<timestamp>"; exit 2; }
	$(PYTHON) tools/bench/floor_ab.py --publish $(RESULTS)

# make bench-cost: user-space instructions (callgrind) and system calls
# (strace) per request, counted for each engine and workload on the host,
# <= 15 min; results/<timestamp>/cost.{json,md,png} (BENCHMARKS.md).
.PHONY: bench-cost
bench-cost: deps user
	$(PYTHON) tools/bench/cost.py

# make checkpatch: the kernel's checkpatch.pl --strict over kernel/ (from
# Debian's linux-source-6.1, cached once); a remaining report is justified
# in place (scripts/checkpatch).
.PHONY: checkpatch
checkpatch:
	scripts/checkpatch

# clang-format pinned in requirements.txt; the file list needs no git. Each
# tree's nearest .clang-format applies (kernel/ has the kernel's style).
CLANG_FORMAT = .venv/bin/clang-format
C_SOURCES = $(shell find core kernel user tools tests -name '*.[ch]' -not -name '*.mod.c' | sort)
fmt:
	$(CLANG_FORMAT) -i $(C_SOURCES)
fmt-check:
	@$(CLANG_FORMAT) --dry-run --Werror $(C_SOURCES) && echo "format ok"
# DKMS: the three modules as one package, ktcp/<VERSION>, for the running
# kernel (DKMS_KERNEL=<release> for another installed one). Needs root.
DKMS_VERSION := $(shell cat VERSION)
DKMS_SRC      = $(DESTDIR)/usr/src/ktcp-$(DKMS_VERSION)
DKMS_KERNEL  ?= $(shell uname -r)
.PHONY: dkms-source dkms-install dkms-remove
dkms-source:
	rm -rf $(DKMS_SRC) && mkdir -p $(DKMS_SRC)
	cp -r kernel core $(DKMS_SRC)/
	find $(DKMS_SRC) \( -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' \) -delete
	sed 's/@VERSION@/$(DKMS_VERSION)/' dist/dkms/dkms.conf >$(DKMS_SRC)/dkms.conf
dkms-install: dkms-source
	dkms add ktcp/$(DKMS_VERSION)
	dkms build ktcp/$(DKMS_VERSION) -k $(DKMS_KERNEL)
	dkms install ktcp/$(DKMS_VERSION) -k $(DKMS_KERNEL)
dkms-remove:
	-dkms remove ktcp/$(DKMS_VERSION) --all
	rm -rf $(DKMS_SRC)
# For the VM's DKMS test: Debian's dkms builds the package on the host for
# the VM kernel (KERNEL) against its cached headers, in a tree of its own
# (under emulation the same build takes 12-20 minutes). The guest adds the
# package, takes these built modules, installs, loads and removes them.
DKMS_PREBUILT = $(BUILD)/dkms/$(KVER)
.PHONY: dkms-prebuild
dkms-prebuild:
	rm -rf $(DKMS_PREBUILT) && mkdir -p $(DKMS_PREBUILT)/src $(DKMS_PREBUILT)/tree
	$(MAKE) --no-print-directory dkms-source DKMS_SRC=$(CURDIR)/$(DKMS_PREBUILT)/src/ktcp-$(DKMS_VERSION)
	dkms add ktcp/$(DKMS_VERSION) --sourcetree $(CURDIR)/$(DKMS_PREBUILT)/src --dkmstree $(CURDIR)/$(DKMS_PREBUILT)/tree >/dev/null
	dkms build ktcp/$(DKMS_VERSION) -k $(KVER) --kernelsourcedir $(KDIR) \
		--sourcetree $(CURDIR)/$(DKMS_PREBUILT)/src --dkmstree $(CURDIR)/$(DKMS_PREBUILT)/tree

# make install: the user-space servers and tools, their man pages (help2man
# from --help and --version), the systemd units, ktcp-httpd's settings file
# (kept when one is there) and logrotate file, and the modprobe.d example.
# PREFIX (default /usr/local) and DESTDIR as usual; the modules install with
# DKMS (make dkms-install).
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
# SYSUSERS=no: install the sysusers.d file without running systemd-sysusers
SYSUSERS ?= yes
DOCDIR  ?= $(PREFIX)/share/doc/ktcp
# /etc for PREFIX=/usr, else PREFIX/etc
SYSCONFDIR ?= $(patsubst /usr/etc,/etc,$(PREFIX)/etc)
INSTALL_BINS := ktcp-httpd ktcp-echo ktcp-kcm-server ktcp-msg-server ktcp-tlsd htstress echo-bench lat msg-bench
INSTALL_UNITS := ktcp-httpd.service ktcp-httpd.socket ktcp-khttpd.service ktcp-tlsd.service
MAN_NAME_ktcp-httpd      := static HTTP/1.1 server (threads, epoll or M:N coroutines)
MAN_NAME_ktcp-echo       := TCP echo server, the user-space twin of kecho.ko
MAN_NAME_ktcp-kcm-server := length-prefixed message server on AF_KCM
MAN_NAME_ktcp-msg-server := length-prefixed message server on plain TCP
MAN_NAME_ktcp-tlsd       := TLS agent handing kernel-TLS sockets to khttpd
MAN_NAME_htstress        := HTTP load generator
MAN_NAME_echo-bench      := echo server load generator with byte-for-byte checks
MAN_NAME_lat             := round-trip latency floors of pipes, sockets and echo servers
MAN_NAME_msg-bench       := load generator for the length-prefixed message servers
MANPAGES := $(INSTALL_BINS:%=$(BUILD)/man/%.1)
.PHONY: man install uninstall
man: $(MANPAGES)
$(BUILD)/man/%.1: $(BUILD)/%
	@mkdir -p $(@D)
	help2man --no-info --no-discard-stderr --name='$(MAN_NAME_$*)' --output=$@ ./$<
install: user man
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)/examples/modprobe.d \
		$(DESTDIR)$(SYSCONFDIR)/logrotate.d $(DESTDIR)$(SYSUSERSDIR)
	install -m 0755 $(INSTALL_BINS:%=$(BUILD)/%) $(DESTDIR)$(BINDIR)/
	install -m 0644 $(MANPAGES) $(DESTDIR)$(MANDIR)/man1/
	for u in $(INSTALL_UNITS); do \
		sed -e 's,@BINDIR@,$(BINDIR),g' -e 's,@DOCDIR@,$(DOCDIR),g' -e 's,@SYSCONFDIR@,$(SYSCONFDIR),g' \
			-e 's,@SYSUSERSDIR@,$(SYSUSERSDIR),g' \
			dist/systemd/$$u >$(DESTDIR)$(UNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	install -m 0644 dist/modprobe.d/khttpd.conf $(DESTDIR)$(DOCDIR)/examples/modprobe.d/
	[ -e $(DESTDIR)$(SYSCONFDIR)/ktcp-httpd.conf ] || install -m 0644 dist/ktcp-httpd.conf $(DESTDIR)$(SYSCONFDIR)/
	install -m 0644 dist/logrotate/ktcp-httpd $(DESTDIR)$(SYSCONFDIR)/logrotate.d/
	install -m 0644 dist/sysusers.d/ktcp-httpd.conf $(DESTDIR)$(SYSUSERSDIR)/
	if [ -z "$(DESTDIR)" ] && [ "$(SYSUSERS)" = yes ] && [ "$$(id -u)" = 0 ] && \
		command -v systemd-sysusers >/dev/null; then systemd-sysusers $(SYSUSERSDIR)/ktcp-httpd.conf; fi
	install -m 0644 README.md LICENSE $(DESTDIR)$(DOCDIR)/
uninstall:
	rm -f $(INSTALL_BINS:%=$(DESTDIR)$(BINDIR)/%) $(INSTALL_BINS:%=$(DESTDIR)$(MANDIR)/man1/%.1) \
		$(INSTALL_UNITS:%=$(DESTDIR)$(UNITDIR)/%) $(DESTDIR)$(SYSCONFDIR)/logrotate.d/ktcp-httpd \
		$(DESTDIR)$(SYSUSERSDIR)/ktcp-httpd.conf
	! cmp -s dist/ktcp-httpd.conf $(DESTDIR)$(SYSCONFDIR)/ktcp-httpd.conf || rm -f $(DESTDIR)$(SYSCONFDIR)/ktcp-httpd.conf
	rm -rf $(DESTDIR)$(DOCDIR)

clean:
	rm -rf $(BUILD)
	find kernel \( -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' \) -delete 2>/dev/null || true
