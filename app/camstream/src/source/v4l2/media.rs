//! Whether a camera sensor sits behind a media controller (a Raspberry Pi
//! Camera Module on unicam or rp1-cfe, vimc's sensors): the cameras only
//! libcamera can drive. `source = "auto"` asks this before starting
//! libcamera's camera manager, which costs start-up time and memory that a
//! V4L2 camera (USB, vivid, v4l2loopback) does not need. The answer comes
//! from the kernel's media ioctls (linux/media.h), as libcamera's own
//! pipeline handlers match devices.

#![allow(non_camel_case_types)]

use std::fs;
use std::mem::size_of;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags, open};
use rustix::ioctl::{Opcode, opcode};

use super::device::update;
use super::sys::zeroed;

#[repr(C)]
#[derive(Clone, Copy)]
struct media_device_info {
    driver: [u8; 16],
    model: [u8; 32],
    serial: [u8; 40],
    bus_info: [u8; 32],
    media_version: u32,
    hw_revision: u32,
    driver_version: u32,
    reserved: [u32; 31],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct media_entity_desc {
    id: u32,
    name: [u8; 32],
    /// The entity's function (MEDIA_ENT_F_*) for the functions the legacy
    /// ioctl reports as they are, sensors among them.
    type_: u32,
    revision: u32,
    flags: u32,
    group_id: u32,
    pads: u16,
    links: u16,
    reserved: [u32; 4],
    raw: [u8; 184],
}

const _: () = {
    assert!(size_of::<media_device_info>() == 256);
    assert!(size_of::<media_entity_desc>() == 256);
};

const MEDIA_IOC_DEVICE_INFO: Opcode = opcode::read_write::<media_device_info>(b'|', 0);
const MEDIA_IOC_ENUM_ENTITIES: Opcode = opcode::read_write::<media_entity_desc>(b'|', 1);
const MEDIA_ENT_ID_FLAG_NEXT: u32 = 1 << 31;
const MEDIA_ENT_F_CAM_SENSOR: u32 = 0x0002_0001;

/// The decision, apart from the ioctls: a media device is a camera for
/// libcamera when it has a sensor and is not a USB camera (libcamera's
/// UVC handler reports those as external; V4L2 serves them directly).
pub fn takes_libcamera(driver: &str, functions: &[u32]) -> bool {
    driver != "uvcvideo" && functions.contains(&MEDIA_ENT_F_CAM_SENSOR)
}

/// Whether any /dev/mediaN is a camera for libcamera (`takes_libcamera`).
pub fn libcamera_sensor_present() -> bool {
    let Ok(dir) = fs::read_dir("/dev") else {
        return false;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("media"))
        .any(|e| {
            open(e.path(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                .ok()
                .and_then(|fd| describe(&fd))
                .is_some_and(|(driver, functions)| takes_libcamera(&driver, &functions))
        })
}

/// The device's driver and its entities' functions, or None if it is not
/// a media device that answers.
fn describe(fd: &OwnedFd) -> Option<(String, Vec<u32>)> {
    let mut info: media_device_info = zeroed();
    // SAFETY: MEDIA_IOC_DEVICE_INFO is built from media_device_info, which
    // holds no pointer.
    unsafe { update::<MEDIA_IOC_DEVICE_INFO, _>(fd.as_fd(), &mut info) }.ok()?;
    let mut functions = Vec::new();
    let mut id = 0;
    // Bounded: a device lists its entities once; the kernel ends the walk
    // with EINVAL.
    for _ in 0..256 {
        let mut e: media_entity_desc = zeroed();
        e.id = id | MEDIA_ENT_ID_FLAG_NEXT;
        // SAFETY: MEDIA_IOC_ENUM_ENTITIES is built from media_entity_desc,
        // which holds no pointer.
        if unsafe { update::<MEDIA_IOC_ENUM_ENTITIES, _>(fd.as_fd(), &mut e) }.is_err() {
            break;
        }
        functions.push(e.type_);
        id = e.id;
    }
    Some((super::device::cstr(&info.driver), functions))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IO_V4L: u32 = 0x0001_0001;

    #[test]
    fn sensors_not_on_usb_take_libcamera() {
        // unicam with an imx708 (a Camera Module 3), vimc.
        assert!(takes_libcamera("unicam", &[MEDIA_ENT_F_CAM_SENSOR, IO_V4L]));
        assert!(takes_libcamera("vimc", &[IO_V4L, MEDIA_ENT_F_CAM_SENSOR]));
        // A UVC camera's terminal is a sensor too, but V4L2 serves it.
        assert!(!takes_libcamera(
            "uvcvideo",
            &[MEDIA_ENT_F_CAM_SENSOR, IO_V4L]
        ));
        // vivid, the Pi's codec and ISP: video nodes, no sensor.
        assert!(!takes_libcamera("vivid", &[IO_V4L, IO_V4L]));
        assert!(!takes_libcamera("bcm2835-codec", &[IO_V4L]));
        assert!(!takes_libcamera("unicam", &[]));
    }
}
