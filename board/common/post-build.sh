#!/bin/sh
# Buildroot post-build script of every camstream image; scripts/image runs
# it too, for the QEMU image from Debian's packages.
# usage: post-build.sh TARGET_DIR [VARIANT]
set -eu
target=$1 variant=${2:-Buildroot}

# Our S01syslogd starts klogd too; a seed file kept by S*seedrng/S*urandom
# would sit on the read-only root (the boards have a hardware RNG).
rm -f "$target/etc/init.d/S02klogd" "$target/etc/init.d/S01seedrng" \
    "$target/etc/init.d/S20seedrng" "$target/etc/init.d/S20urandom"

# The data partition's mount point.
mkdir -p "$target/data"

# The root filesystem says which camstream it carries.
version=$(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo unknown)
cat >"$target/etc/os-release" <<OS
NAME=camstream
ID=camstream
VERSION_ID=$version
PRETTY_NAME="camstream $version"
VARIANT="$variant"
OS
