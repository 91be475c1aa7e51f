# U-Boot script for the Raspberry Pi boards: the Pi's firmware starts U-Boot
# (config.txt: kernel=u-boot.bin), U-Boot runs this from the boot partition.
# The kernel lives in the root slot, so an update replaces it together with
# its modules; the device tree and command line are the ones the firmware
# prepared (config.txt overlays, cmdline.txt), plus the root slot.
fdt addr ${fdt_addr}
fdt get value bootargs /chosen bootargs
setenv bootargs "${bootargs} root=/dev/mmcblk0p2 rootwait ro"
load mmc 0:2 ${kernel_addr_r} /boot/Image
booti ${kernel_addr_r} - ${fdt_addr}
