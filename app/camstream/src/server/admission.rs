//! Who gets a connection. Each port (RTSP, HTTP) holds its own number of
//! connections, one address at most `max_connections_per_ip` over both,
//! and one user at most `max_connections_per_user` that are idle. A
//! connection that has not yet sent a request that passed the gate
//! (credentials, or a client that needs none) is pending; one that did and
//! carries no stream (no RTSP session, no MJPEG stream, no snapshot being
//! sent) is idle. When a port is full, a newcomer takes the place of a
//! pending connection, else of an idle one: of the user with the most
//! there, of its address with the most, the oldest. So connections that
//! never authenticate, or that authenticate with one password and then sit,
//! from however few addresses, cannot lock out a client: they push out
//! each other first, and the newcomer, one of few from its address and its
//! user, is the last to go. Only a port full of streams answers 503, and
//! streams are bounded by max_clients.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use std::io::{Read, Write};

use super::conn::{After, Conn, ConnId, Conns, Port, close};
use crate::clock::Mono;

/// Refused connections are logged at most this often (a flood would fill
/// the log), with their count.
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(10);

/// Why connections or requests were refused (the label /metrics shows).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Refusal {
    TooManyConnections,
    PerIpLimit,
    NoUserSet,
    MaxClients,
    PushedOut,
}

impl Refusal {
    pub const ALL: [Refusal; 5] = [
        Refusal::TooManyConnections,
        Refusal::PerIpLimit,
        Refusal::NoUserSet,
        Refusal::MaxClients,
        Refusal::PushedOut,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Refusal::TooManyConnections => "too-many-connections",
            Refusal::PerIpLimit => "max-connections-per-ip",
            Refusal::NoUserSet => "no-user-set",
            Refusal::MaxClients => "max-clients",
            Refusal::PushedOut => "pushed-out",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Refusal::TooManyConnections => "its port is full of clients that stream",
            Refusal::PerIpLimit => "max_connections_per_ip reached",
            Refusal::NoUserSet => "no user is set and only this machine's clients may stream",
            Refusal::MaxClients => "max_clients streaming clients reached",
            Refusal::PushedOut => {
                "its port, or its user's share, was full and it was pending or idle: a newer connection took its place"
            }
        }
    }
}

/// What to do with a new connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision<K> {
    Admit,
    /// Admit it in place of this pending connection, closed first.
    PushOut(K),
    Refuse(Refusal),
}

/// What admission needs to know of an open connection `K`.
#[derive(Clone, Copy, Debug)]
pub struct Holder<'a, K> {
    pub id: K,
    pub port: Port,
    pub peer: SocketAddr,
    pub opened: Mono,
    pub admitted: bool,
    /// The user it authenticated as.
    pub user: Option<&'a str>,
    /// It carries a stream: never pushed out.
    pub streaming: bool,
}

impl<K> Holder<'_, K> {
    fn pending(&self) -> bool {
        !self.admitted
    }

    fn idle(&self) -> bool {
        self.admitted && !self.streaming
    }
}

pub struct Admission {
    /// Connections each port holds.
    per_port: usize,
    per_ip: usize,
    per_user: usize,
    /// Connections open per client address.
    open: HashMap<IpAddr, usize>,
    /// Refused since the start, per [`Refusal`].
    pub refusals: [u64; Refusal::ALL.len()],
    /// Refused since the last log line about it, and when that was.
    logged: (u64, Option<Mono>),
}

impl Admission {
    pub fn new(per_port: usize, per_ip: usize, per_user: usize) -> Admission {
        Admission {
            per_port,
            per_ip,
            per_user,
            open: HashMap::new(),
            refusals: [0; Refusal::ALL.len()],
            logged: (0, None),
        }
    }

    /// Whether a connection from `ip` on `port` may be taken, given those
    /// open.
    pub fn decide<K: Copy>(&self, open: &[Holder<K>], port: Port, ip: IpAddr) -> Decision<K> {
        if self.open.get(&ip).copied().unwrap_or(0) >= self.per_ip {
            return Decision::Refuse(Refusal::PerIpLimit);
        }
        let on_port = open.iter().filter(|h| h.port == port).count();
        if on_port < self.per_port {
            return Decision::Admit;
        }
        let on = |h: &&Holder<K>| h.port == port;
        match to_push_out(open.iter().filter(on).filter(|h| h.pending()))
            .or_else(|| to_push_out(open.iter().filter(on).filter(|h| h.idle())))
        {
            Some(id) => Decision::PushOut(id),
            None => Decision::Refuse(Refusal::TooManyConnections),
        }
    }

    /// The connection to push out once `user` holds more than its share
    /// (max_connections_per_user), if one of its connections is idle: of
    /// its address with the most, the oldest. Its streams stay (max_clients
    /// bounds them).
    pub fn over_share<K: Copy>(&self, open: &[Holder<K>], user: &str) -> Option<K> {
        let of_user = || open.iter().filter(|h| h.user == Some(user));
        if of_user().count() <= self.per_user {
            return None;
        }
        to_push_out(of_user().filter(|h| h.idle()))
    }

    pub fn opened(&mut self, ip: IpAddr) {
        *self.open.entry(ip).or_insert(0) += 1;
    }

    pub fn closed(&mut self, ip: IpAddr) {
        if let Some(n) = self.open.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(&ip);
            }
        }
    }

    /// A connection from `peer` on `port`: whether it may be taken (Ok),
    /// after pushing out a pending or idle one if the port is full; or why
    /// not. `streaming`: whether a connection carries a stream.
    pub fn admit(
        &mut self,
        conns: &mut Conns,
        after: &mut After,
        port: Port,
        peer: SocketAddr,
        streaming: impl Fn(ConnId, &Conn) -> bool,
    ) -> Result<(), Refusal> {
        let decision = self.decide(&holders(conns, streaming), port, peer.ip());
        match decision {
            Decision::Admit => Ok(()),
            Decision::Refuse(why) => Err(why),
            Decision::PushOut(old) => {
                self.push_out(conns, after, old, "pushed out by a newer connection");
                Ok(())
            }
        }
    }

    /// After `ci` named a user for the first time: pushes out one of that
    /// user's idle connections if it holds more than its share.
    pub fn authenticated(
        &mut self,
        conns: &mut Conns,
        after: &mut After,
        ci: ConnId,
        streaming: impl Fn(ConnId, &Conn) -> bool,
    ) {
        let Some(user) = conns.get(ci).and_then(|c| c.user.clone()) else {
            return;
        };
        let old = self.over_share(&holders(conns, streaming), &user);
        if let Some(old) = old {
            let why = "pushed out: a newer connection of its user is past max_connections_per_user";
            self.push_out(conns, after, old, why);
        }
    }

    /// Answers `old` 503 and closes it.
    fn push_out(&mut self, conns: &mut Conns, after: &mut After, old: ConnId, why: &str) {
        if let Some(c) = conns.get_mut(old) {
            // Then the socket is closed. Not after a response under way.
            if c.ctrl_pending() == 0 {
                turn_away(&mut c.socket, c.port);
            }
            let old_peer = c.peer;
            self.refused(old_peer, "connection pushed out: 503", Refusal::PushedOut);
        }
        close(conns, after, old, why);
    }

    /// Whether the connections it counts per address are `open`.
    pub fn counts_match(&self, open: &HashMap<IpAddr, usize>) -> bool {
        &self.open == open
    }

    /// Counts a refusal; logs it at most every REFUSALS_LOGGED_EVERY.
    pub fn refused(&mut self, peer: SocketAddr, what: &str, why: Refusal) {
        if let Some(n) = self.refusals.get_mut(why as usize) {
            *n += 1;
        }
        let now = Mono::now();
        self.logged.0 += 1;
        if self
            .logged
            .1
            .is_none_or(|t| now.saturating_sub(t) >= REFUSALS_LOGGED_EVERY)
        {
            log::warn!(
                "{peer}: {what}, {}; {} refused since the last such line",
                why.describe(),
                self.logged.0
            );
            self.logged = (0, Some(now));
        }
    }
}

/// Answers a connection that is turned away `busy_answer`, first reading
/// and dropping what it has already sent (at most 64 KiB; no more is
/// waited for): a socket closed with bytes unread is reset, not closed,
/// and the client then gets an error for the rest of its request instead
/// of the 503. The caller closes it after.
pub fn turn_away(socket: &mut (impl Read + Write), port: Port) {
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match socket.read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    // One write into a socket buffer with room does not block.
    let _ = socket.write(busy_answer(port));
}

/// What a connection turned away is told before it is closed.
pub fn busy_answer(port: Port) -> &'static [u8] {
    match port {
        Port::Http => {
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        Port::Rtsp => b"RTSP/1.0 503 Service Unavailable\r\nConnection: close\r\n\r\n",
    }
}

/// What admission needs to know of each open connection.
fn holders(conns: &Conns, streaming: impl Fn(ConnId, &Conn) -> bool) -> Vec<Holder<'_, ConnId>> {
    conns
        .iter()
        .map(|(id, c)| Holder {
            id,
            port: c.port,
            peer: c.peer,
            opened: c.opened,
            admitted: c.admitted,
            user: c.user.as_deref(),
            streaming: streaming(id, c),
        })
        .collect()
}

/// Of `candidates`, the one a newcomer takes the place of: of the user
/// with the most of them (pending ones have none), of its address with the
/// most, the oldest.
fn to_push_out<'a, 'u: 'a, K: Copy + 'a>(
    candidates: impl Iterator<Item = &'a Holder<'u, K>> + Clone,
) -> Option<K> {
    let mut users: HashMap<Option<&str>, usize> = HashMap::new();
    let mut addresses: HashMap<(Option<&str>, IpAddr), usize> = HashMap::new();
    for h in candidates.clone() {
        *users.entry(h.user).or_insert(0) += 1;
        *addresses.entry((h.user, h.peer.ip())).or_insert(0) += 1;
    }
    candidates
        .max_by_key(|h| {
            (
                users.get(&h.user).copied().unwrap_or(0),
                addresses.get(&(h.user, h.peer.ip())).copied().unwrap_or(0),
                std::cmp::Reverse(h.opened),
                // The same age: the lower address, so the choice does not
                // depend on the table's order.
                std::cmp::Reverse(h.peer),
            )
        })
        .map(|h| h.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that sends its request in two writes (headers, then body,
    /// as Python's requests does) and is turned away after the first has
    /// arrived: its second write goes through and it reads the 503.
    #[test]
    fn a_client_turned_away_reads_the_answer() {
        use std::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client
            .write_all(b"POST /picture HTTP/1.1\r\nHost: camera\r\nContent-Length: 17\r\n\r\n")
            .unwrap();
        let (mut server, _) = listener.accept().unwrap();
        // The headers are in the server's socket before it turns the client away.
        server.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut first = [0u8; 1];
        assert_eq!(server.peek(&mut first).unwrap(), 1);
        server.set_nonblocking(true).unwrap();
        turn_away(&mut server, Port::Http);
        drop(server);
        std::thread::sleep(Duration::from_millis(50));
        client.write_all(b"{\"saturation\":1}\n").unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        assert_eq!(answer, busy_answer(Port::Http));
    }

    /// A connection: pending, or authenticated as `user` (`""`: a client
    /// that needs no credentials), streaming or idle.
    fn holder(id: u32, port: Port, ip: u8, opened: u64, admitted: bool) -> Holder<'static, u32> {
        Holder {
            id,
            port,
            peer: SocketAddr::from(([10, 0, 0, ip], 40000 + id as u16)),
            opened: Mono(opened),
            admitted,
            user: None,
            streaming: false,
        }
    }

    fn user(mut h: Holder<'static, u32>, name: &'static str) -> Holder<'static, u32> {
        h.admitted = true;
        h.user = Some(name);
        h
    }

    fn streaming(mut h: Holder<'static, u32>) -> Holder<'static, u32> {
        h.streaming = true;
        h
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn each_port_has_its_own_room() {
        let a = Admission::new(2, 16, 32);
        let open = [
            holder(1, Port::Http, 1, 1, false),
            holder(2, Port::Http, 1, 2, false),
        ];
        assert_eq!(a.decide(&open, Port::Rtsp, ip(2)), Decision::Admit);
        assert_eq!(a.decide(&open, Port::Http, ip(2)), Decision::PushOut(1));
    }

    #[test]
    fn the_address_with_most_pending_loses_its_oldest() {
        let a = Admission::new(6, 16, 32);
        // Address 1 holds three pending, address 2 two (one older than all
        // of address 1's), address 3 one that authenticated.
        let open = [
            holder(1, Port::Rtsp, 2, 1, false),
            holder(2, Port::Rtsp, 1, 5, false),
            holder(3, Port::Rtsp, 1, 3, false),
            holder(4, Port::Rtsp, 1, 4, false),
            holder(5, Port::Rtsp, 2, 6, false),
            holder(6, Port::Rtsp, 3, 0, true),
        ];
        assert_eq!(a.decide(&open, Port::Rtsp, ip(9)), Decision::PushOut(3));
    }

    #[test]
    fn streaming_clients_are_never_pushed_out() {
        let a = Admission::new(2, 16, 32);
        let open = [
            streaming(user(holder(1, Port::Rtsp, 1, 1, true), "viewer")),
            streaming(holder(2, Port::Rtsp, 2, 2, true)),
        ];
        assert_eq!(
            a.decide(&open, Port::Rtsp, ip(3)),
            Decision::Refuse(Refusal::TooManyConnections)
        );
    }

    #[test]
    fn pending_go_first_then_the_idle_of_the_user_with_most() {
        let a = Admission::new(5, 16, 32);
        let mut open = vec![
            user(holder(1, Port::Rtsp, 1, 1, true), "viewer"),
            user(holder(2, Port::Rtsp, 2, 2, true), "viewer"),
            user(holder(3, Port::Rtsp, 2, 3, true), "viewer"),
            // The oldest, and its address holds the most: but nvr has one.
            user(holder(4, Port::Rtsp, 3, 0, true), "nvr"),
            holder(5, Port::Rtsp, 4, 9, false),
        ];
        assert_eq!(a.decide(&open, Port::Rtsp, ip(9)), Decision::PushOut(5));
        open.pop();
        open.push(streaming(user(holder(5, Port::Rtsp, 2, 4, true), "viewer")));
        // viewer holds the most; of it, address 2 (two idle), its oldest.
        assert_eq!(a.decide(&open, Port::Rtsp, ip(9)), Decision::PushOut(2));
    }

    #[test]
    fn one_user_holds_at_most_its_share() {
        let a = Admission::new(100, 16, 3);
        let mut open = vec![
            streaming(user(holder(1, Port::Rtsp, 1, 1, true), "viewer")),
            user(holder(2, Port::Http, 1, 2, true), "viewer"),
            user(holder(3, Port::Rtsp, 2, 3, true), "viewer"),
            user(holder(4, Port::Rtsp, 3, 4, true), "nvr"),
        ];
        assert_eq!(a.over_share(&open, "viewer"), None);
        open.push(user(holder(5, Port::Rtsp, 2, 5, true), "viewer"));
        // Past its share: address 2 holds most of viewer's idle ones.
        assert_eq!(a.over_share(&open, "viewer"), Some(3));
        assert_eq!(a.over_share(&open, "nvr"), None);
        // Streams stay.
        for h in &mut open {
            h.streaming = true;
        }
        assert_eq!(a.over_share(&open, "viewer"), None);
    }

    #[test]
    fn one_address_holds_at_most_its_share() {
        let mut a = Admission::new(100, 2, 32);
        a.opened(ip(1));
        a.opened(ip(1));
        let none: [Holder<u32>; 0] = [];
        assert_eq!(
            a.decide(&none, Port::Rtsp, ip(1)),
            Decision::Refuse(Refusal::PerIpLimit)
        );
        a.closed(ip(1));
        assert_eq!(a.decide(&none, Port::Rtsp, ip(1)), Decision::Admit);
        a.closed(ip(1));
        assert!(a.open.is_empty());
    }

    /// However many connections a few addresses open and keep pending, or
    /// authenticated with one password and idle, a newcomer from another
    /// address is admitted, and it is not the next to be pushed out while
    /// they keep coming (with the same password, or none).
    #[test]
    fn a_few_addresses_cannot_lock_out_a_newcomer() {
        for attacker in [None, Some("viewer")] {
            let per_port = 80;
            let mut a = Admission::new(per_port, 16, 32);
            let mut open: Vec<Holder<u32>> = Vec::new();
            let mut next = 0u32;
            let mut connect =
                |a: &mut Admission, open: &mut Vec<Holder<'static, u32>>, from: u8| {
                    next += 1;
                    match a.decide(open, Port::Rtsp, ip(from)) {
                        Decision::Admit => {}
                        Decision::PushOut(id) => {
                            let k = open.iter().position(|h| h.id == id).unwrap();
                            a.closed(open.remove(k).peer.ip());
                        }
                        Decision::Refuse(_) => return None,
                    }
                    a.opened(ip(from));
                    let mut h = holder(next, Port::Rtsp, from, u64::from(next), false);
                    let who = if from == 7 { Some("viewer") } else { attacker };
                    if let Some(u) = who {
                        h = user(h, u);
                    }
                    open.push(h);
                    Some(next)
                };
            // Six attackers fill their share and more.
            for round in 0..40 {
                for from in 1..=6 {
                    connect(&mut a, &mut open, from);
                }
                if round == 20 {
                    let me = connect(&mut a, &mut open, 7).expect("the newcomer is admitted");
                    for _ in 0..100 {
                        for from in 1..=6 {
                            connect(&mut a, &mut open, from);
                        }
                    }
                    assert!(
                        open.iter().any(|h| h.id == me),
                        "the newcomer was pushed out ({attacker:?})"
                    );
                }
            }
        }
    }
}
