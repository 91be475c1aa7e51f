//! ONVIF's event service, served while motion detection runs: a client
//! subscribes (CreatePullPointSubscription) and gets an address of its
//! own, where it pulls what changed. A PullMessages that finds nothing
//! waits without holding the event loop: its connection is parked, and
//! answered when motion starts or stops, or once its Timeout has passed
//! (the loop's tick looks). Subscriptions are camstream_onvif's, bounded
//! there (docs/SECURITY.md).

use std::time::Duration;

use camstream_onvif::events::{self as ev, Notification, Refusal, Subscriptions};
use camstream_onvif::soap::{Fault, Request as Soap};

use super::Answer;
use crate::clock::{Mono, wall_now};
use crate::random::random_fill;
use crate::server::conn::ConnId;

pub const PATH: &str = "/onvif/events_service";
/// A subscription's address: this, then its id (64 random bits in hex).
pub const PULLPOINT: &str = "/onvif/events_service/pullpoint/";
/// The longest a PullMessages waits, whatever its Timeout.
const MAX_WAIT: i64 = 60;
/// The most notifications one answer carries.
const MAX_LIMIT: usize = 100;

/// The tokens the notifications name: the video source (and its one
/// configuration, which has its token), the analytics configuration and
/// rule motion detection stands for.
const SOURCE: ev::Source<'static> = ev::Source {
    video_source: "camera",
    video_source_configuration: "camera",
    analytics: "motion",
    rule: "motion",
};

pub fn is_path(path: &str) -> bool {
    path == PATH || path.starts_with(PULLPOINT)
}

/// A PullMessages waiting for its subscription's next notification.
struct Parked {
    ci: ConnId,
    id: u64,
    until: Mono,
    limit: usize,
    admitted: bool,
    signed_in: Option<String>,
}

/// What a request comes to: an answer now, or a pull to park.
pub enum Reply {
    Xml(String),
    Wait { id: u64, until: Mono, limit: usize },
}

#[derive(Default)]
pub struct Events {
    subs: Subscriptions,
    parked: Vec<Parked>,
    /// Motion as the subscriptions last heard of it.
    moving: bool,
}

fn now_s() -> i64 {
    (wall_now().0 / 1_000_000_000) as i64
}

fn refused(r: Refusal) -> Fault {
    match r {
        Refusal::NotYours => Fault::not_authorized(),
        Refusal::Unknown => Fault::sender(&["ter:InvalidArgVal", "ter:ResourceUnknown"], r.describe()),
        Refusal::TooMany { .. } => Fault::receiver(&["ter:Action", "ter:TooManySubscriptions"], r.describe()),
    }
}

impl Events {
    pub fn subscriptions(&self) -> usize {
        self.subs.len()
    }

    /// A request to the event service (`path`: its address or a
    /// subscription's) from `user` (None: no users are set).
    pub fn handle(
        &mut self,
        path: &str,
        soap: &Soap,
        user: Option<&str>,
        host: &str,
        moving: bool,
    ) -> Result<Reply, Fault> {
        let op = soap.operation();
        let now = now_s();
        let Some(id) = path.strip_prefix(PULLPOINT) else {
            return Ok(Reply::Xml(match op {
                "GetServiceCapabilities" => ev::service_capabilities(),
                "GetEventProperties" => ev::event_properties(),
                "CreatePullPointSubscription" => {
                    // The topics its Filter names (all without one).
                    let topics = ev::subscription_filter(soap)
                        .map_err(|e| Fault::sender(e.subcodes(), e.describe()))?;
                    let until = match soap.arg(&["InitialTerminationTime"]) {
                        None => None,
                        Some(t) => Some(ev::parse_termination(t, now).ok_or_else(|| {
                            Fault::invalid_arg_val(
                                "ter:InvalidArgVal",
                                "InitialTerminationTime is neither an xs:duration nor an xs:dateTime",
                            )
                        })?),
                    };
                    let expires = self.subs.term(now, until);
                    let mut id = 0;
                    while id == 0 || self.subs.exists(id) {
                        let mut b = [0u8; 8];
                        random_fill(&mut b);
                        id = u64::from_ne_bytes(b);
                    }
                    self.subs
                        .create(id, user, expires, topics, &ev::state(moving, now))
                        .map_err(refused)?;
                    log::info!(
                        "ONVIF: user {:?} subscribed to motion events until {expires} ({} subscriptions)",
                        user.unwrap_or(""),
                        self.subs.len()
                    );
                    let address = format!("http://{host}{PULLPOINT}{}", ev::id_text(id));
                    ev::create_pull_point(&address, now, expires)
                }
                _ => return Err(Fault::action_not_supported(op)),
            }));
        };
        let id = ev::parse_id(id).ok_or_else(|| refused(Refusal::Unknown))?;
        Ok(Reply::Xml(match op {
            "PullMessages" => {
                let timeout = soap
                    .arg(&["Timeout"])
                    .and_then(ev::parse_duration)
                    .ok_or_else(|| {
                        Fault::invalid_arg_val("ter:InvalidArgVal", "Timeout is not an xs:duration")
                    })?;
                let limit = soap
                    .arg(&["MessageLimit"])
                    .and_then(|l| l.trim().parse::<usize>().ok())
                    .ok_or_else(|| {
                        Fault::invalid_arg_val("ter:InvalidArgVal", "MessageLimit is not a number")
                    })?
                    .min(MAX_LIMIT);
                let s = self.subs.find(id, user).map_err(refused)?;
                if s.is_empty() && timeout > 0 && limit > 0 {
                    let wait = Duration::from_secs(timeout.min(MAX_WAIT) as u64);
                    // One pull waits per subscription: an earlier one is
                    // answered (empty) at the next tick.
                    for p in self.parked.iter_mut().filter(|p| p.id == id) {
                        p.until = Mono::now();
                    }
                    return Ok(Reply::Wait {
                        id,
                        until: Mono::now().add(wait),
                        limit,
                    });
                }
                let notes = s.take(limit);
                ev::pull_messages(now, s.expires, &notes, &SOURCE)
            }
            "Renew" => {
                let until = soap
                    .arg(&["TerminationTime"])
                    .map(|t| {
                        ev::parse_termination(t, now).ok_or_else(|| {
                            Fault::invalid_arg_val(
                                "ter:InvalidArgVal",
                                "TerminationTime is neither an xs:duration nor an xs:dateTime",
                            )
                        })
                    })
                    .transpose()?;
                let expires = self.subs.term(now, until);
                self.subs.find(id, user).map_err(refused)?.expires = expires;
                ev::renew(now, expires)
            }
            "Unsubscribe" => {
                self.subs.remove(id, user).map_err(refused)?;
                log::info!(
                    "ONVIF: user {:?} unsubscribed ({} subscriptions)",
                    user.unwrap_or(""),
                    self.subs.len()
                );
                ev::unsubscribe()
            }
            "SetSynchronizationPoint" => {
                self.subs
                    .synchronize(id, user, &ev::state(moving, now))
                    .map_err(refused)?;
                ev::set_synchronization_point()
            }
            _ => return Err(Fault::action_not_supported(op)),
        }))
    }

    /// Parks the pull `ci` sent until `due` answers it.
    pub fn park(&mut self, ci: ConnId, reply: Reply, admitted: bool, signed_in: Option<String>) {
        if let Reply::Wait { id, until, limit } = reply {
            self.parked.push(Parked {
                ci,
                id,
                until,
                limit,
                admitted,
                signed_in,
            });
        }
    }

    /// Motion as the detector says it is now: a change is queued to
    /// every subscription (both topics). Says whether it changed.
    pub fn motion(&mut self, moving: bool) -> bool {
        if moving == self.moving {
            return false;
        }
        self.moving = moving;
        let utc = now_s();
        for n in ev::state(moving, utc) {
            self.subs.publish(Notification {
                initialized: false,
                ..n
            });
        }
        true
    }

    /// The parked pulls to answer now (something queued, the Timeout
    /// passed, or the subscription gone), after ending the subscriptions
    /// whose term is over. `open`: whether a connection is still there.
    pub fn due(&mut self, now: Mono, open: impl Fn(ConnId) -> bool) -> Vec<(ConnId, Answer)> {
        let ended = self.subs.expire(now_s());
        if ended > 0 {
            log::info!(
                "ONVIF: {ended} subscriptions ended at their termination time ({} left)",
                self.subs.len()
            );
        }
        let mut answers = Vec::new();
        let subs = &mut self.subs;
        self.parked.retain_mut(|p| {
            if !open(p.ci) {
                return false;
            }
            let xml = match subs.get_mut(p.id) {
                None => Err(refused(Refusal::Unknown)),
                Some(s) if !s.is_empty() || p.until.0 <= now.0 => {
                    let notes = s.take(p.limit);
                    Ok(ev::pull_messages(now_s(), s.expires, &notes, &SOURCE))
                }
                Some(_) => return true,
            };
            let (status, xml) = match xml {
                Ok(x) => (200, x),
                Err(f) => (f.http_status(), f.envelope()),
            };
            answers.push((
                p.ci,
                Answer::Soap {
                    status,
                    xml,
                    admitted: p.admitted,
                    signed_in: p.signed_in.take(),
                },
            ));
            false
        });
        answers
    }
}
