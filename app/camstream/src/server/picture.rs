//! The picture settings the loop keeps: set on the source, all or none,
//! then kept in camstream.picture.toml by a thread of their own (a write
//! and its sync may take a card's while; no viewer waits for it). Only the
//! latest settings wait to be written: a burst of changes is one write.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use camstream_onvif::access::{AccessClass, UserLevel};

use crate::config::Config;
use crate::source::FrameSource;
use crate::source::controls::ControlSetting;
use crate::source::picture::{self, MAX_CHANGES};

pub struct Picture {
    /// What the file keeps: every setting changed since it was made.
    kept: Vec<ControlSetting>,
    file: Option<PathBuf>,
    saver: Option<Arc<Saver>>,
}

#[derive(Default)]
struct Saver {
    next: Mutex<Option<String>>,
    ready: Condvar,
}

/// Why a change was not made, as HTTP and ONVIF say it.
#[derive(Debug)]
pub enum Refusal {
    /// The user may watch but not change the camera.
    NotAllowed(String),
    /// No such setting, a value out of range, or the camera refused it.
    Invalid(String),
}

impl Picture {
    pub fn new(cfg: &Config) -> Picture {
        Picture {
            kept: cfg.source.picture.clone(),
            file: cfg.picture_file.clone(),
            saver: None,
        }
    }

    /// Whether `user` (None: no users are set, the camera is open to its
    /// client) may change the picture: ONVIF's Actuate class, an
    /// operator's or an administrator's.
    pub fn allowed(cfg: &Config, user: Option<&str>) -> Result<(), Refusal> {
        let Some(name) = user else {
            return Ok(());
        };
        match cfg.user_level(name) {
            Some(l) if l.may(AccessClass::Actuate) => Ok(()),
            l => Err(Refusal::NotAllowed(format!(
                "user {name:?} ({}) may not change the picture: an operator or administrator may",
                l.map_or_else(|| "unknown".to_owned(), |l: UserLevel| l.to_string())
            ))),
        }
    }

    /// Sets `changes` on the camera, all or none, and keeps them.
    pub fn set(
        &mut self,
        source: Option<&mut (dyn FrameSource + 'static)>,
        changes: &[ControlSetting],
    ) -> Result<(), Refusal> {
        if changes.len() > MAX_CHANGES {
            return Err(Refusal::Invalid(format!("over {MAX_CHANGES} settings at once")));
        }
        let source = source.ok_or_else(|| Refusal::Invalid("no camera yet".into()))?;
        source.set_picture(changes).map_err(Refusal::Invalid)?;
        picture::merge(&mut self.kept, changes);
        self.save();
        Ok(())
    }

    fn save(&mut self) {
        let Some(path) = &self.file else {
            return;
        };
        let text = picture::file_text(&self.kept);
        let saver = match &self.saver {
            Some(s) => s,
            None => {
                let s = Arc::new(Saver::default());
                let mine = s.clone();
                let path = path.clone();
                let started = std::thread::Builder::new()
                    .name("picture".into())
                    .spawn(move || mine.run(&path));
                if let Err(e) = started {
                    log::warn!("picture settings not kept: no thread to write them ({e})");
                    return;
                }
                self.saver.insert(s)
            }
        };
        *saver.next.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
        saver.ready.notify_one();
    }
}

impl Saver {
    fn run(&self, path: &std::path::Path) {
        loop {
            let text = {
                let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(t) = next.take() {
                        break t;
                    }
                    next = self.ready.wait(next).unwrap_or_else(|e| e.into_inner());
                }
            };
            if let Err(e) = crate::config::digests::write_kept(path, &text) {
                log::warn!("{}: picture settings not kept: {e}", path.display());
            }
        }
    }
}
