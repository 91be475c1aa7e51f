# Shared by the host scripts that build from source: camstream for this
# machine and, with Debian's cross Rust, for aarch64; RAUC (with libcurl),
# BusyBox and U-Boot for the images from Debian's parts, cross-built from
# Debian's sources. It uses scripts/lib.sh
# (need_packages, as_root, ensure_rust): source that first.
# The caller sets ROOT (the checkout). A function gives its result on
# standard output or as its exit status, and sets no variable of its
# caller's.
# shellcheck shell=sh

# Builds the release binary of camstream (linked against libturbojpeg).
build_camstream() {
    need_packages gcc libc6-dev pkg-config libturbojpeg0-dev libssl-dev libasound2-dev libopus-dev
    ensure_rust
    (cd "$ROOT/app" && cargo build --release --locked -p camstream)
}

# Cross-builds camstream for aarch64 with Debian's Rust (rustup cannot add
# targets offline), linking libjpeg-turbo statically and libcamera (with
# glibc) dynamically. Prints its path.
build_camstream_aarch64() {
    cargo_aarch64 build --release --locked -p camstream --features libcamera >&2
    echo "$ROOT/output/target/aarch64-unknown-linux-gnu/release/camstream"
}

# cargo ARGS... in app/ for aarch64 with Debian's cross Rust (output/target).
cargo_aarch64() {
    need_arm64
    # ca-certificates: cargo fetches crates over HTTPS (Debian's cargo only
    # recommends it). libcamera: the Pi's Camera Modules (and vimc in the
    # tests); linked dynamically, as its C++ library is. alsa-lib and
    # libopus: the sound (the alsa and opus features).
    need_packages rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu \
        g++-aarch64-linux-gnu libc6-dev:arm64 libturbojpeg0-dev:arm64 libcamera-dev:arm64 libssl-dev:arm64 \
        libasound2-dev:arm64 libopus-dev:arm64 pkgconf ca-certificates >&2
    (
        cd "$ROOT/app" || exit
        RUSTC=/usr/bin/rustc \
            CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
            CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++ \
            PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
            TURBOJPEG_SOURCE=explicit TURBOJPEG_LIB_DIR=/usr/lib/aarch64-linux-gnu TURBOJPEG_STATIC=1 \
            /usr/bin/cargo "$@" --target aarch64-unknown-linux-gnu --target-dir "${AARCH64_TARGET_DIR:-$ROOT/output/target}"
    )
}

# camstream for aarch64 linked statically (glibc and libjpeg-turbo inside,
# no libcamera: V4L2 cameras only; no WebRTC, whose OpenSSL an older image
# may lack), which runs on any aarch64 Linux, such as a firmware image
# built from an older tree (scripts/soak). Its own target directory: other
# flags than build_camstream_aarch64's. Prints its path.
build_camstream_aarch64_static() {
    AARCH64_TARGET_DIR="$ROOT/output/target-static" \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
        cargo_aarch64 build --release --locked -p camstream --no-default-features --features h264 >&2
    echo "$ROOT/output/target-static/aarch64-unknown-linux-gnu/release/camstream"
}

# debian_source PACKAGE FILE SHA256: output/debs/FILE, a file of the source
# package of Debian's binary PACKAGE (an .orig or .debian tarball), from the
# same archive and directory as this machine's apt gets PACKAGE from,
# checked against SHA256; downloaded once. Prints its path.
debian_source() (
    file="$ROOT/output/debs/$2"
    if [ ! -f "$file" ]; then
        pool=$(apt-get download --print-uris -q "$1" 2>/dev/null | sed -n "s|^'\([^']*\)/$1_[^/]*' .*|\1|p")
        [ -n "$pool" ] || { echo "cannot locate Debian's $1 package" >&2 && return 1; }
        mkdir -p "${file%/*}"
        /usr/lib/apt/apt-helper download-file "$pool/$(echo "$2" | sed 's/+/%2b/g')" "$file" "SHA256:$3" >&2
    fi
    echo "$file"
)

# debian_unpack PACKAGE ORIG ORIG_SHA256 DEBIAN DEBIAN_SHA256 DIR PATCHES:
# Debian's source of binary PACKAGE (ORIG, the upstream tarball, and DEBIAN,
# Debian's debian/ tarball, through debian_source) unpacked into DIR, which
# is made afresh, with the patches of debian/patches/series that the shell
# filter PATCHES (series on its input, patch names out) keeps applied in
# order: Debian's security fixes, without what only Debian's packaging needs.
debian_unpack() (
    src=$(debian_source "$1" "$2" "$3")
    fixes=$(debian_source "$1" "$4" "$5")
    rm -rf "$6"
    mkdir -p "$6"
    tar -xf "$src" -C "$6" --strip-components=1
    tar -xf "$fixes" -C "$6"
    cd "$6"
    sh -c "$7" <debian/patches/series | while read -r f; do
        [ -z "$f" ] || patch -s -p1 <"debian/patches/$f" || { echo "cannot apply Debian's $f to $1" >&2 && exit 1; }
    done
)

# libcurl for RAUC's streaming and downloads on the QEMU image: cross-built
# static from Debian's source of curl with Debian's security fixes, HTTP
# and HTTPS (OpenSSL, which RAUC links already) only. Debian's own arm64
# libcurl brings Kerberos, LDAP, RTMP with GnuTLS, SSH, IDN and HTTP/2:
# about 6 MiB that a camera fetching its bundles never uses. Prints the
# directory holding include/ and libcurl.a.
CURL_VERSION=7.88.1
CURL_DEBIAN=10+deb12u15
CURL_SHA256=cdb38b72e36bc5d33d5b8810f8018ece1baa29a8f215b4495e495ded82bbf3c7
CURL_DEBIAN_SHA256=961b78bc48492c5693e4decb352ddd176f343260a8956f48b2887874048ef23b
build_curl_aarch64() (
    out="$ROOT/output/curl/$CURL_VERSION-$CURL_DEBIAN"
    if [ ! -f "$out/libcurl.a" ]; then
        need_arm64
        need_packages gcc-aarch64-linux-gnu libc6-dev:arm64 make pkgconf libssl-dev:arm64 xz-utils patch >&2
        b="$out.build"
        # The CVE fixes, not the packaging's patches (which need autoreconf)
        # nor the test suite's.
        debian_unpack curl "curl_$CURL_VERSION.orig.tar.gz" "$CURL_SHA256" \
            "curl_$CURL_VERSION-$CURL_DEBIAN.debian.tar.xz" "$CURL_DEBIAN_SHA256" "$b" \
            "sed -n '/^# CVE fixes/,/^# Do not add patches below/p' | grep -v -e '^#' -e '^runtests'" >&2
        (
            cd "$b" &&
                PKG_CONFIG=aarch64-linux-gnu-pkg-config ./configure -q --host=aarch64-linux-gnu \
                    --disable-shared --enable-static --with-openssl --without-zlib --without-brotli \
                    --without-zstd --without-libidn2 --without-librtmp --without-libssh2 --without-nghttp2 \
                    --without-libpsl --without-gssapi --disable-ldap --disable-ldaps --disable-rtsp \
                    --disable-dict --disable-telnet --disable-tftp --disable-pop3 --disable-imap \
                    --disable-smb --disable-smtp --disable-gopher --disable-mqtt --disable-ftp \
                    --disable-file --disable-manual --disable-ntlm &&
                make -s -j"$(nproc)" -C lib
        ) >"$out.log" 2>&1 || { tail -n 30 "$out.log" >&2 && return 1; }
        rm -rf "$out"
        mkdir -p "$out/include"
        cp -R "$b/include/curl" "$out/include/"
        cp "$b/lib/.libs/libcurl.a" "$out/libcurl.a"
        rm -rf "$b"
    fi
    echo "$out"
)

# RAUC for the QEMU image, cross-built from Debian's source of the rauc
# package, with HTTP streaming (its NBD helper reads the bundle over HTTP
# range requests: no copy of it on /data) on the static libcurl above, and
# without the features Buildroot's rauc package leaves out by default: no
# D-Bus service (so no dbus-daemon on the board), JSON or bundle creation.
# Debian's own arm64 build has all of them and needs systemd's libraries.
# Prints its path.
RAUC_VERSION=1.8
RAUC_SHA256=d233247c1763b1c56c851d0adef2094b7aa2fcd72decf524a8ac0419188e0978
build_rauc_aarch64() (
    curl=$(build_curl_aarch64)
    out="$ROOT/output/rauc/$RAUC_VERSION-streaming-$CURL_VERSION-$CURL_DEBIAN"
    if [ ! -x "$out/rauc" ]; then
        need_arm64
        need_packages gcc-aarch64-linux-gnu libc6-dev:arm64 make pkgconf libglib2.0-dev:arm64 libssl-dev:arm64 \
            libnl-genl-3-dev:arm64 xz-utils >&2
        src=$(debian_source rauc "rauc_$RAUC_VERSION.orig.tar.xz" "$RAUC_SHA256")
        rm -rf "$out.build"
        mkdir -p "$out.build"
        tar -xf "$src" -C "$out.build" --strip-components=1
        # The static libcurl goes after librauc.a on the link line (LIBS),
        # with what it needs itself.
        (
            cd "$out.build" &&
                PKG_CONFIG=aarch64-linux-gnu-pkg-config CURL_CFLAGS="-I$curl/include" CURL_LIBS=" " \
                    ./configure -q --host=aarch64-linux-gnu \
                    --prefix=/usr --sysconfdir=/etc --disable-service --enable-network \
                    --enable-streaming --disable-json --disable-create --disable-code-coverage &&
                make -s -j"$(nproc)" LIBS="$curl/libcurl.a -lssl -lcrypto -lpthread" rauc
        ) >"$out.log" 2>&1 || { tail -n 30 "$out.log" >&2 && return 1; }
        mkdir -p "$out"
        aarch64-linux-gnu-strip -o "$out/rauc.tmp" "$out.build/rauc"
        mv "$out/rauc.tmp" "$out/rauc"
        rm -rf "$out.build"
    fi
    echo "$out/rauc"
)

# BusyBox for the QEMU image, cross-built static from Debian's source of
# busybox with Debian's security fixes: upstream's default applet set plus
# board/common/busybox.fragment, the applets the firmware's scripts need
# beyond Buildroot's default set (the Buildroot images take the same
# fragment). Debian's own builds leave out ntpd and ifplugd. Prints the
# directory holding busybox and busybox.links (the applets' paths).
BUSYBOX_VERSION=1.35.0
BUSYBOX_DEBIAN=4+deb12u1
BUSYBOX_SHA256=faeeb244c35a348a334f4a59e44626ee870fb07b6884d68c10ae8bc19f83a694
BUSYBOX_DEBIAN_SHA256=1cacbe095ef4880ea7879933c8e3c5075d1527cd6fbcb626a9b41e5daefd1a46
# A static binary, and the full modprobe as Buildroot's config has it (the
# small one ignores modules.dep and the options the image's coldplug uses;
# the Buildroot images use kmod's).
BUSYBOX_QEMU_CONFIG="CONFIG_STATIC=y CONFIG_MODPROBE_SMALL=n CONFIG_MODPROBE=y CONFIG_FEATURE_MODPROBE_BLACKLIST=y
CONFIG_FEATURE_MODUTILS_ALIAS=y CONFIG_FEATURE_MODUTILS_SYMBOLS=y CONFIG_FEATURE_CMDLINE_MODULE_OPTIONS=y
CONFIG_INSMOD=y CONFIG_RMMOD=y CONFIG_LSMOD=y CONFIG_DEPMOD=y CONFIG_MODINFO=y"
build_busybox_aarch64() (
    fragment="$ROOT/board/common/busybox.fragment"
    out="$ROOT/output/busybox/$BUSYBOX_VERSION-$({ cat "$fragment" && echo "$BUSYBOX_QEMU_CONFIG"; } |
        sha256sum | cut -c1-12)"
    if [ ! -x "$out/busybox" ]; then
        need_arm64
        need_packages gcc-aarch64-linux-gnu libc6-dev:arm64 make bzip2 xz-utils patch
        b="$out.build"
        debian_unpack busybox "busybox_$BUSYBOX_VERSION.orig.tar.bz2" "$BUSYBOX_SHA256" \
            "busybox_$BUSYBOX_VERSION-$BUSYBOX_DEBIAN.debian.tar.xz" "$BUSYBOX_DEBIAN_SHA256" "$b" "grep '^CVE-'" >&2
        (
            cd "$b" &&
                make -s defconfig &&
                # The fragment's lines, then BUSYBOX_QEMU_CONFIG's, over the
                # defaults (KEY=n: not set).
                { grep '^CONFIG_' "$fragment" && echo "$BUSYBOX_QEMU_CONFIG" | tr ' ' '\n'; } |
                while IFS='=' read -r key value; do
                    sed -i "/^$key=/d; /^# $key is not set/d" .config
                    if [ "$value" = n ]; then
                        echo "# $key is not set" >>.config
                    else
                        echo "$key=$value" >>.config
                    fi
                done &&
                yes '' | make -s oldconfig >/dev/null &&
                make -s -j"$(nproc)" CROSS_COMPILE=aarch64-linux-gnu- busybox busybox.links
        ) >"$out.log" 2>&1 || { tail -n 30 "$out.log" >&2 && return 1; }
        mkdir -p "$out"
        aarch64-linux-gnu-strip -o "$out/busybox.tmp" "$b/busybox"
        cp "$b/busybox.links" "$out/busybox.links"
        mv "$out/busybox.tmp" "$out/busybox"
        rm -rf "$b"
    fi
    echo "$out"
)

# U-Boot for the images from Debian's parts, cross-built from Debian's
# source of its u-boot packages with Debian's patches: the platform's
# defconfig as Debian builds it (PLATFORM: qemu_arm64 for the virt board,
# rpi_arm64 for the Pis), then board/common/uboot.fragment (what every
# camstream board's U-Boot has: no autoboot delay, EROFS to load the kernel
# from the compressed root slot) and EXTRA's lines (CONFIG_KEY=VALUE).
# Debian's own builds have no EROFS. Prints the path of u-boot.bin.
UBOOT_VERSION=2023.01+dfsg
UBOOT_DEBIAN=2+deb12u3
UBOOT_SHA256=e75da6f089d063aaef39a1c17f1631791d87700662624e18de2121fa39a1ed44
UBOOT_DEBIAN_SHA256=f9d96a5095d542d8732eccdabcd1d1e7eaaa832311ce395f78b8ead1fad9845e
build_uboot_aarch64() (
    platform=$1 extra=${2:-}
    fragment="$ROOT/board/common/uboot.fragment"
    out="$ROOT/output/u-boot/$platform-$UBOOT_VERSION-$UBOOT_DEBIAN-$({ cat "$fragment" && echo "$extra"; } |
        sha256sum | cut -c1-12)"
    if [ ! -f "$out/u-boot.bin" ]; then
        # gcc and libc6-dev: U-Boot's host tools (kconfig, fixdep, mkimage).
        need_packages gcc libc6-dev gcc-aarch64-linux-gnu make bison flex bc xz-utils patch libssl-dev \
            libgnutls28-dev python3
        b="$out.build"
        rm -rf "$b"
        debian_unpack u-boot-tools "u-boot_$UBOOT_VERSION.orig.tar.xz" "$UBOOT_SHA256" \
            "u-boot_$UBOOT_VERSION-$UBOOT_DEBIAN.debian.tar.xz" "$UBOOT_DEBIAN_SHA256" "$b/src" "grep -v '^#'" >&2
        { grep '^CONFIG_' "$fragment" && printf '%s\n' "$extra" | { grep '^CONFIG_' || true; }; } >"$b/config"
        (
            cd "$b/src" &&
                make -s O=../build CROSS_COMPILE=aarch64-linux-gnu- "${platform}_defconfig" &&
                cat ../config >>../build/.config &&
                make -s O=../build CROSS_COMPILE=aarch64-linux-gnu- olddefconfig &&
                # Each line must have held: a misspelt or unmet one is dropped silently.
                while IFS= read -r line; do
                    grep -qxF "$line" ../build/.config || { echo "U-Boot's config lacks $line" && exit 1; }
                done <../config &&
                make -s O=../build CROSS_COMPILE=aarch64-linux-gnu- -j"$(nproc)" u-boot.bin
        ) >"$out.log" 2>&1 || { tail -n 30 "$out.log" >&2 && return 1; }
        mkdir -p "$out"
        cp "$b/build/u-boot.bin" "$out/u-boot.bin"
        rm -rf "$b"
    fi
    echo "$out/u-boot.bin"
)

# Mozilla's OpenH264 plugin (GMP) for Debian's Firefox ESR, which offers
# H.264 over WebRTC only with it, and downloads Cisco's build at its first
# start: here it is built from Debian's sources, openh264's own (its
# module/ is the plugin) and the plugin API's headers from Firefox ESR's
# source. Both come through the archive's signed Sources index (bookworm's,
# in a private apt configuration), each file checked against its SHA256.
# Prints the plugin's directory: Firefox's MOZ_GMP_PATH.
firefox_openh264() (
    set -eu
    gmp=$ROOT/output/firefox-gmp
    dir=$(find "$gmp/gmp-gmpopenh264" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -n 1) || true
    if [ -n "$dir" ] && [ -f "$dir/libgmpopenh264.so" ]; then
        echo "$dir"
        exit 0
    fi
    need_packages curl xz-utils make g++ nasm >&2
    work=$ROOT/output/firefox-gmp-src
    rm -rf "$work" "$gmp"
    mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
    echo "deb-src ${DEBIAN_MIRROR:-http://deb.debian.org/debian} bookworm main" >"$work/apt/sources.list"
    gmp_apt() {
        apt-get -q -o Dir::Etc::SourceList="$work/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
            -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache" "$@"
    }
    gmp_apt update >/dev/null
    # 'URL' file size SHA256:hash, for each source's upstream tarball.
    gmp_apt source --print-uris openh264 firefox-esr | grep -E "^'[^']*/(openh264|firefox-esr)_[^']*\.orig\.tar\.xz'" |
        while read -r url file _size sum; do
            url=${url#\'}
            url=${url%\'}
            curl -sSfL -o "$work/$file" "$url"
            echo "${sum#SHA256:}  $work/$file" | sha256sum -c --quiet - >&2
        done
    tar -xJf "$work"/openh264_*.orig.tar.xz -C "$work"
    src=$(ls -d "$work"/openh264-*/)
    # The headers sit near the tarball's start: tar stops there.
    mkdir -p "$src/gmp-api"
    tar -xJf "$work"/firefox-esr_*.orig.tar.xz -C "$src/gmp-api" --strip-components=5 --wildcards \
        --occurrence=1 \
        '*/dom/media/gmp/gmp-api/gmp-entrypoints.h' '*/dom/media/gmp/gmp-api/gmp-errors.h' \
        '*/dom/media/gmp/gmp-api/gmp-platform.h' '*/dom/media/gmp/gmp-api/gmp-storage.h' \
        '*/dom/media/gmp/gmp-api/gmp-video-codec.h' '*/dom/media/gmp/gmp-api/gmp-video-decode.h' \
        '*/dom/media/gmp/gmp-api/gmp-video-encode.h' '*/dom/media/gmp/gmp-api/gmp-video-frame-encoded.h' \
        '*/dom/media/gmp/gmp-api/gmp-video-frame-i420.h' '*/dom/media/gmp/gmp-api/gmp-video-frame.h' \
        '*/dom/media/gmp/gmp-api/gmp-video-host.h' '*/dom/media/gmp/gmp-api/gmp-video-plane.h'
    make -C "$src" -j"$(nproc)" plugin >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2 && exit 1; }
    # Firefox reads <dir>/gmpopenh264.info and loads <dir>/libgmpopenh264.so;
    # the directory's parent must be called gmp-gmpopenh264.
    version=$(sed -n 's/^Version: *//p' "$src/gmpopenh264.info")
    dir=$gmp/gmp-gmpopenh264/$version
    mkdir -p "$dir"
    cp -L "$src/libgmpopenh264.so" "$src/gmpopenh264.info" "$dir/"
    rm -rf "$work"
    echo "$dir"
)
