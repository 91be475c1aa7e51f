# Shared by the init scripts (sourced): settings read from /data/etc, and
# files a user leaves on the boot partition before the first boot.
# shellcheck shell=sh

BOOT=/boot/firmware

# conf_get FILE KEY: the value of a "KEY = VALUE" line of FILE (the last one;
# quotes around VALUE and a trailing "# comment" dropped), empty if none.
conf_get() {
    sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*//p" "$1" 2>/dev/null | tail -n 1 |
        sed 's/[[:space:]]*#.*//; s/^"\(.*\)"$/\1/; s/[[:space:]]*$//'
}

# qemu_setting NAME: what scripts/qemu tells the guest (url, anonymous,
# ntp, webrtc, watchdog, modules): over QEMU's firmware config on the virt board, as
# camstream.qemu.NAME=VALUE on the kernel command line on the emulated Pi
# (it has no firmware config; scripts/qemu stands in for the Pi's firmware,
# which passes cmdline.txt). Empty on a real board.
qemu_setting() {
    f=/sys/firmware/qemu_fw_cfg/by_name/opt/camstream/$1/raw
    if [ -r "$f" ]; then
        cat "$f"
        return
    fi
    read -r kernel_cmdline </proc/cmdline
    for arg in $kernel_cmdline; do
        case "$arg" in
        "camstream.qemu.$1="*) echo "${arg#*=}" ;;
        esac
    done
}

# Whether /data is the data partition: when it could not be mounted it is
# RAM (S02data), and nothing written there outlives this boot.
data_kept() {
    [ "$(awk '$2 == "/data" { print $3 }' /proc/mounts)" = ext4 ]
}

# boot_time STEP start|end|at: a line of the boot chart, /run/boot-times:
# the uptime, STEP (one word) and the event (at: a moment, not a span).
# scripts/bench-boot reads it with the kernel's own stamps.
boot_time() {
    read -r up _ </proc/uptime
    echo "$up $1 $2" >>/run/boot-times
}

# The logging verbs of every script. log TAG MESSAGE [PRIORITY]: to the
# system log (logread) under TAG, at PRIORITY (notice unless given; err for
# what went wrong).
log() {
    logger -t "$1" -p "daemon.${3:-notice}" "$2"
}

# tell TAG MESSAGE [PRIORITY]: log, and "TAG: MESSAGE" on the console, where
# the one watching the boot or the serial line sees it. A console that
# cannot be written to does not fail the caller.
tell() {
    { echo "$1: $2" >/dev/console; } 2>/dev/null || true
    log "$@"
}

# The daemons of the init scripts, in the shape of Buildroot's (its
# package/busybox/S01syslogd): start-stop-daemon starts each, with a pid
# file where it can have one, and finds it again by its name (the
# process's comm, which BusyBox's applets and the scripts have however
# they were started; --exec matches only the path one was started by) and
# that pid file.

# ok_fail STATUS: ends a "Starting NAME: " line with OK or FAIL, as
# Buildroot's scripts do; returns STATUS.
ok_fail() {
    if [ "$1" -eq 0 ]; then
        echo "OK"
    else
        echo "FAIL"
    fi
    return "$1"
}

# daemon_running NAME [PIDFILE]: whether a process called NAME runs (the
# one PIDFILE names, if given).
daemon_running() {
    start-stop-daemon --stop --test --quiet --name "$1" ${2:+--pidfile "$2"}
}

# stop_daemon NAME [PIDFILE]: ends the daemon called NAME (the one PIDFILE
# names, if given) and waits, at most 10 s, until it is gone: one still
# ending would remove the pid file of the one started next, which then
# nothing could stop. Fails if it outlives the wait (its pid file stays:
# nothing may start beside it); one that was not running is no failure.
stop_daemon() {
    start-stop-daemon --stop --quiet --oknodo --name "$1" ${2:+--pidfile "$2"} || return
    i=0
    while daemon_running "$@"; do
        [ $i -lt 100 ] || return 1
        sleep 0.1
        i=$((i + 1))
    done
    [ -z "${2:-}" ] || rm -f "$2"
}

# write_atomic FILE [MODE]: standard input becomes FILE (mode MODE; its
# directory is made if missing), whole or not at all. Written beside FILE, synced, renamed over it, synced: the
# data reaches the disk later than the name, so a power cut after a bare
# rename can leave FILE empty. With MODE the copy is never readable by
# others, not even before its chmod (it may hold secrets).
write_atomic() {
    mkdir -p "${1%/*}"
    if [ -n "${2:-}" ]; then
        (umask 077 && cat >"$1.new") && chmod "$2" "$1.new"
    else
        cat >"$1.new"
    fi || {
        rm -f "$1.new"
        return 1
    }
    sync
    mv "$1.new" "$1"
    sync
}

# seed FILE DEFAULT: FILE becomes a copy of DEFAULT if it is missing, or
# empty: a power cut in the first seconds after the first boot can leave a
# new file empty, since its data reaches the disk later than its name.
seed() {
    [ ! -s "$1" ] || return 0
    if [ -e "$1" ]; then
        tell setup "$1 was empty (cut off while it was written?): made again from $2" err
    fi
    write_atomic "$1" <"$2"
}

# take_from_boot NAME DEST MODE [add]: the boot partition's file NAME
# becomes DEST (mode MODE; with "add", its lines are added to DEST's, each
# once), and NAME is deleted: a FAT volume leaves it readable to anyone
# holding the card. It stays while /data is only RAM. Windows line ends are
# dropped. Fails if there is no NAME, or DEST cannot be written (NAME stays).
take_from_boot() {
    [ -f "$BOOT/$1" ] || return 1
    if [ "${4:-}" = add ] && [ -f "$2" ]; then
        { cat "$2" && tr -d '\r' <"$BOOT/$1"; } | awk '!seen[$0]++' | write_atomic "$2" "$3"
    else
        tr -d '\r' <"$BOOT/$1" | write_atomic "$2" "$3"
    fi || {
        tell setup "cannot write $2: $1 stays on the boot partition" err
        return 1
    }
    if data_kept; then
        rm -f "$BOOT/$1"
        sync
        log setup "$1 from the boot partition is now $2"
    else
        tell setup "/data is not the data partition: $1 stays on the boot partition" err
    fi
}

# camstream's setting KEY, or DEFAULT: from the camera's settings, or the
# image's until the first start has copied them.
stream_setting() {
    conf=/data/etc/camstream.toml
    [ -f "$conf" ] || conf=/etc/camstream.toml
    value=$(conf_get "$conf" "$1")
    echo "${value:-$2}"
}

stream_port() {
    stream_setting rtsp_port 8554
}

http_port() {
    stream_setting http_port 8080
}

stream_path() {
    stream_setting path stream
}

# The stream's URL on HOST (no port when it is RTSP's own, 554).
stream_url() {
    port=$(stream_port)
    [ "$port" = 554 ] && echo "rtsp://$1/$(stream_path)" || echo "rtsp://$1:$port/$(stream_path)"
}

# The stream's URLs, by name (mDNS) and by the first IPv4 address: a line
# for the console.
stream_urls() {
    addr=$(ip -4 -o addr show scope global | sed -n 's/.* inet \([0-9.]*\).*/\1/p' | head -n 1)
    if [ -n "$addr" ]; then
        echo "camstream: $(stream_url "$(hostname).local") ($(stream_url "$addr"))"
    else
        echo "camstream: $(stream_url "$(hostname).local") once the network is up"
    fi
}
