//! What a part of the server (RTSP, HTTP) is lent of the rest for one call:
//! the connections, the fan-out, the gate, admission and the settings; and
//! where it leaves the connections it closed and those to handle again,
//! for the event loop to finish.

use super::admission::Admission;
use super::conn::{After, ConnId, Conns, close};
use crate::fanout::Fanout;
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
