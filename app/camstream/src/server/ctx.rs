//! What a part of the server (RTSP, HTTP) is lent of the rest for one call:
//! the connections, the fan-out, the gate, admission and the settings; and
//! where it leaves the connections it closed and those to handle again,
//! for the event loop to finish.

use std::net::SocketAddr;

use super::admission::Admission;
use super::conn::{Conn, ConnId, Conns, Kind};
use super::fanout::Fanout;
use super::gate::Gate;
use crate::config::Config;

pub struct Ctx<'a> {
    pub conns: &'a mut Conns,
    pub fanout: &'a mut Fanout,
    pub gate: &'a Gate,
    pub admission: &'a mut Admission,
    pub cfg: &'a Config,
    pub after: &'a mut After,
}

/// What the event loop does once a part's call returns.
#[derive(Default)]
pub struct After {
    /// Connections with input left to handle, after the others' turn.
    pub resume: Vec<ConnId>,
    /// Connections taken out of the table: the loop deregisters them and
    /// tells the part that held them.
    pub closed: Vec<Closed>,
}

pub struct Closed {
    pub id: ConnId,
    pub conn: Conn,
    pub why: String,
}

impl Closed {
    pub fn kind(&self) -> Kind {
        self.conn.kind
    }

    pub fn peer(&self) -> SocketAddr {
        self.conn.peer
    }
}

impl Ctx<'_> {
    /// Takes `ci` out of the table (nothing reaches it after this) for the
    /// loop to finish closing.
    pub fn close(&mut self, ci: ConnId, why: &str) {
        close(self.conns, self.after, ci, why);
    }

    pub fn resume(&mut self, ci: ConnId) {
        self.after.resume.push(ci);
    }
}

/// [`Ctx::close`] where no Ctx is at hand.
pub fn close(conns: &mut Conns, after: &mut After, ci: ConnId, why: &str) {
    if let Some(conn) = conns.remove(ci) {
        after.closed.push(Closed {
            id: ci,
            conn,
            why: why.to_owned(),
        });
    }
}
