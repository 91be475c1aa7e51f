#!/bin/sh
# Buildroot post-image script of every camstream image: checks the root
# slot (rootfs.erofs, compressed) against its budget, lays out the disk
# with genimage (boot, root A, root B, data; docs/IMAGE.md) and writes its
# sha256 next to it.
# usage: post-image.sh BINARIES_DIR BUDGET_MIB
# The boot partition gets boot.scr, the A/B boot state (bootstate.env) and,
# on a Raspberry Pi, the Pi's firmware, its device trees and U-Boot; the
# data partition RAUC's record of slot A (below).
# TARGET_DIR and BUILD_DIR come from Buildroot's environment (or
# scripts/image).
set -eu
binaries=$1 budget_mib=$2

# The size gate: the compressed root slot, what every update carries and
# every card holds twice, against the board's budget.
used_kib=$(du -s -k --apparent-size "$TARGET_DIR" | cut -f1)
slot_kib=$(($(stat -c %s "$binaries/rootfs.erofs") / 1024))
if [ "$slot_kib" -gt $((budget_mib * 1024)) ]; then
    echo "root slot: rootfs.erofs is $slot_kib KiB ($((used_kib / 1024)) MiB of files)," \
        "over the budget of $budget_mib MiB" >&2
    exit 1
fi

# A fresh disk boots slot A; slot B is empty until the first update.
printf 'BOOT_ORDER=A B\nBOOT_A_LEFT=3\nBOOT_B_LEFT=0\n' | mkenvimage -s 0x4000 -o "$binaries/bootstate.env" -

files=""
for f in "$binaries/boot.scr" "$binaries/bootstate.env" "$binaries"/*.dtb "$binaries"/rpi-firmware/*; do
    [ -e "$f" ] || continue
    files="$files			\"${f#"$binaries/"}\",
"
done
if [ -d "$binaries/rpi-firmware" ]; then
    # The Pi's firmware starts U-Boot (config.txt: kernel=u-boot.bin).
    files="$files			\"u-boot.bin\",
"
fi
cfg=$binaries/genimage.cfg
: >"$cfg"
while IFS= read -r line; do
    if [ "$line" = "#BOOT_FILES#" ]; then
        printf '%s' "$files" >>"$cfg"
    else
        printf '%s\n' "$line" >>"$cfg"
    fi
done <"$(dirname "$0")/genimage.cfg.in"

rootpath=$(mktemp -d)
trap 'rm -rf "$rootpath"' EXIT
# RAUC's record of what slot A holds (/data/rauc, rauc-system.conf.in), so
# that the first adaptive update (docs/UPDATE.md) takes the blocks it
# already has from slot A by their index, one sha256 per 4 KiB, and knows
# slot B holds nothing: without these RAUC reads and hashes both 256 MiB
# slots first.
slot=$binaries/rootfs.erofs
size=$(stat -c %s "$slot")
if [ $((size % 4096)) -ne 0 ]; then
    echo "root slot: rootfs.erofs is $size bytes, not whole 4 KiB blocks (RAUC's adaptive updates need them)" >&2
    exit 1
fi
sum=$(sha256sum "$slot" | cut -d' ' -f1)
rauc=$rootpath/data/rauc
mkdir -p "$rauc/slot.rootfs.0/hash-$sum" "$rauc/slot.rootfs.1/hash-unknown"
find "$rauc" -type d -exec chmod 700 {} +
python3 -c 'import hashlib, sys
with open(sys.argv[1], "rb") as slot, open(sys.argv[2], "wb") as index:
    while block := slot.read(4096):
        index.write(hashlib.sha256(block).digest())' "$slot" "$rauc/slot.rootfs.0/hash-$sum/block-hash-index"
# Slot B's index: one hash that no block has.
head -c 32 /dev/zero >"$rauc/slot.rootfs.1/hash-unknown/block-hash-index"
cat >"$rauc/central.raucs" <<STATUS
[slot.rootfs.0]
bundle.compatible=$(sed -n 's/^compatible=//p' "$TARGET_DIR/etc/rauc/system.conf")
bundle.version=$(sed -n 's/^VERSION_ID=//p' "$TARGET_DIR/etc/os-release")
status=ok
sha256=$sum
size=$size
STATUS
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    find "$rootpath" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
fi

rm -rf "$BUILD_DIR/genimage.tmp"
# The data partition's files are root's, whoever builds the image.
set -- genimage --rootpath "$rootpath" --tmppath "$BUILD_DIR/genimage.tmp" \
    --inputpath "$binaries" --outputpath "$binaries" --config "$cfg"
if [ "$(id -u)" -eq 0 ]; then
    chown -R 0:0 "$rootpath/data"
    "$@"
else
    # shellcheck disable=SC2016 # the inner shell's arguments
    fakeroot -- sh -c 'chown -R 0:0 "$1/data" && shift && exec "$@"' sh "$rootpath" "$@"
fi

image=$(sed -n 's/^image \([^ ]*\.img\) {.*/\1/p' "$cfg")
(cd "$binaries" && sha256sum "$image" >"$image.sha256")
echo "$binaries/$image: $(($(stat -c %s "$binaries/$image") / 1048576)) MiB;" \
    "root slot $slot_kib KiB compressed, of the budget of $budget_mib MiB ($((used_kib / 1024)) MiB of files)"
