//! Checking a password against a user's password hash (Raspberry Pi
//! Imager's yescrypt), off the event loop: the hash is slow and takes
//! 16 MiB by design, and no sign-in may cost a viewer a frame.
//!
//! One thread, started only when the config sets a user from a hash,
//! checks one password at a time. A connection waits for its check (the
//! HTTP side parks its request); the same name and password asked for
//! again while one is being checked wait for that one. At most
//! [`MAX_JOBS`] checks are queued, one per client address, so a guesser
//! cannot queue more; a wrong password holds the thread for a further
//! [`AFTER_WRONG`], so guesses come one a second at most. A match's
//! digests are learnt by the gate and written to the digests file
//! (config::digests) here, off the loop too.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::time::Duration;

use camstream_rtsp::auth::User;

use super::conn::ConnId;
use crate::config::{self, HashedUser, crypt, digests};

/// Checks queued or running at once.
pub const MAX_JOBS: usize = 4;
/// How long a wrong password keeps the thread from the next check.
const AFTER_WRONG: Duration = Duration::from_secs(1);

/// A request's Basic credentials for a user known by a hash.
pub struct Job {
    pub ci: ConnId,
    pub peer: IpAddr,
    pub name: String,
    pub password: String,
}

/// How a check went, for each request that waited for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The password is the user's: the gate knows the user's digests now.
    Matched,
    Wrong,
    /// Too many checks queued (or one from this address already): not
    /// checked.
    Busy,
}

struct Asked {
    name: String,
    password: String,
}

struct Answer {
    name: String,
    password: String,
    user: Option<User>,
}

struct Queued {
    name: String,
    password: String,
    peer: IpAddr,
    waiting: Vec<ConnId>,
}

pub struct Verifier {
    jobs: SyncSender<Asked>,
    answers: Receiver<Answer>,
    queued: Vec<Queued>,
}

impl Verifier {
    /// Starts the thread if the config sets users from a hash; `done`
    /// wakes the loop when a check is over.
    pub fn start(cfg: &config::Config, done: Arc<mio::Waker>) -> Option<Verifier> {
        if cfg.hashed_users.is_empty() {
            return None;
        }
        let (jobs, asked) = sync_channel::<Asked>(MAX_JOBS);
        let (answer, answers) = sync_channel::<Answer>(MAX_JOBS);
        let mut users = cfg.hashed_users.clone();
        let file = cfg.digests_file.clone();
        let spawned = std::thread::Builder::new()
            .name("verifier".into())
            .spawn(move || {
                for a in asked {
                    let user = check(&mut users, file.as_ref(), &a);
                    let wrong = user.is_none();
                    let sent = answer.send(Answer {
                        name: a.name,
                        password: a.password,
                        user,
                    });
                    if sent.is_err() || done.wake().is_err() {
                        return;
                    }
                    if wrong {
                        std::thread::sleep(AFTER_WRONG);
                    }
                }
            });
        match spawned {
            Ok(_) => Some(Verifier {
                jobs,
                answers,
                queued: Vec::new(),
            }),
            Err(e) => {
                log::error!("cannot start the password hash checker: {e}; users set from a hash cannot sign in");
                None
            }
        }
    }

    /// Queues a check; Err: not queued (busy), to be answered as such.
    pub fn ask(&mut self, job: Job) -> Result<(), Job> {
        if let Some(q) = self
            .queued
            .iter_mut()
            .find(|q| q.name == job.name && q.password == job.password)
        {
            q.waiting.push(job.ci);
            return Ok(());
        }
        if self.queued.len() >= MAX_JOBS || self.queued.iter().any(|q| q.peer == job.peer) {
            return Err(job);
        }
        let asked = Asked {
            name: job.name.clone(),
            password: job.password.clone(),
        };
        if self.jobs.try_send(asked).is_err() {
            return Err(job);
        }
        self.queued.push(Queued {
            name: job.name,
            password: job.password,
            peer: job.peer,
            waiting: vec![job.ci],
        });
        Ok(())
    }

    /// The checks over since last asked: the user learnt, if any, and the
    /// connections that waited, with the outcome.
    pub fn done(&mut self) -> Vec<(Option<User>, Vec<ConnId>)> {
        let mut out = Vec::new();
        loop {
            match self.answers.try_recv() {
                Ok(a) => {
                    let Some(i) = self
                        .queued
                        .iter()
                        .position(|q| q.name == a.name && q.password == a.password)
                    else {
                        continue;
                    };
                    out.push((a.user, self.queued.swap_remove(i).waiting));
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return out,
            }
        }
    }
}

/// The thread's side of one check: the user's digests if `a`'s password
/// matches its hash, kept in the digests file.
fn check(users: &mut [HashedUser], file: Option<&PathBuf>, a: &Asked) -> Option<User> {
    let h = users.iter_mut().find(|h| h.name == a.name)?;
    if !crypt::verify(&h.hash, &a.password) {
        return None;
    }
    let user = User::from_password(&a.name, config::REALM, &a.password);
    h.learnt = Some(user.clone());
    log::info!("user {:?} signed in with its password hash: its digests are learnt", a.name);
    if let Some(path) = file {
        if let Err(e) = digests::write(path, users) {
            log::warn!(
                "cannot keep the digests in {}: {e}; user {:?} signs in again after a restart",
                path.display(),
                a.name
            );
        }
    }
    Some(user)
}
