# U-Boot script of every camstream board (QEMU's virt board and the
# Raspberry Pis), run from the boot partition: picks root slot A or B by the
# boot-attempt scheme RAUC's U-Boot backend documents, and boots the kernel
# that slot carries (docs/UPDATE.md).
#
# State: BOOT_ORDER ("A B": try A first) and BOOT_A_LEFT / BOOT_B_LEFT
# (attempts left) in bootstate.env on this partition, a checksummed U-Boot
# environment that RAUC changes through fw_setenv (/etc/fw_env.config). Each
# boot takes one attempt from the slot it boots; userspace gives them back
# once the slot proved good (camstream-health), so a slot that keeps failing
# to get there runs out and the next slot in BOOT_ORDER boots.

setenv BOOT_ORDER
setenv BOOT_A_LEFT
setenv BOOT_B_LEFT
if load ${devtype} ${devnum}:1 ${kernel_addr_r} bootstate.env; then
	env import -c ${kernel_addr_r} ${filesize} BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT
fi
if test -z "${BOOT_ORDER}"; then
	echo "bootstate.env missing or damaged: starting again from slot A"
	setenv BOOT_ORDER "A B"
	setenv BOOT_A_LEFT 3
	setenv BOOT_B_LEFT 3
fi

setenv slot
for s in ${BOOT_ORDER}; do
	if test -z "${slot}"; then
		if test "${s}" = "A" && test ${BOOT_A_LEFT} -gt 0; then
			setexpr BOOT_A_LEFT ${BOOT_A_LEFT} - 1
			setenv slot A
			setenv part 2
			setenv left ${BOOT_A_LEFT}
		elif test "${s}" = "B" && test ${BOOT_B_LEFT} -gt 0; then
			setexpr BOOT_B_LEFT ${BOOT_B_LEFT} - 1
			setenv slot B
			setenv part 3
			setenv left ${BOOT_B_LEFT}
		fi
	fi
done
if test -z "${slot}"; then
	# Both slots failed three times: rather than stop, start counting again
	# (a camera that lost power during every attempt is not broken).
	echo "No root slot has attempts left: giving both three again"
	setenv BOOT_A_LEFT 3
	setenv BOOT_B_LEFT 3
fi
env export -c -s 0x4000 ${kernel_addr_r} BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT
fatwrite ${devtype} ${devnum}:1 ${kernel_addr_r} bootstate.env 0x4000
if test -z "${slot}"; then
	reset
fi
echo "Booting root slot ${slot} (partition ${part}; ${left} more attempts after this one)"

# The disk the kernel sees, and the device tree: QEMU's own, or the one the
# Pi's firmware prepared (config.txt overlays) with its command line
# (cmdline.txt).
if test "${board}" = "qemu-arm"; then
	setenv rootdisk /dev/vda
	setenv fdt ${fdtcontroladdr}
	# Below the initramfs (ramdisk_addr_r, 0x44000000).
	setenv kernel_comp_addr_r 0x42000000
	# Memory (docs/IMAGE.md): the DMA pools for atomic allocations, which
	# no virtio device makes, at their least (they grow when used), and
	# one queue of 64 requests for a disk that mostly reads at boot.
	setenv bootargs "console=ttyAMA0 quiet loglevel=3 coherent_pool=32K virtio_blk.num_request_queues=1 virtio_blk.queue_depth=64"
else
	setenv rootdisk /dev/mmcblk${devnum}p
	setenv fdt ${fdt_addr}
	fdt addr ${fdt}
	fdt get value bootargs /chosen bootargs
	# The kernel loaded where booti runs it (2 MiB-aligned): from the
	# Pi's kernel_addr_r (0x80000) booti first moves it there, 31 MiB
	# that took 12.7 s on the emulated Pi 3.
	setenv kernel_addr_r 0x00200000
	# Above the kernel (up to 32 MiB unpacked) and U-Boot's script, device
	# tree and initramfs addresses, below where the firmware puts its
	# device tree (0x08000000 on QEMU's emulated Pi 3).
	setenv kernel_comp_addr_r 0x04000000
fi
# nbd.nbds_max=0: RAUC's streaming asks the kernel for a network block
# device when it installs, and the kernel makes one then; the 16 it makes
# at boot otherwise hold about 3 MiB and 16 threads (docs/IMAGE.md).
setenv bootargs "${bootargs} root=${rootdisk}${part} rauc.slot=${slot} rootwait ro panic=5 nbd.nbds_max=0"

# The kernel (and, where it needs one, its initramfs) lives in the slot, so
# an update replaces them together with the modules they load. A slot
# without a kernel (never written, or cut off while being written) cannot
# boot: it gets no more attempts.
if load ${devtype} ${devnum}:${part} ${kernel_addr_r} /boot/Image; then
	# Buildroot's kernel is LZMA-compressed: booti unpacks it at
	# kernel_comp_addr_r and moves it to kernel_addr_r (an uncompressed
	# Image, as the Debian-part image's, boots as it is).
	setenv kernel_comp_size ${filesize}
	if load ${devtype} ${devnum}:${part} ${ramdisk_addr_r} /boot/initrd.img; then
		booti ${kernel_addr_r} ${ramdisk_addr_r}:${filesize} ${fdt}
	else
		booti ${kernel_addr_r} - ${fdt}
	fi
fi
echo "Slot ${slot} has no bootable kernel"
if test "${slot}" = "A"; then
	setenv BOOT_A_LEFT 0
else
	setenv BOOT_B_LEFT 0
fi
env export -c -s 0x4000 ${kernel_addr_r} BOOT_ORDER BOOT_A_LEFT BOOT_B_LEFT
fatwrite ${devtype} ${devnum}:1 ${kernel_addr_r} bootstate.env 0x4000
reset
