################################################################################
#
# camstream
#
################################################################################

# The source is this tree itself; the version is the crate's (app/Cargo.toml).
CAMSTREAM_VERSION = 0.2.0
CAMSTREAM_SITE = $(BR2_EXTERNAL_CAMSTREAM_PATH)/..
CAMSTREAM_SITE_METHOD = local
CAMSTREAM_SUBDIR = app/camstream
# OpenH264 (the openh264-sys2 crate's copy of it) is compiled in.
CAMSTREAM_LICENSE = MIT, BSD-2-Clause (OpenH264)
CAMSTREAM_LICENSE_FILES = LICENSE
# OpenSSL: WebRTC's DTLS and SRTP (str0m links it through openssl-sys,
# which asks Buildroot's pkg-config for it).
CAMSTREAM_DEPENDENCIES = jpeg host-pkgconf openssl
CAMSTREAM_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude=/output --exclude=/app/target --exclude=/app/fuzz

# A local source skips the download step, where Buildroot vendors the crates
# of cargo packages; do the same here, before the build: cargo vendor
# fetches the crates Cargo.lock pins (checking the sha256 it records) into
# the download directory's cargo home once, and writes the configuration
# that makes the build use them offline (the lock, as Buildroot's, guards the
# shared cargo home). Before each build, not once at configure: after a
# change to Cargo.lock, `make camstream-rebuild` must vendor the new crates.
# See docs/BUILDROOT.md.
define CAMSTREAM_VENDOR_CRATES
	mkdir -p $(BR_CARGO_HOME)
	$(TARGET_MAKE_ENV) CARGO_HOME=$(BR_CARGO_HOME) flock $(BR_CARGO_HOME)/.br-lock \
		sh $(CAMSTREAM_PKGDIR)/vendor-crates $(@D)/app
endef
CAMSTREAM_PRE_BUILD_HOOKS += CAMSTREAM_VENDOR_CRATES

# turbojpeg-sys links the libjpeg-turbo built here (its Rust bindings are
# pregenerated); camstream's measured release profile (LTO, one codegen
# unit, -O3) wins over the generic one.
CAMSTREAM_CARGO_ENV = \
	TURBOJPEG_SOURCE=explicit \
	TURBOJPEG_LIB_DIR=$(STAGING_DIR)/usr/lib \
	TURBOJPEG_DYNAMIC=1 \
	CARGO_PROFILE_RELEASE_LTO=true \
	CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
	CARGO_PROFILE_RELEASE_OPT_LEVEL=3 \
	PKG_CONFIG_ALLOW_CROSS=1

# The crate's features, each where the image has what it links: H.264
# (OpenH264, built in) and WebRTC always.
CAMSTREAM_FEATURES = h264 webrtc

# The libcamera frame source (the Pi's Camera Modules) when the image has
# libcamera: build.rs compiles its C++ shim with the target's CXX and asks
# Buildroot's pkg-config (which knows the staging directory) what to link.
ifeq ($(BR2_PACKAGE_LIBCAMERA),y)
CAMSTREAM_DEPENDENCIES += libcamera
CAMSTREAM_FEATURES += libcamera
endif

# Sound from a sound card (alsa-sys asks pkg-config for alsa-lib).
ifeq ($(BR2_PACKAGE_ALSA_LIB),y)
CAMSTREAM_DEPENDENCIES += alsa-lib
CAMSTREAM_FEATURES += alsa
endif

# Opus for the sound.
ifeq ($(BR2_PACKAGE_OPUS),y)
CAMSTREAM_DEPENDENCIES += opus
CAMSTREAM_FEATURES += opus
endif

# cargo install builds again: it is given the same features, or it would
# install another camstream.
CAMSTREAM_CARGO_BUILD_OPTS += --no-default-features \
	--features $(subst $(space),$(comma),$(strip $(CAMSTREAM_FEATURES)))
CAMSTREAM_CARGO_INSTALL_OPTS += --no-default-features \
	--features $(subst $(space),$(comma),$(strip $(CAMSTREAM_FEATURES)))

# The daemon's own user: started as root, camstream binds its ports, opens
# the camera and becomes this user (user = "camstream" in its config);
# groups video and audio give it the camera's and the sound card's nodes
# mdev creates.
define CAMSTREAM_USERS
	camstream -1 camstream -1 * - - video,audio camstream daemon
endef

define CAMSTREAM_INSTALL_INIT_SYSV
	$(INSTALL) -D -m 0755 $(@D)/rootfs-overlay/etc/init.d/S50camstream \
		$(TARGET_DIR)/etc/init.d/S50camstream
endef

define CAMSTREAM_INSTALL_CONFIG
	$(INSTALL) -D -m 0644 $(@D)/rootfs-overlay/etc/camstream.toml \
		$(TARGET_DIR)/etc/camstream.toml
endef
CAMSTREAM_POST_INSTALL_TARGET_HOOKS += CAMSTREAM_INSTALL_CONFIG

$(eval $(cargo-package))
