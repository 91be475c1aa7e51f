//! Sound from a sound card (`[audio] device = "auto"` or an ALSA name),
//! through alsa-lib (the `alsa` crate). alsa-lib rather than the kernel's
//! ioctls: its `plughw` converts what a card lacks (a stereo-only USB
//! microphone, one at 44.1 kHz) to the 48 kHz mono the encoders take, and
//! it is what every ALSA name a user knows (`hw:CARD=Device,DEV=0`,
//! `plughw:1`) means.
//!
//! The card's clock is read as it runs: with each 20 ms read, alsa-lib's
//! status says how many samples had been captured at a CLOCK_MONOTONIC
//! instant (the kernel's timestamp of its last period), which the capture
//! clock's fit ties to the picture's clock.

use std::time::Duration;

use alsa::pcm::{Access, Format, HwParams, PCM, State, TstampType};
use alsa::{Direction, ValueOr};
use anyhow::{Context, Result, bail};

use super::encode::{FRAME, INPUT_RATE};
use crate::clock::Mono;

/// How long a read waits for the card before the loop looks at its stop
/// flag again.
const WAIT: Duration = Duration::from_millis(250);
/// The card's buffer: 200 ms, so a capture thread kept off the CPU that
/// long loses nothing.
const BUFFER_FRAMES: i64 = INPUT_RATE as i64 / 5;

/// A capture device the machine has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its ALSA name, `plughw:CARD=ID,DEV=N`.
    pub name: String,
    /// The card's driver: "USB-Audio" for USB microphones and webcams,
    /// "Loopback" for snd-aloop.
    pub driver: String,
    /// What the card calls itself ("USB PnP Sound Device").
    pub card: String,
}

/// The capture devices of every card, in the cards' order.
pub fn devices() -> Vec<Device> {
    let mut found = Vec::new();
    for card in alsa::card::Iter::new().filter_map(Result::ok) {
        let Ok(ctl) = alsa::Ctl::from_card(&card, false) else {
            continue;
        };
        let Ok(info) = ctl.card_info() else {
            continue;
        };
        let (id, driver, name) = (
            info.get_id().unwrap_or_default().to_owned(),
            info.get_driver().unwrap_or_default().to_owned(),
            info.get_name().unwrap_or_default().to_owned(),
        );
        for dev in alsa::ctl::DeviceIter::new(&ctl) {
            let Ok(dev) = u32::try_from(dev) else {
                continue;
            };
            if ctl.pcm_info(dev, 0, Direction::Capture).is_ok() {
                found.push(Device {
                    name: format!("plughw:CARD={id},DEV={dev}"),
                    driver: driver.clone(),
                    card: name.clone(),
                });
            }
        }
    }
    found
}

/// What `device = "auto"` captures from: a USB device first (a
/// microphone, or a webcam's own), else any card's first capture device;
/// never a loopback card's (it carries what something else plays, not
/// the room).
pub fn choose(devices: &[Device]) -> Option<&Device> {
    let room = || devices.iter().filter(|d| d.driver != "Loopback");
    room().find(|d| d.driver == "USB-Audio").or_else(|| room().next())
}

/// One read's samples: where they begin in the count since the device
/// was opened, and a point of the card's clock.
pub struct Read {
    pub first: u64,
    /// Sample `.0` was being captured at `.1`.
    pub seen: (u64, Mono),
}

/// What a read gave.
pub enum Got {
    Frame(Read),
    /// Nothing within [`WAIT`].
    Nothing,
    /// The buffer overran (the thread was kept off the CPU): samples were
    /// lost and the count begins at 0 again.
    Restarted,
}

/// An open capture device, started.
pub struct Capture {
    pcm: PCM,
    /// Samples read since it was opened (or overran).
    count: u64,
    /// Samples of the frame being filled.
    filled: usize,
}

impl Capture {
    /// Opens `name` for 48 kHz mono 16-bit capture (alsa-lib's `plughw`
    /// converts where the card cannot) and starts it.
    pub fn open(name: &str) -> Result<Capture> {
        let pcm = PCM::new(name, Direction::Capture, true).with_context(|| format!("opening {name}"))?;
        {
            let hw = HwParams::any(&pcm)?;
            hw.set_access(Access::RWInterleaved)?;
            hw.set_format(Format::s16())
                .and_then(|_| hw.set_channels(1))
                .and_then(|_| hw.set_rate(INPUT_RATE, ValueOr::Nearest))
                .with_context(|| {
                    format!("{name} cannot capture 48 kHz mono 16-bit: name its plughw: device instead")
                })?;
            hw.set_period_size_near(FRAME as i64, ValueOr::Nearest)?;
            hw.set_buffer_size_near(BUFFER_FRAMES)?;
            pcm.hw_params(&hw).with_context(|| format!("setting up {name}"))?;
        }
        {
            let sw = pcm.sw_params_current()?;
            sw.set_tstamp_mode(true)?;
            sw.set_tstamp_type(TstampType::Monotonic)?;
            pcm.sw_params(&sw)?;
        }
        pcm.start().with_context(|| format!("starting {name}"))?;
        Ok(Capture {
            pcm,
            count: 0,
            filled: 0,
        })
    }

    /// Fills `pcm` with the next [`FRAME`] samples as they come, waiting
    /// at most [`WAIT`] for each part of it.
    pub fn read(&mut self, pcm: &mut [i16; FRAME]) -> Result<Got> {
        while self.filled < FRAME {
            if !self.pcm.wait(Some(WAIT.as_millis() as u32)).or_else(|e| self.recover(e))? {
                return Ok(if self.pcm.state() == State::XRun {
                    self.restart()?
                } else {
                    Got::Nothing
                });
            }
            let rest = pcm.get_mut(self.filled..).unwrap_or_default();
            let read = self.pcm.io_i16()?.readi(rest);
            match read {
                Ok(n) => self.filled += n,
                Err(e) if e.errno() == libc::EAGAIN => {}
                Err(e) if e.errno() == libc::EPIPE => return self.restart(),
                Err(e) => return Err(e).context("reading the sound card"),
            }
        }
        self.filled = 0;
        let first = self.count;
        self.count += FRAME as u64;
        let status = self.pcm.status()?;
        let ts = status.get_htstamp();
        // Samples captured by the timestamp's instant: those read and
        // those waiting. A driver without timestamps gives 0: now, then.
        let at = if ts.tv_sec > 0 {
            Mono(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
        } else {
            Mono::now()
        };
        let waiting = u64::try_from(status.get_avail()).unwrap_or(0);
        Ok(Got::Frame(Read {
            first,
            seen: (self.count + waiting, at),
        }))
    }

    /// A `wait`'s error: an overrun or a suspend is recovered from (the
    /// read after says it restarted), anything else is the device gone.
    fn recover(&self, e: alsa::Error) -> Result<bool> {
        if e.errno() == libc::EPIPE || e.errno() == libc::ESTRPIPE {
            return Ok(false);
        }
        Err(e).context("waiting for the sound card")
    }

    fn restart(&mut self) -> Result<Got> {
        self.pcm.prepare().context("restarting the sound card after an overrun")?;
        self.pcm.start().context("restarting the sound card after an overrun")?;
        self.count = 0;
        self.filled = 0;
        Ok(Got::Restarted)
    }
}

/// The device `name` names, checked before the first client comes: a
/// wrong name is said at start, not when someone listens.
pub fn check(name: &str) -> Result<()> {
    if let Err(e) = PCM::new(name, Direction::Capture, true) {
        // Busy is a device that is there (another program has it).
        if e.errno() != libc::EBUSY {
            bail!("audio.device {name:?}: {e} (what the machine has: {})", listing());
        }
    }
    Ok(())
}

/// The capture devices, for messages.
pub fn listing() -> String {
    let all = devices();
    if all.is_empty() {
        return "no capture device".into();
    }
    all.iter()
        .map(|d| format!("{} ({}, {})", d.name, d.card, d.driver))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, driver: &str) -> Device {
        Device {
            name: name.into(),
            driver: driver.into(),
            card: String::new(),
        }
    }

    #[test]
    fn auto_prefers_usb_and_never_takes_a_loopback() {
        let aloop = dev("plughw:CARD=Loopback,DEV=0", "Loopback");
        let hat = dev("plughw:CARD=sndrpii2scard,DEV=0", "snd_rpi_i2s_card");
        let usb = dev("plughw:CARD=Device,DEV=0", "USB-Audio");
        assert_eq!(choose(&[aloop.clone(), hat.clone(), usb.clone()]), Some(&usb));
        assert_eq!(choose(&[aloop.clone(), hat.clone()]), Some(&hat));
        assert_eq!(choose(&[aloop]), None);
        assert_eq!(choose(&[]), None);
    }
}
