//! Frames from the source made sendable, once, before the fan-out: each is
//! parsed, and the few RTP/JPEG cannot carry as they are go through the
//! normalizer. What could not be made sendable is counted by reason and
//! refused; the counts are what the log and /metrics report.

use anyhow::Result;
use camstream_rtp::jpeg::{self, Jpeg, JpegError};

use crate::clock::Mono;
use crate::normalize::Normalizer;

/// The first of each kind is logged at once, then at most one line this often.
const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Reasons a frame is repaired: each [`JpegError`], then a size that is not
/// a multiple of 8 (cropped).
pub const REPAIR_REASONS: usize = JpegError::ALL.len() + 1;

/// The name of repair reason `i` (as in logs and /metrics).
pub fn repair_reason(i: usize) -> &'static str {
    JpegError::ALL
        .get(i)
        .map_or("size-not-multiple-of-8", |e| e.name())
}

#[derive(Default)]
pub struct Counts {
    pub frames_in: u64,
    /// Frames that came out sendable.
    pub frames_taken: u64,
    pub refused: [u64; JpegError::ALL.len()],
    pub repaired: [u64; REPAIR_REASONS],
}

pub struct Intake {
    normalizer: Normalizer,
    pub counts: Counts,
    refused_logged_at: [Option<Mono>; JpegError::ALL.len()],
    repaired_logged_at: [Option<Mono>; REPAIR_REASONS],
}

impl Intake {
    /// `max_pixels`: the most a frame may have.
    pub fn new(quality: u8, max_pixels: usize) -> Result<Intake> {
        Ok(Intake {
            normalizer: Normalizer::new(quality, max_pixels)?,
            counts: Counts::default(),
            refused_logged_at: Default::default(),
            repaired_logged_at: Default::default(),
        })
    }

    /// `frame` parsed and ready to send, or None (counted, logged) if it
    /// cannot be. Conformant frames are not touched.
    pub fn take<'a>(&'a mut self, frame: &'a [u8]) -> Option<Jpeg<'a>> {
        self.counts.frames_in += 1;
        let fault = match jpeg::parse(frame) {
            Ok(j) if j.width % 8 == 0 && j.height % 8 == 0 => {
                self.counts.frames_taken += 1;
                return Some(j);
            }
            Ok(_) => None,
            Err(e) if e.remedy().is_none() => {
                refuse(&mut self.counts, &mut self.refused_logged_at, e, None);
                return None;
            }
            Err(e) => Some(e),
        };
        match self.normalizer.normalize(frame, fault) {
            Ok((j, repair)) => {
                let i = fault.map_or(JpegError::ALL.len(), JpegError::index);
                self.counts.repaired[i] += 1;
                self.counts.frames_taken += 1;
                if due(&mut self.repaired_logged_at[i]) {
                    let what = fault.map_or_else(
                        || "a size that is not a multiple of 8".to_string(),
                        |e| e.to_string(),
                    );
                    log::info!(
                        "frames with {what}: {} ({} so far)",
                        repair.describe(),
                        self.counts.repaired[i]
                    );
                }
                Some(j)
            }
            Err(why) => {
                let e = fault.unwrap_or(JpegError::Malformed);
                let why = format!("{why:#}");
                refuse(&mut self.counts, &mut self.refused_logged_at, e, Some(&why));
                None
            }
        }
    }

    /// "name count, ..." of the nonzero counts, or "none".
    pub fn summary(counts: &[u64]) -> String {
        let parts: Vec<String> = counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| format!("{} {n}", repair_reason(i)))
            .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }
}

fn due(last: &mut Option<Mono>) -> bool {
    let now = Mono::now();
    let due = last.is_none_or(|t| now.saturating_sub(t) >= LOG_EVERY);
    if due {
        *last = Some(now);
    }
    due
}

fn refuse(
    counts: &mut Counts,
    logged_at: &mut [Option<Mono>; JpegError::ALL.len()],
    e: JpegError,
    repair_failed: Option<&str>,
) {
    let i = e.index();
    counts.refused[i] += 1;
    if due(&mut logged_at[i]) {
        let why = match repair_failed {
            Some(r) => format!("could not be repaired: {r}"),
            None => "RTP/JPEG carries baseline 4:2:2/4:2:0 with standard Huffman tables".into(),
        };
        log::warn!("frame not sent: {e} ({} so far; {why})", counts.refused[i]);
    }
}
