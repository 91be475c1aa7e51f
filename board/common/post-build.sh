#!/bin/sh
# Buildroot post-build script of every camstream image; scripts/image runs
# it too, for the QEMU image from Debian's packages.
# usage: post-build.sh TARGET_DIR BOARD [VARIANT]
# BOARD names the defconfig (rpi4_64, qemu_aarch64, ...): RAUC's compatible
# string is camstream-BOARD. The update keyring is $CAMSTREAM_KEYRING (a
# PEM certificate file) or else the development certificate scripts/dev-key
# makes under output/keys (docs/UPDATE.md).
set -eu
target=$1 board=${2:?usage: post-build.sh TARGET_DIR BOARD [VARIANT]} variant=${3:-Buildroot}
here=$(cd "$(dirname "$0")" && pwd)

# A seed file kept by S*seedrng/S*urandom would sit on the read-only root
# (the boards have a hardware RNG).
rm -f "$target/etc/init.d/S01seedrng" "$target/etc/init.d/S20seedrng" "$target/etc/init.d/S20urandom"

# Mount points: the data partition, the boot partition (U-Boot's A/B state).
mkdir -p "$target/data" "$target/boot/firmware"
# root's home as Buildroot's skeleton has it (the overlay brings .ssh, a
# link to the data partition, and with it the directory's mode).
chmod 0700 "$target/root"
# Our S40network (ifplugd per interface, hotplug) replaces BusyBox's S41ifplugd.
rm -f "$target/etc/init.d/S41ifplugd"

# The root filesystem says which camstream it carries: the version of the
# tree's files (scripts/version), and the commit it was built from where
# there is one (BUILD_ID).
version=$(sh "$here/../../scripts/version")
build_id=$(git -C "$here" describe --always --dirty --exclude '*' 2>/dev/null) || build_id=""
{
    echo "NAME=camstream"
    echo "ID=camstream"
    echo "VERSION_ID=$version"
    echo "PRETTY_NAME=\"camstream $version\""
    echo "VARIANT=\"$variant\""
    [ -z "$build_id" ] || echo "BUILD_ID=$build_id"
} >"$target/etc/os-release"

# RAUC: the slots of this board's disk, and the certificate bundles must be
# signed with.
case "$board" in
qemu*) disk=/dev/vda ;;
rpi*) disk=/dev/mmcblk0p ;;
*) echo "post-build.sh: unknown board $board" >&2 && exit 1 ;;
esac
mkdir -p "$target/etc/rauc"
sed -e "s|@BOARD@|$board|" -e "s|@DISK@|$disk|" "$here/rauc-system.conf.in" >"$target/etc/rauc/system.conf"
keyring=${CAMSTREAM_KEYRING:-$(sh "$here/../../scripts/dev-key")}
cp "$keyring" "$target/etc/rauc/keyring.pem"
chmod 644 "$target/etc/rauc/keyring.pem"

# What Buildroot's packages install and nothing on the camera runs or links
# (sizes and reasons: docs/IMAGE.md). Buildroot's images only: the image
# from Debian's packages is pruned by scripts/image's own package list.
if [ "$variant" = Buildroot ]; then (
    cd "$target"
    # libjpeg-turbo's libjpeg: camstream codes JPEG through libturbojpeg,
    # which carries its own copy of the codec.
    rm -f usr/lib/libjpeg.so*
    # RAUC streams through NBD with libnl's core and generic netlink;
    # routing, netfilter, sockets' diagnostics and IPsec go unused.
    rm -f usr/lib/libnl-route-3.so* usr/lib/libnl-nf-3.so* \
        usr/lib/libnl-idiag-3.so* usr/lib/libnl-xfrm-3.so*
    # GLib's command-line tools and its introspection compiler (RAUC uses
    # GLib as a library), PCRE2's test and grep tools and POSIX wrapper.
    rm -f usr/bin/gio usr/bin/gio-querymodules usr/bin/gsettings \
        usr/bin/gapplication usr/bin/gdbus usr/bin/gresource \
        usr/bin/gi-compile-repository usr/bin/gi-decompile-typelib \
        usr/bin/gi-inspect-typelib usr/lib/libgirepository-2.0.so* \
        usr/bin/pcre2test usr/bin/pcre2grep usr/lib/libpcre2-posix.so*
    # ALSA's topology library and its server for remote sound cards.
    rm -f usr/lib/libatopology.so* usr/bin/aserver
    # Making squashfs images (bundles are made on the host); kmod's
    # library (the kmod tools carry their own); glibc's vector math, which
    # nothing is built with; GCC's pretty-printers for gdb.
    rm -f usr/bin/mksquashfs usr/bin/sqfstar usr/lib/libkmod.so* \
        lib/libmvec.so* usr/lib/libstdc++.so.*-gdb.py
) fi

# Kernel modules: the board's list and what those depend on; the rest of
# what the kernel's configuration builds stays off the image (the Pi's
# defconfigs build about 1,500). Buildroot's images only.
case "$board" in
rpi*) modules=$here/../raspberrypi/modules ;;
*) modules="" ;;
esac
if [ "$variant" = Buildroot ] && [ -n "$modules" ]; then
    for dir in "$target"/lib/modules/*/; do
        [ -f "$dir/modules.dep" ] || continue
        # modules.dep: "kernel/PATH/NAME.ko[.xz]: DEPENDENCY ..."; a name
        # is the file's without .ko, with - and _ alike as modprobe has it.
        awk -v listfile="$modules" '
            function name(path) { sub(/.*\//, "", path); sub(/\.ko.*/, "", path); gsub(/-/, "_", path); return path }
            BEGIN {
                while ((getline line < listfile) > 0) {
                    sub(/#.*/, "", line); gsub(/[ \t]/, "", line)
                    if (line != "") { gsub(/-/, "_", line); listed[line] = 1; keep[line] = 1 }
                }
            }
            { sub(/:$/, "", $1); n = name($1); path[n] = $1; deps[n] = ""
              for (i = 2; i <= NF; i++) deps[n] = deps[n] " " name($i) }
            END {
                do {
                    grew = 0
                    for (n in keep) if (n in deps) {
                        c = split(deps[n], d, " ")
                        for (i = 1; i <= c; i++) if (!(d[i] in keep)) { keep[d[i]] = 1; grew = 1 }
                    }
                } while (grew)
                for (n in path) if (!(n in keep)) print "drop " path[n]
                for (n in listed) if (!(n in path)) print "missing " n
            }' "$dir/modules.dep" | while read -r what file; do
            if [ "$what" = drop ]; then
                rm -f "$dir/$file"
            else
                echo "post-build.sh: $file (board/raspberrypi/modules) is not a module of this kernel: built in, or not built"
            fi
        done
        find "$dir/kernel" -type d -empty -delete
        depmod -a -b "$target" "$(basename "$dir")"
    done
fi

# The kernel, LZMA-compressed: U-Boot's booti unpacks it (boot.cmd), and in
# the slot it takes 3.0 MiB where EROFS's LZ4, which U-Boot reads, took 4.7
# (docs/IMAGE.md). BINARIES_DIR holds the one linux installed.
if [ "$variant" = Buildroot ] && [ -f "$target/boot/Image" ]; then
    xz --format=lzma -9 -c "${BINARIES_DIR:?}/Image" >"$target/boot/Image"
fi
