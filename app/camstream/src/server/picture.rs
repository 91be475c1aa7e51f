//! The picture settings, read and set by a thread of their own: a camera
//! may take its time to answer a control (a UVC webcam's answer comes
//! over USB, in up to seconds), and no viewer may lose a frame to it. A
//! request for them (HTTP's /picture, ONVIF's Imaging) waits, parked, for
//! its job; the loop answers it when the thread is done. The same thread
//! keeps what was set in camstream.picture.toml: a write and its sync may
//! take a card's while, and a burst of changes is one write.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use camstream_onvif::access::{AccessClass, UserLevel};

use super::conn::ConnId;
use crate::config::Config;
use crate::source::controls::ControlSetting;
use crate::source::picture::{self, Controls, Setting};

/// Jobs queued at once: each is a few ioctls, and a request parks until
/// its own is done, so only as many clients wait at once.
const MAX_JOBS: usize = 8;
/// Jobs of one client address queued at once: a viewer's reads cannot
/// fill the queue and keep an operator's change out.
const MAX_JOBS_PER_ADDRESS: usize = 2;

/// What a request asks of the camera.
pub enum Ask {
    /// The settings as they are now.
    Read,
    /// Changes, all or none (checked against the names offered).
    Set(Vec<ControlSetting>),
}

/// Whom a job answers.
pub enum Reply {
    Http {
        peer: SocketAddr,
        user: Option<String>,
        head_only: bool,
    },
    Onvif {
        peer: SocketAddr,
        admitted: bool,
        signed_in: Option<String>,
    },
}

impl Reply {
    fn peer(&self) -> IpAddr {
        match self {
            Reply::Http { peer, .. } | Reply::Onvif { peer, .. } => peer.ip(),
        }
    }
}

pub struct Job {
    pub ci: ConnId,
    pub ask: Ask,
    pub reply: Reply,
}

/// A job done: the settings as they are after it, or why the camera
/// refused the change (nothing of it was set).
pub struct Done {
    pub ci: ConnId,
    pub ask: Ask,
    pub reply: Reply,
    pub result: Result<Vec<Setting>, String>,
}

/// The loop's side: the queue to the thread and what comes back.
pub struct Picture {
    /// What the file keeps, until the thread starts with it.
    kept: Vec<ControlSetting>,
    file: Option<PathBuf>,
    waker: Option<Arc<mio::Waker>>,
    worker: Option<Worker>,
    /// The address of each job queued or running.
    queued: Vec<IpAddr>,
}

struct Worker {
    jobs: SyncSender<(Job, Arc<dyn Controls>)>,
    done: Arc<Mutex<Vec<Done>>>,
}

impl Picture {
    pub fn new(cfg: &Config) -> Picture {
        Picture {
            kept: cfg.source.picture.clone(),
            file: cfg.picture_file.clone(),
            waker: None,
            worker: None,
            queued: Vec::new(),
        }
    }

    /// The waker that tells the loop a job is done (the workers' one).
    pub fn wake_with(&mut self, waker: Arc<mio::Waker>) {
        self.waker = Some(waker);
    }

    /// Whether `user` (None: no users are set, the camera is open to its
    /// client) may change the picture: ONVIF's Actuate class, an
    /// operator's or an administrator's.
    pub fn allowed(cfg: &Config, user: Option<&str>) -> Result<(), String> {
        let Some(name) = user else {
            return Ok(());
        };
        match cfg.user_level(name) {
            Some(l) if l.may(AccessClass::Actuate) => Ok(()),
            l => Err(format!(
                "user {name:?} ({}) may not change the picture: an operator or administrator may",
                l.map_or_else(|| "unknown".to_owned(), |l: UserLevel| l.to_string())
            )),
        }
    }

    /// Queues `job` on the camera's `controls`; the thread starts with the
    /// first. Err: the queue is full, or holds as many of this address's
    /// as it takes (or no thread could start), and the job is handed back
    /// to be refused.
    pub fn ask(&mut self, controls: Arc<dyn Controls>, job: Job) -> Result<(), Job> {
        let peer = job.reply.peer();
        if self.queued.iter().filter(|a| **a == peer).count() >= MAX_JOBS_PER_ADDRESS {
            return Err(job);
        }
        if self.worker.is_none() {
            let Some(waker) = self.waker.clone() else {
                return Err(job);
            };
            let (jobs, rx) = sync_channel(MAX_JOBS);
            let done = Arc::new(Mutex::new(Vec::new()));
            let thread = Thread {
                jobs: rx,
                done: done.clone(),
                waker,
                kept: std::mem::take(&mut self.kept),
                file: self.file.clone(),
            };
            let started = std::thread::Builder::new()
                .name("picture".into())
                .spawn(move || thread.run());
            if let Err(e) = started {
                log::warn!("picture settings: no thread to read and set them ({e})");
                return Err(job);
            }
            self.worker = Some(Worker { jobs, done });
        }
        let Some(w) = &self.worker else {
            return Err(job);
        };
        w.jobs.try_send((job, controls)).map_err(|e| match e {
            TrySendError::Full((job, _)) | TrySendError::Disconnected((job, _)) => job,
        })?;
        self.queued.push(peer);
        Ok(())
    }

    /// The jobs done since last asked.
    pub fn done(&mut self) -> Vec<Done> {
        let Some(w) = &self.worker else {
            return Vec::new();
        };
        let done = std::mem::take(&mut *w.done.lock().unwrap_or_else(|e| e.into_inner()));
        for d in &done {
            let peer = d.reply.peer();
            if let Some(i) = self.queued.iter().position(|a| *a == peer) {
                self.queued.swap_remove(i);
            }
        }
        done
    }
}

struct Thread {
    jobs: Receiver<(Job, Arc<dyn Controls>)>,
    done: Arc<Mutex<Vec<Done>>>,
    waker: Arc<mio::Waker>,
    /// Every setting changed since the file was made.
    kept: Vec<ControlSetting>,
    file: Option<PathBuf>,
}

impl Thread {
    fn run(mut self) {
        let mut unwritten = false;
        loop {
            // The file is written once the jobs queued are done.
            let next = if unwritten {
                match self.jobs.try_recv() {
                    Ok(j) => Some(j),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => return self.write(),
                }
            } else {
                match self.jobs.recv() {
                    Ok(j) => Some(j),
                    Err(_) => return,
                }
            };
            let Some((job, controls)) = next else {
                self.write();
                unwritten = false;
                continue;
            };
            let result = match &job.ask {
                Ask::Read => Ok(controls.read()),
                Ask::Set(changes) => controls.set(changes).map(|()| {
                    picture::merge(&mut self.kept, changes);
                    unwritten = true;
                    controls.known()
                }),
            };
            self.done.lock().unwrap_or_else(|e| e.into_inner()).push(Done {
                ci: job.ci,
                ask: job.ask,
                reply: job.reply,
                result,
            });
            if let Err(e) = self.waker.wake() {
                log::warn!("picture settings: the loop was not told ({e})");
            }
        }
    }

    fn write(&self) {
        let Some(path) = &self.file else {
            return;
        };
        if let Err(e) = crate::config::digests::write_kept(path, &picture::file_text(&self.kept)) {
            log::warn!("{}: picture settings not kept: {e}", path.display());
        }
    }
}
