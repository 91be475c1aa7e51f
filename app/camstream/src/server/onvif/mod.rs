//! ONVIF's device and media services (Profile S) on the HTTP port: a POST's
//! body read whole, parsed and answered by camstream_onvif, behind the
//! same users as RTSP and HTTP (a UsernameToken for users given a password
//! for ONVIF, or HTTP Digest), the same no-default-password rule.

// PRE_AUTH: the operations ONVIF's Core specification serves without a
// user.
use camstream_onvif::access::{AccessClass, PRE_AUTH};
use camstream_onvif::soap::{Fault, Request as Soap};
use camstream_onvif::wsse::{Gate, Password, Refusal as TokenRefusal};
use camstream_onvif::xml::Limits;

pub mod discovery;

pub mod events;
pub mod imaging;
mod services;

use std::net::SocketAddr;

use crate::fanout::Fanout;
use crate::media::Producers;
use super::host::hostname;
use crate::random::random_fill;
use crate::clock::wall_now;
use crate::config::Config;

/// The services' paths.
pub const DEVICE_PATH: &str = "/onvif/device_service";
pub const MEDIA_PATH: &str = "/onvif/media_service";
/// How far a token's Created may be from the camera's clock, synchronised
/// or not (docs/ONVIF.md: clock skew).
const SKEW: i64 = 300;
/// Nonces of accepted tokens remembered per user, each for as long as its
/// Created is within SKEW (docs/SECURITY.md: over ONVIF).
const NONCES: usize = 4096;

/// The most a body is parsed with no user known yet (no HTTP Digest, no
/// UsernameToken in it): the operations served before sign-in, with
/// WS-Addressing's header, take under 1 KiB.
const PRE_AUTH_BODY: usize = 4096;

/// The camera as WS-Discovery announces it: an endpoint id that stays
/// across restarts (from /etc/machine-id, else the host name) and its
/// scopes.
pub fn endpoint() -> camstream_onvif::discovery::Endpoint {
    let seed = std::fs::read("/etc/machine-id").unwrap_or_else(|_| hostname().into_bytes());
    let mut instance = [0u8; 8];
    random_fill(&mut instance);
    camstream_onvif::discovery::Endpoint {
        address: camstream_onvif::discovery::endpoint_uuid(&seed),
        scopes: scopes(),
        xaddrs: Vec::new(),
        metadata_version: 0,
        instance_id: u64::from_ne_bytes(instance) >> 32,
    }
}

fn scopes() -> Vec<String> {
    use camstream_onvif::discovery::scope_segment;
    vec![
        "onvif://www.onvif.org/Profile/Streaming".into(),
        "onvif://www.onvif.org/type/video_encoder".into(),
        format!("onvif://www.onvif.org/name/{}", scope_segment(&hostname())),
        format!("onvif://www.onvif.org/hardware/{}", scope_segment(&board())),
    ]
}

/// The board camstream runs on, as its device tree names it ("Raspberry Pi
/// 4 Model B Rev 1.4"), else as its firmware tables do (a PC), else the
/// processor's architecture: what an NVR shows as the camera's hardware.
fn board() -> String {
    ["/proc/device-tree/model", "/sys/class/dmi/id/product_name"]
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .map(|b| {
            let s = String::from_utf8_lossy(&b);
            s.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                .to_owned()
        })
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.into())
}

pub fn is_service(path: &str) -> bool {
    path == DEVICE_PATH || path == MEDIA_PATH || path == imaging::PATH || events::is_path(path)
}

/// What the services keep between requests: the UsernameTokens taken,
/// the event service's subscriptions and the pulls waiting on them.
pub struct Onvif {
    gate: Gate,
    pub events: events::Events,
}

/// A whole request to a service, as the HTTP side read it.
pub struct Request {
    pub peer: SocketAddr,
    /// The service's path (or an event subscription's).
    pub path: String,
    pub body: Vec<u8>,
    /// The Host header: the address the client reached the camera by.
    pub host: Option<String>,
    /// The HTTP gate's verdict on the request's own credentials.
    pub http: HttpAuth,
    /// The user HTTP Digest (or Basic) named, when the gate took them.
    pub http_user: Option<String>,
}

/// What HTTP's gate said of a request's Authorization header.
pub enum HttpAuth {
    /// No users are set; the client may be served without credentials.
    Open,
    /// No users are set and the client is not this machine's: 403.
    Closed,
    User,
    /// No credentials, or wrong ones (stale: the right password on an
    /// expired nonce).
    Missing {
        stale: bool,
    },
    Malformed(&'static str),
}

/// The answer, for the HTTP side to write.
pub enum Answer {
    Soap {
        status: u16,
        xml: String,
        /// The request named a user (or needed none): its connection has
        /// authenticated.
        admitted: bool,
        /// The user a UsernameToken signed in (HTTP Digest's is counted
        /// by HTTP's gate): max_connections_per_user counts it.
        signed_in: Option<String>,
    },
    /// 401 with HTTP Digest's challenges.
    Challenge {
        stale: bool,
    },
    /// 403: no users, and the client is not this machine's.
    Forbidden,
    BadRequest(&'static str),
    /// A PullMessages with nothing to pull yet: its connection waits
    /// (parked with [`events::Events::park`]) for `due` to answer it.
    Wait {
        reply: events::Reply,
        admitted: bool,
        signed_in: Option<String>,
    },
    /// An Imaging request for the picture thread: its connection waits
    /// (parked) for the job, answered with [`imaging::finish`].
    Picture {
        controls: std::sync::Arc<dyn crate::source::picture::Controls>,
        ask: super::picture::Ask,
        admitted: bool,
        signed_in: Option<String>,
    },
}

impl Answer {
    /// An operation's answer or fault, as HTTP writes it.
    pub fn soap(result: Result<String, Fault>, admitted: bool, signed_in: Option<String>) -> Answer {
        let (status, xml) = match result {
            Ok(xml) => (200, xml),
            Err(fault) => (fault.http_status(), fault.envelope()),
        };
        Answer::Soap {
            status,
            xml,
            admitted,
            signed_in,
        }
    }
}

/// What a request may read or change of the rest.
pub struct Context<'a> {
    pub cfg: &'a Config,
    pub fanout: &'a mut Fanout,
    pub producers: &'a mut Producers,
    /// The camera, for its picture settings (Imaging).
    pub source: Option<&'a (dyn crate::source::FrameSource + 'static)>,
}

impl Default for Onvif {
    fn default() -> Onvif {
        Onvif {
            gate: Gate::new(SKEW, NONCES),
            events: events::Events::default(),
        }
    }
}

/// Whether the kernel's clock is synchronised (adjtimex: not TIME_ERROR).
fn clock_synchronised() -> bool {
    // SAFETY: adjtimex with modes = 0 only reads the kernel's clock state
    // into the zeroed struct it is given.
    unsafe {
        let mut t: libc::timex = std::mem::zeroed();
        libc::adjtimex(&mut t) != libc::TIME_ERROR
    }
}

impl Onvif {
    /// A whole SOAP request: parsed, let through or refused, answered.
    pub fn handle(&mut self, req: &Request, mut ctx: Context<'_>) -> Answer {
        let peer = req.peer;
        // An empty body is how curl --digest (and other HTTP clients that
        // send a body only once they know the server's challenge) asks for
        // the challenge: the gate answers it before the body is looked at.
        if req.body.is_empty() && !matches!(req.http, HttpAuth::Open | HttpAuth::User) {
            return http_refusal(&req.http);
        }
        // A large body with no user in sight is refused unread: it can be
        // none of the PRE_AUTH operations (docs/SECURITY.md, issue 51).
        if req.body.len() > PRE_AUTH_BODY
            && !matches!(req.http, HttpAuth::Open | HttpAuth::User)
            && !has_token(&req.body)
        {
            log::info!(
                "{peer}: ONVIF: a {}-byte body without a user, unread",
                req.body.len()
            );
            return http_refusal(&req.http);
        }
        let soap = match Soap::parse(&req.body, &Limits::default()) {
            Ok(s) => s,
            Err(fault) => {
                log::info!("{peer}: ONVIF: {}", fault.reason);
                return Answer::Soap {
                    status: fault.http_status(),
                    xml: fault.envelope(),
                    admitted: false,
                    signed_in: None,
                };
            }
        };
        let op = soap.operation().to_owned();
        // A token's user counts only once the token is checked: not for
        // the operations anyone may call.
        let (admitted, signed_in) = if PRE_AUTH.contains(&op.as_str()) {
            (matches!(req.http, HttpAuth::Open | HttpAuth::User), None)
        } else {
            match self.authorized(req, &soap, ctx.cfg) {
                Ok(()) => (true, token_user(req, &soap)),
                Err(refusal) => return refusal,
            }
        };
        if let Err(mut refusal) = permitted(req, &soap, &op, ctx.cfg) {
            if let Answer::Soap { signed_in: s, .. } = &mut refusal {
                *s = signed_in;
            }
            return refusal;
        }
        let answer = if events::is_path(&req.path) {
            let user = match req.http {
                HttpAuth::Open => None,
                _ => signed_in.clone().or_else(|| req.http_user.clone()),
            };
            let host = req.host.as_deref().unwrap_or("camera");
            match &ctx.producers.motion {
                None => Err(Fault::receiver(
                    &["ter:ActionNotSupported"],
                    "no events: motion detection is off ([motion] enabled = false)",
                )),
                Some(m) => match self.events.handle(&req.path, &soap, user.as_deref(), host, m.moving) {
                    Ok(events::Reply::Xml(xml)) => Ok(xml),
                    Ok(reply) => {
                        log::debug!("{peer}: ONVIF {op}: waits");
                        return Answer::Wait {
                            reply,
                            admitted,
                            signed_in,
                        };
                    }
                    Err(f) => Err(f),
                },
            }
        } else if req.path == imaging::PATH {
            match imaging::answer(&soap, &ctx) {
                Ok(imaging::Step::Ask(controls, ask)) => {
                    return Answer::Picture {
                        controls,
                        ask,
                        admitted,
                        signed_in,
                    };
                }
                Ok(imaging::Step::Xml(xml)) => Ok(xml),
                Err(f) => Err(f),
            }
        } else if op == "SetVideoEncoderConfiguration" {
            services::set_encoder(&soap, &mut ctx)
        } else if op == "SetAudioEncoderConfiguration" {
            services::set_audio_encoder(&soap, &mut ctx)
        } else {
            services::answer(req, &soap, &ctx)
        };
        match &answer {
            Ok(_) => log::debug!("{peer}: ONVIF {op} -> 200"),
            Err(fault) => log::debug!("{peer}: ONVIF {op}: {} -> {}", fault.reason, fault.http_status()),
        }
        Answer::soap(answer, admitted, signed_in)
    }

    /// The same rule as RTSP's and HTTP's, then the user: a UsernameToken
    /// from a user with a password kept for ONVIF, or HTTP Digest.
    fn authorized(&mut self, req: &Request, soap: &Soap, cfg: &Config) -> Result<(), Answer> {
        let peer = req.peer;
        match &req.http {
            // No users: the camera's own clients, or anyone if anonymous.
            HttpAuth::Open => return Ok(()),
            HttpAuth::Closed => return Err(Answer::Forbidden),
            _ => {}
        }
        let not_authorized = || Answer::Soap {
            status: 400,
            xml: Fault::not_authorized().envelope(),
            admitted: false,
            signed_in: None,
        };
        let token = match &soap.token {
            Ok(Some(token)) => token,
            Err(r) => {
                log::info!("{peer}: ONVIF: unreadable UsernameToken: {r:?}");
                return Err(not_authorized());
            }
            // No token: HTTP Digest, or its challenge.
            Ok(None) => {
                return match &req.http {
                    HttpAuth::User => Ok(()),
                    other => Err(http_refusal(other)),
                };
            }
        };
        let password = cfg
            .onvif_passwords
            .iter()
            .find(|(n, _)| *n == token.username)
            .map(|(_, p)| p.clone());
        let verdict = match password {
            None => Err("no password kept for ONVIF for this user (camstream passwd --onvif)"),
            // The password in the clear: taken as Basic is, only with
            // basic_auth.
            Some(p) if matches!(token.password, Password::Text(_)) && cfg.basic_auth => {
                if token.matches(&p) {
                    Ok(())
                } else {
                    Err("wrong password")
                }
            }
            Some(p) => {
                let now = (wall_now().0 / 1_000_000_000) as i64;
                let taken = self.gate.check(token, &p, now);
                taken.map_err(|r| match r {
                    TokenRefusal::Malformed(why) => why,
                    TokenRefusal::Stale => "the token's Created is too far from the camera's clock",
                    TokenRefusal::Replayed => "the token was used before",
                    TokenRefusal::TooMany => {
                        "4096 of this user's tokens are still within 5 minutes of the \
                         camera's clock: new ones refused until the oldest are not"
                    }
                    TokenRefusal::WrongPassword => "wrong password",
                    TokenRefusal::Cleartext => "a password in the clear (basic_auth is off)",
                })
            }
        };
        verdict.map_err(|why| {
            log::info!("{peer}: ONVIF user {:?} refused: {why}", token.username);
            not_authorized()
        })
    }
}

/// ONVIF's access policy, after the user is known to be who they say: the
/// user who signed in (by UsernameToken, else by HTTP Digest) may call `op`
/// if their level may call its access class. Without users no one signs in
/// and the gate alone decides, as before levels were.
fn permitted(req: &Request, soap: &Soap, op: &str, cfg: &Config) -> Result<(), Answer> {
    let class = AccessClass::of(op);
    // No users: any token went unchecked, and names no one.
    if class == AccessClass::PreAuth || matches!(req.http, HttpAuth::Open) {
        return Ok(());
    }
    let name = match &soap.token {
        Ok(Some(token)) => Some(token.username.as_str()),
        _ => req.http_user.as_deref(),
    };
    // Signed in with no name (which the gate lets through to no one): the
    // lowest level, so an error here closes rather than opens.
    let level = name.and_then(|n| cfg.user_level(n));
    if level.is_some_and(|l| l.may(class)) {
        return Ok(());
    }
    log::info!(
        "{}: ONVIF {op} refused to user {:?} ({}): its access class {class} needs {} or above",
        req.peer,
        name.unwrap_or(""),
        level.map_or_else(|| "unknown".to_owned(), |l| l.to_string()),
        class.needs()
    );
    Err(Answer::Soap {
        status: Fault::not_authorized().http_status(),
        xml: Fault::not_authorized().envelope(),
        // The user did sign in: only this call is refused.
        admitted: true,
        signed_in: None,
    })
}

/// The user whose UsernameToken a request carried, with users set.
fn token_user(req: &Request, soap: &Soap) -> Option<String> {
    match (&req.http, &soap.token) {
        (HttpAuth::Open, _) => None,
        (_, Ok(Some(token))) => Some(token.username.clone()),
        _ => None,
    }
}

/// Whether a body may hold a UsernameToken (a bounded scan: the parser
/// finds whether it really does).
fn has_token(body: &[u8]) -> bool {
    const NAME: &[u8] = b"UsernameToken";
    body.windows(NAME.len()).any(|w| w == NAME)
}

/// What HTTP's verdict comes to when it is all a request has.
fn http_refusal(http: &HttpAuth) -> Answer {
    match http {
        HttpAuth::Closed => Answer::Forbidden,
        HttpAuth::Missing { stale } => Answer::Challenge { stale: *stale },
        HttpAuth::Malformed(why) => Answer::BadRequest(why),
        // Not refused: a request that needs no more.
        HttpAuth::Open | HttpAuth::User => Answer::BadRequest("an empty request"),
    }
}
