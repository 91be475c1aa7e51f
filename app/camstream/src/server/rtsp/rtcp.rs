//! RTCP: what a client's reports mean (proof of life; BYE stops its
//! stream), and the sender reports each session gets, over UDP or
//! interleaved on its connection.

use camstream_rtp::rtcp;

use super::super::conn::CTRL_HIGH_WATER;
use super::super::ctx::Ctx;
use crate::fanout::Fanout;
use super::Rtsp;
use super::session::{Session, SessionId, Transport};
use crate::fanout::SharedFrame;
use crate::clock::{Mono, ntp_now};

impl Rtsp {
    /// RTCP from session `si`'s client (its UDP ports, or its connection's
    /// RTCP channel): proof of life; BYE stops the stream to it.
    pub(super) fn rtcp_received(&mut self, si: SessionId, data: &[u8], fanout: &mut Fanout) {
        let Some(s) = self.sessions.get_mut(si) else {
            return;
        };
        s.last_seen = Mono::now();
        let mut bye = false;
        for p in rtcp::parse_compound(data) {
            match p {
                Ok(rtcp::Packet::ReceiverReport { blocks, .. }) => {
                    for b in blocks {
                        log::trace!(
                            "session {}: RR lost {} jitter {} highest seq {}",
                            s.id,
                            b.cumulative_lost,
                            b.jitter,
                            b.highest_sequence
                        );
                    }
                }
                Ok(rtcp::Packet::Bye { .. }) => bye = true,
                Ok(_) => {}
                Err(e) => {
                    log::debug!("session {}: bad RTCP: {e}", s.id);
                    break;
                }
            }
        }
        if bye && s.playing() {
            // The client left the RTP session; the RTSP session stays until
            // TEARDOWN or timeout, so a TEARDOWN after the BYE still succeeds.
            log::info!(
                "session {}: RTCP BYE from {}, stopped sending",
                s.id,
                s.peer
            );
            s.stop(fanout, true);
        }
    }

    /// Sends an RTCP sender report (and BYE) to a session.
    pub(super) fn send_report(&mut self, si: SessionId, bye: bool, ctx: &mut Ctx<'_>) {
        let Some(s) = self.sessions.get(si) else {
            return;
        };
        match s.transport {
            Transport::Udp { rtcp, .. } => {
                let mut buf = [0u8; rtcp::MAX_COMPOUND_LEN];
                let n = sender_report(s, None, bye, ctx.fanout, &self.cname, &mut buf);
                self.udp.send_rtcp(rtcp, buf.get(..n).unwrap_or_default());
            }
            Transport::Interleaved { rtcp, .. } => {
                let ci = s.conn;
                let Some(conn) = ctx.conns.get_mut(ci) else {
                    return;
                };
                if conn.ctrl_pending() < CTRL_HIGH_WATER {
                    interleaved_report(s, None, bye, ctx.fanout, &self.cname, rtcp, &mut conn.ctrl);
                    self.flush(ci, ctx);
                }
            }
        }
    }
}

/// Session `s`'s sender report (and BYE) into `out`; its length. `at`: the
/// frame whose instant it reports (its capture's wall time and its RTP
/// time: the report before a track's first packet, which describes that
/// packet, so a client maps it from the start; GStreamer drops a first
/// report older than the first packet); None: now.
pub(super) fn sender_report(
    s: &Session,
    at: Option<&SharedFrame>,
    bye: bool,
    fanout: &Fanout,
    cname: &str,
    out: &mut [u8],
) -> usize {
    let (now, mono) = ntp_now();
    let (packet_count, octet_count) = fanout
        .subscriber(s.subscription)
        .map_or((0, 0), |sub| (sub.rtp_packets, sub.rtp_octets));
    let stream = fanout.stream(s.stream);
    let (ntp_time, rtp_time) = match at {
        Some(f) => {
            // NTP's 32.32 fixed point of the frame's age.
            let age = mono.saturating_sub(f.captured).as_nanos();
            (now.wrapping_sub(((age << 32) / 1_000_000_000) as u64), f.timestamp)
        }
        None => (now, stream.rtp_at(mono)),
    };
    let sr = rtcp::SenderReport {
        ssrc: stream.packetizer.ssrc(),
        ntp_time,
        rtp_time,
        packet_count,
        octet_count,
    };
    rtcp::write_report(&sr, cname.as_bytes(), bye, out)
}

/// Session `s`'s sender report as [`sender_report`] makes it, framed for
/// its connection's RTCP `channel` (RFC 2326 10.12), onto `ctrl`.
pub(super) fn interleaved_report(
    s: &Session,
    at: Option<&SharedFrame>,
    bye: bool,
    fanout: &Fanout,
    cname: &str,
    channel: u8,
    ctrl: &mut Vec<u8>,
) {
    let mut buf = [0u8; 4 + rtcp::MAX_COMPOUND_LEN];
    let (head, body) = buf.split_at_mut(4);
    let n = sender_report(s, at, bye, fanout, cname, body);
    head.copy_from_slice(&[b'$', channel, (n >> 8) as u8, n as u8]);
    ctrl.extend_from_slice(buf.get(..4 + n).unwrap_or_default());
}
