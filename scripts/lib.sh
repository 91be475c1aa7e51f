# Shared by the host scripts: install what a fresh Debian 12 machine lacks
# (Debian's packages, Rust, the tests' Python) and download the Debian
# packages the firmware image is made of; also the timed steps of long
# commands and two checks of what Kconfig made of a configuration. The
# builds from source are scripts/lib-build.sh's.
# The caller sets ROOT (the checkout). A function gives its result on
# standard output or as its exit status, and sets no variable of its
# caller's, except where it says so (step's state, PATH).
# shellcheck shell=sh

# Timed steps of a long command: `step NAME` starts one (ending the one
# before); `step_times TITLE`, from an EXIT trap, ends the last and prints
# each step's seconds and the total. State: step_name, step_start,
# step_list, steps_started.
step_name="" step_start=0 step_list="" steps_started=""
step() {
    step_end
    step_name=$1 step_start=$(date +%s) step_ticks=$(cpu_ticks)
    : "${steps_started:=$step_start}"
    printf '\n== %s\n' "$1"
}
# "IDLE TOTAL": the machine's idle and total CPU time so far (/proc/stat's
# ticks, all cores), so each step says how much CPU it left unused: where a
# run's time could go to work beside it, and where it cannot.
cpu_ticks() {
    awk '$1 == "cpu" { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat 2>/dev/null ||
        echo "0 0"
}
step_end() {
    [ -z "$step_name" ] ||
        step_list="$step_list$(printf '%6d s  %s  %s' $(($(date +%s) - step_start)) \
            "$(echo "$step_ticks $(cpu_ticks)" | awk '{ t = $4 - $2
                if (t > 0) printf "%3d %% idle", 100 * ($3 - $1) / t; else printf "  - %% idle" }')" "$step_name")
"
    step_name=""
}
# `step_beside NAME SECONDS`: a job that ran beside the steps, listed with
# its own time in brackets (not part of the total, which is the clock's).
step_beside() {
    step_list="$step_list$(printf '%6s s  %10s  %s' "($2)" "" "$1")
"
}
step_times() {
    set -- "$1" $?
    step_end
    printf '\n== %s (%s)\n%s%6d s  in all\n' "$1" \
        "$([ "$2" -eq 0 ] && echo passed || echo "failed: exit $2")" \
        "$step_list" $(($(date +%s) - ${steps_started:-$(date +%s)}))
}

# The symbols a Buildroot defconfig ($1) sets that the .config Buildroot made
# of it ($2) lacks, one a line: a dependency the release or the toolchain
# lacks drops a symbol without a word.
dropped_symbols() {
    sed -n 's/^\(BR2_[A-Za-z0-9_]*\)=.*/\1/p' "$1" | while read -r sym; do
        grep -q "^$sym=" "$2" || echo "$sym"
    done
}

# The assignments of a kernel config fragment ($1) that the kernel's .config
# ($2) does not hold as written, one a line: Kconfig drops a symbol whose
# dependencies are unmet (or lowers y to m) without a word.
unmet_fragment() {
    grep '^CONFIG_[A-Za-z0-9_]*=' "$1" | while IFS= read -r line; do
        grep -qxF "$line" "$2" || echo "$line"
    done
}

# Runs a command as root (directly, or through sudo).
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Whether a Debian package is installed: NAME for the host's architecture
# (or an Architecture: all package), NAME:ARCH for that architecture.
# (dpkg-query -W NAME alone answers for any architecture: with only
# libturbojpeg0-dev:arm64 installed it calls libturbojpeg0-dev installed.)
package_installed() {
    case "$1" in
    *:*) set -- "${1%%:*}" "${1#*:}" ;;
    *) set -- "$1" "$(dpkg --print-architecture)" ;;
    esac
    # shellcheck disable=SC2016 # dpkg-query's fields, not the shell's
    dpkg-query -W -f='${Architecture} ${db:Status-Status}\n' "$1" 2>/dev/null |
        grep -q -e "^$2 installed\$" -e "^all installed\$"
}

# dpkg's arm64 architecture, with apt's lists of its packages (apt-get
# download or install of a NAME:arm64 finds nothing before them).
need_arm64() {
    dpkg --print-foreign-architectures | grep -qx arm64 && return 0
    as_root dpkg --add-architecture arm64
    as_root apt-get update -q >&2
}

# Installs the Debian packages given (NAME: the host's architecture;
# NAME:ARCH) that are not installed yet, then checks that each one is.
need_packages() (
    missing=""
    for p in "$@"; do
        package_installed "$p" || missing="$missing $p"
    done
    [ -n "$missing" ] || return 0
    # One install at a time (flock, util-linux): ci/test runs steps beside
    # each other, and apt gives up at once while another apt holds its lock.
    exec 9>>"${TMPDIR:-/tmp}/camstream-need-packages.lock"
    flock 9
    echo "Installing Debian packages:$missing" >&2
    as_root apt-get update -q >&2
    # shellcheck disable=SC2086 # one word per package
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >&2
    for p in $missing; do
        package_installed "$p" || { echo "need_packages: $p is still not installed" >&2 && return 1; }
    done
)

# Makes rustup's cargo available with the toolchain app/rust-toolchain.toml
# pins (and the components it lists): puts ~/.cargo/bin first in PATH.
ensure_rust() {
    [ -d "$HOME/.cargo/bin" ] && PATH="$HOME/.cargo/bin:$PATH"
    if ! command -v rustup >/dev/null 2>&1; then
        (
            need_packages ca-certificates curl
            echo "Installing rustup"
            # rustup-init must be called by that name (rustup tells what to
            # be by the name it was started with).
            tmp=$(mktemp -d)
            curl --proto '=https' --tlsv1.2 -sSf \
                "https://static.rust-lang.org/rustup/dist/$(uname -m)-unknown-linux-gnu/rustup-init" -o "$tmp/rustup-init"
            chmod +x "$tmp/rustup-init"
            "$tmp/rustup-init" -y --profile minimal --default-toolchain none --no-modify-path
            rm -rf "$tmp"
        )
        PATH="$HOME/.cargo/bin:$PATH"
    fi
    export PATH
    rustup toolchain install "$(sed -n 's/^channel = "\(.*\)"/\1/p' "$ROOT/app/rust-toolchain.toml")" \
        --profile minimal --component clippy,rustfmt
}

# The tests' Python (output/venv, with Debian's packages and
# tests/requirements.txt); prints its path.
test_venv() (
    need_packages python3-venv >&2
    venv="$ROOT/output/venv"
    [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/tests/requirements.txt" >&2
    echo "$venv/bin/python"
)

# Downloads Debian packages (PACKAGE or PACKAGE:ARCH) into $ROOT/output/debs
# unless a copy is there; records name and version in versions.txt.
fetch_debs() (
    case " $* " in *:arm64\ *) need_arm64 ;; esac
    debs="$ROOT/output/debs"
    mkdir -p "$debs"
    for p in "$@"; do
        name=${p%%:*}
        pattern="${name}_*.deb"
        case "$p" in
        *:*) pattern="${name}_*_${p#*:}.deb" ;;
        esac
        # shellcheck disable=SC2086 # the pattern is meant to expand
        if ! ls "$debs/"$pattern >/dev/null 2>&1; then
            # apt warns when it cannot drop privileges for the download.
            (cd "$debs" && { apt-get download -q "$p" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2; }) || true
            # shellcheck disable=SC2086
            ls "$debs/"$pattern >/dev/null 2>&1 || { echo "cannot download $p" >&2; return 1; }
        fi
    done
    # shellcheck disable=SC2016 # dpkg-deb's fields, not the shell's
    (cd "$debs" && for f in *.deb; do dpkg-deb --show --showformat='${Package} ${Version} ${Architecture}\n' "$f"; done) \
        >"$debs/versions.txt"
)

# The Debian arm64 kernel ABI linux-image-arm64 points at, e.g. 6.1.0-56.
debian_kernel_abi() {
    need_arm64
    apt-cache show linux-image-arm64:arm64 >/dev/null 2>&1 || as_root apt-get update -q >&2
    apt-cache depends linux-image-arm64:arm64 |
        sed -n 's/.*Depends: linux-image-\(.*\)-arm64:arm64$/\1/p' | head -n 1
}

# slot_tree SLOT DIR: the files of root slot image SLOT (EROFS, as
# rootfs.erofs; or DISK?offset=BYTES, the slot in a disk image's partition
# at that offset) extracted into DIR, which must not exist. needs
# erofs-utils.
slot_tree() (
    slot=$1
    case "$slot" in
    *\?offset=*)
        # A slot is 256 MiB; fsck.erofs reads an image file, not an offset.
        mkdir -p "$2.part"
        dd if="${slot%%\?offset=*}" of="$2.part/slot" bs=4M iflag=skip_bytes,count_bytes \
            skip="${slot##*\?offset=}" count=256M status=none
        slot=$2.part/slot
        ;;
    esac
    extracted=0
    fsck.erofs --extract="$2" --no-preserve "$slot" >/dev/null 2>&1 || extracted=$?
    rm -rf "$2.part"
    return "$extracted"
)

# slot_cat DIR PATH: the file PATH of a tree slot_tree extracted into DIR,
# symbolic links followed inside it (Buildroot's /etc/os-release is one, to
# ../usr/lib/os-release); nothing, and failure, when there is none.
slot_cat() (
    path=$2 hops=0
    while [ -L "$1$path" ] && [ "$hops" -lt 8 ]; do
        link=$(readlink "$1$path")
        case $link in
        /*) path=$link ;;
        *) path=$(dirname "$path")/$link ;;
        esac
        hops=$((hops + 1))
    done
    [ -f "$1$path" ] && [ ! -L "$1$path" ] && cat "$1$path"
)
