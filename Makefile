# Builds the camstream firmware with Buildroot, on any connected Linux
# machine: `make rpi4_64` downloads the pinned Buildroot release, builds and
# leaves output/<board>/images/sdcard.img with sdcard.img.sha256 beside it.
# Boards: rpi3_64 rpi4_64 rpi5 rpizero2w_64 qemu_aarch64.
# BR2_DL_DIR (downloads, default output/dl) and BR2_CCACHE_DIR (compiler
# cache, default ~/.buildroot-ccache) can be shared between builds.
# See docs/BUILDROOT.md.

# The 2026.02 long-term release: its Rust (1.88) is camstream's minimum. The
# sha256 is the release's signed manifest's (buildroot-2026.02.3.tar.xz.sign);
# the commit is the tag's in Buildroot's git (trees made with `git archive`).
BUILDROOT_VERSION = 2026.02.3
BUILDROOT_SHA256 = 5a59e7501b0b4ec52c41f4bfa79412320e0b37eae5f719605a258e8d0c6fc7fb
BUILDROOT_COMMIT = 679b9ead7620bbf193620d1ebf56f53c1764d37a
BUILDROOT_URL = https://buildroot.org/downloads/buildroot-$(BUILDROOT_VERSION).tar.xz
BOARDS = rpi3_64 rpi4_64 rpi5 rpizero2w_64 qemu_aarch64

OUTPUT = $(CURDIR)/output
BR2_DL_DIR ?= $(OUTPUT)/dl
export BR2_DL_DIR
BUILDROOT = $(OUTPUT)/buildroot-$(BUILDROOT_VERSION)
BR_MAKE = $(MAKE) -C $(BUILDROOT) BR2_EXTERNAL=$(CURDIR)/buildroot-external

.PHONY: help $(BOARDS) $(addsuffix -menuconfig,$(BOARDS)) buildroot release

help:
	@echo "usage: make BOARD   (BOARD: $(BOARDS))"
	@echo "       make BOARD-menuconfig"
	@echo "       make release BOARD=BOARD   (the image, then output/release/VERSION/: scripts/release)"
	@echo "The image: output/BOARD/images/sdcard.img (+ .sha256). See docs/BUILDROOT.md."

# Buildroot's tree: the release with this tree's changes to Buildroot
# itself (scripts/buildroot-patch).
buildroot: $(BUILDROOT)/Makefile
	$(CURDIR)/scripts/buildroot-patch $(BUILDROOT)

# The release tarball, checked against the recorded sha256 before use.
$(BUILDROOT)/Makefile:
	mkdir -p $(BR2_DL_DIR) $(OUTPUT)
	if [ ! -f $(BR2_DL_DIR)/buildroot-$(BUILDROOT_VERSION).tar.xz ]; then \
		wget -nv -O $(BR2_DL_DIR)/buildroot-$(BUILDROOT_VERSION).tar.xz.part $(BUILDROOT_URL) && \
		mv $(BR2_DL_DIR)/buildroot-$(BUILDROOT_VERSION).tar.xz.part \
			$(BR2_DL_DIR)/buildroot-$(BUILDROOT_VERSION).tar.xz; \
	fi
	echo "$(BUILDROOT_SHA256)  $(BR2_DL_DIR)/buildroot-$(BUILDROOT_VERSION).tar.xz" | sha256sum -c -
	tar -C $(OUTPUT) -xf $(BR2_DL_DIR)/buildroot-$(BUILDROOT_VERSION).tar.xz
	touch $@

$(BOARDS): %: buildroot
	test -f $(OUTPUT)/$*/.config || $(BR_MAKE) O=$(OUTPUT)/$* camstream_$*_defconfig
	$(BR_MAKE) O=$(OUTPUT)/$*
	@echo "Image: $(OUTPUT)/$*/images/sdcard.img"

$(addsuffix -menuconfig,$(BOARDS)): %-menuconfig: buildroot
	test -f $(OUTPUT)/$*/.config || $(BR_MAKE) O=$(OUTPUT)/$* camstream_$*_defconfig
	$(BR_MAKE) O=$(OUTPUT)/$* menuconfig

# What a person downloads and flashes: the board's image built, then
# compressed, its block map, the update bundle, Imager's os_list.json and
# SHA256SUMS in output/release/VERSION (scripts/release).
release:
	test -n "$(BOARD)" || { echo "usage: make release BOARD=BOARD ($(BOARDS))" >&2; exit 2; }
	$(MAKE) $(BOARD)
	$(CURDIR)/scripts/release --images $(OUTPUT)/$(BOARD)/images $(BOARD)
