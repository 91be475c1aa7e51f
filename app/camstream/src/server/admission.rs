//! Who gets a connection. Each port (RTSP, HTTP) holds its own number of
//! connections, and one address at most `max_connections_per_ip` over
//! both. A connection that has not yet sent a request that passed the gate
//! (credentials, or a client that needs none) is pending: when a port is
//! full, a newcomer takes the place of the oldest pending connection of the
//! address that holds the most pending ones there. So connections that
//! never authenticate, from however few addresses, cannot lock out a client
//! that does: they push out each other first, and the newcomer, one of few
//! from its address, is the last to go. Clients that authenticated are never
//! pushed out; a port full of them answers 503.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use std::io::Write;

use super::conn::{After, Conns, Port, close};
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
            Refusal::TooManyConnections => "its port is full of clients that authenticated",
            Refusal::PerIpLimit => "max_connections_per_ip reached",
            Refusal::NoUserSet => "no user is set and only this machine's clients may stream",
            Refusal::MaxClients => "max_clients streaming clients reached",
            Refusal::PushedOut => {
                "its port was full and it had not authenticated: a newer connection took its place"
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
pub struct Holder<K> {
    pub id: K,
    pub port: Port,
    pub peer: SocketAddr,
    pub opened: Mono,
    pub admitted: bool,
}

pub struct Admission {
    /// Connections each port holds.
    per_port: usize,
    per_ip: usize,
    /// Connections open per client address.
    open: HashMap<IpAddr, usize>,
    /// Refused since the start, per [`Refusal`].
    pub refusals: [u64; Refusal::ALL.len()],
    /// Refused since the last log line about it, and when that was.
    logged: (u64, Option<Mono>),
}

impl Admission {
    pub fn new(per_port: usize, per_ip: usize) -> Admission {
        Admission {
            per_port,
            per_ip,
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
        match pending_to_push_out(open, port) {
            Some(id) => Decision::PushOut(id),
            None => Decision::Refuse(Refusal::TooManyConnections),
        }
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
    /// after pushing out a pending one if the port is full; or why not.
    pub fn admit(
        &mut self,
        conns: &mut Conns,
        after: &mut After,
        port: Port,
        peer: SocketAddr,
    ) -> Result<(), Refusal> {
        let open: Vec<_> = conns
            .iter()
            .map(|(id, c)| Holder {
                id,
                port: c.port,
                peer: c.peer,
                opened: c.opened,
                admitted: c.admitted,
            })
            .collect();
        match self.decide(&open, port, peer.ip()) {
            Decision::Admit => Ok(()),
            Decision::Refuse(why) => Err(why),
            Decision::PushOut(old) => {
                if let Some(c) = conns.get_mut(old) {
                    // One write into a socket buffer with room does not
                    // block; then the socket is closed.
                    let _ = c.socket.write(busy_answer(c.port));
                    let old_peer = c.peer;
                    self.refused(old_peer, "connection pushed out: 503", Refusal::PushedOut);
                }
                let why = "pushed out by a newer connection before it authenticated";
                close(conns, after, old, why);
                Ok(())
            }
        }
    }

    /// Whether the connections it counts per address are `open`.
    pub fn counts_match(&self, open: &HashMap<IpAddr, usize>) -> bool {
        &self.open == open
    }

    /// Counts a refusal; logs it at most every REFUSALS_LOGGED_EVERY.
    pub fn refused(&mut self, peer: SocketAddr, what: &str, why: Refusal) {
        self.refusals[why as usize] += 1;
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

/// What a connection turned away is told before it is closed.
pub fn busy_answer(port: Port) -> &'static [u8] {
    match port {
        Port::Http => {
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        Port::Rtsp => b"RTSP/1.0 503 Service Unavailable\r\nConnection: close\r\n\r\n",
    }
}

/// The pending connection on `port` a newcomer takes the place of: of the
/// address with the most pending connections there, its oldest.
fn pending_to_push_out<K: Copy>(open: &[Holder<K>], port: Port) -> Option<K> {
    let pending = open.iter().filter(|h| h.port == port && !h.admitted);
    let mut counts: HashMap<IpAddr, usize> = HashMap::new();
    for h in pending.clone() {
        *counts.entry(h.peer.ip()).or_insert(0) += 1;
    }
    pending
        .max_by_key(|h| {
            (
                counts[&h.peer.ip()],
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

    fn holder(id: u32, port: Port, ip: u8, opened: u64, admitted: bool) -> Holder<u32> {
        Holder {
            id,
            port,
            peer: SocketAddr::from(([10, 0, 0, ip], 40000 + id as u16)),
            opened: Mono(opened),
            admitted,
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn each_port_has_its_own_room() {
        let a = Admission::new(2, 16);
        let open = [
            holder(1, Port::Http, 1, 1, false),
            holder(2, Port::Http, 1, 2, false),
        ];
        assert_eq!(a.decide(&open, Port::Rtsp, ip(2)), Decision::Admit);
        assert_eq!(a.decide(&open, Port::Http, ip(2)), Decision::PushOut(1));
    }

    #[test]
    fn the_address_with_most_pending_loses_its_oldest() {
        let a = Admission::new(6, 16);
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
    fn clients_that_authenticated_are_never_pushed_out() {
        let a = Admission::new(2, 16);
        let open = [
            holder(1, Port::Rtsp, 1, 1, true),
            holder(2, Port::Rtsp, 2, 2, true),
        ];
        assert_eq!(
            a.decide(&open, Port::Rtsp, ip(3)),
            Decision::Refuse(Refusal::TooManyConnections)
        );
    }

    #[test]
    fn one_address_holds_at_most_its_share() {
        let mut a = Admission::new(100, 2);
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

    /// However many connections a few addresses open and keep pending, a
    /// newcomer from another address is admitted, and it is not the next
    /// to be pushed out while they keep coming.
    #[test]
    fn a_few_addresses_cannot_lock_out_a_newcomer() {
        let per_port = 80;
        let mut a = Admission::new(per_port, 16);
        let mut open: Vec<Holder<u32>> = Vec::new();
        let mut next = 0u32;
        let mut connect = |a: &mut Admission, open: &mut Vec<Holder<u32>>, from: u8| {
            next += 1;
            let d = a.decide(open, Port::Http, ip(from));
            match d {
                Decision::Admit => {}
                Decision::PushOut(id) => {
                    let k = open.iter().position(|h| h.id == id).unwrap();
                    a.closed(open.remove(k).peer.ip());
                }
                Decision::Refuse(_) => return None,
            }
            a.opened(ip(from));
            open.push(holder(next, Port::Http, from, u64::from(next), false));
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
                    "the newcomer was pushed out"
                );
            }
        }
    }
}
