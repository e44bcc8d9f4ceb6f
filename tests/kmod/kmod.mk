# tests/kmod/kmod.mk — ktcp_fault.ko, the module that proves the kernels'
# detectors fire (tests/kmod/test_detectors.py). Built by make check-debug
# (make kmod KERNEL=debug) and make check-detectors (the release kernel
# booted with slub_debug), into build/kmod/<release>/.
KMOD_DIR := $(BUILD)/kmod/$(KVER)

.PHONY: kmod
kmod:
	@test -d "$(KDIR)" || { echo "no kernel build tree at $(KDIR) (KERNEL=$(KERNEL))" >&2; exit 1; }
	@mkdir -p $(KMOD_DIR) && cp -sf $(CURDIR)/tests/kmod/Kbuild $(CURDIR)/tests/kmod/ktcp_fault.c $(KMOD_DIR)/
	$(MAKE) -C $(KDIR) M=$(CURDIR)/$(KMOD_DIR) W=1 KCFLAGS=-Werror modules
