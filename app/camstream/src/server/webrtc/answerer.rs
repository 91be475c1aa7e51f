//! Answering WHEP offers off the event loop: str0m reads a browser's 5 KB
//! offer in about 1.3 ms and makes the peer connection in 0.7 ms more on
//! the development machine (`offer_cost`), some 8 times that on a Pi 3,
//! and no request may cost a viewer a frame. One thread takes one offer at
//! a time; the HTTP request waits (parked) until its answer comes back
//! with the peer connection, which the loop then owns.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Instant;

use str0m::config::DtlsCert;

use super::Made;
use super::super::conn::ConnId;

/// Offers queued or being answered at once; more get 503.
pub const MAX_JOBS: usize = 4;

pub struct Job {
    /// The request waiting for it.
    pub ci: ConnId,
    pub sdp: String,
    pub cert: DtlsCert,
    pub send_buffer: usize,
    pub candidates: Vec<SocketAddr>,
    /// The camera's sound's codec, where browsers take it.
    pub sound: Option<str0m::format::Codec>,
}


pub struct Answerer {
    jobs: SyncSender<Job>,
    done: Receiver<(ConnId, Made)>,
}

impl Answerer {
    /// Starts the thread; `wake` wakes the loop when an offer is answered.
    pub fn start(wake: Arc<mio::Waker>) -> std::io::Result<Answerer> {
        let (jobs, take) = sync_channel::<Job>(MAX_JOBS);
        let (give, done) = sync_channel(MAX_JOBS);
        std::thread::Builder::new()
            .name("webrtc-offers".into())
            .spawn(move || {
                while let Ok(j) = take.recv() {
                    let made =
                        super::peer_connection(&j.sdp, &j.cert, j.send_buffer, &j.candidates, j.sound, Instant::now());
                    if give.send((j.ci, made)).is_err() {
                        return;
                    }
                    let _ = wake.wake();
                }
            })?;
        Ok(Answerer { jobs, done })
    }

    /// Queues an offer; gives it back if MAX_JOBS are queued already.
    pub fn ask(&self, job: Job) -> Result<(), Job> {
        self.jobs.try_send(job).map_err(|e| match e {
            std::sync::mpsc::TrySendError::Full(j) | std::sync::mpsc::TrySendError::Disconnected(j) => j,
        })
    }

    /// An offer answered, if one is.
    pub fn done(&self) -> Option<(ConnId, Made)> {
        self.done.try_recv().ok()
    }
}
