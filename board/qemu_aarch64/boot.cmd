# U-Boot script for QEMU's virt board (U-Boot's distro boot finds boot.scr
# on the boot partition). The kernel, and its initramfs where it needs one,
# live in the root slot, so an update replaces them together with the
# modules they load.
setenv bootargs "console=ttyAMA0 root=/dev/vda2 rootwait ro quiet loglevel=3 panic=5"
load ${devtype} ${devnum}:2 ${kernel_addr_r} /boot/Image
if load ${devtype} ${devnum}:2 ${ramdisk_addr_r} /boot/initrd.img; then
	booti ${kernel_addr_r} ${ramdisk_addr_r}:${filesize} ${fdtcontroladdr}
else
	booti ${kernel_addr_r} - ${fdtcontroladdr}
fi
