//! RTCP: what a client's reports mean (proof of life; BYE stops its
//! stream), and the sender reports each session gets, over UDP or
//! interleaved on its connection.

use camstream_rtp::rtcp;

use super::super::conn::CTRL_HIGH_WATER;
use super::super::ctx::Ctx;
use crate::fanout::Fanout;
use super::Rtsp;
use super::session::{SessionId, Transport};
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
        let (ntp_time, mono) = ntp_now();
        let (packet_count, octet_count) = ctx
            .fanout
            .subscriber(s.subscription)
            .map_or((0, 0), |sub| (sub.rtp_packets, sub.rtp_octets));
        let stream = ctx.fanout.stream(s.stream);
        let sr = rtcp::SenderReport {
            ssrc: stream.packetizer.ssrc(),
            ntp_time,
            rtp_time: stream.clock.timestamp(mono),
            packet_count,
            octet_count,
        };
        let mut buf = [0u8; 4 + rtcp::MAX_COMPOUND_LEN];
        let (frame_head, body) = buf.split_at_mut(4);
        let n = rtcp::write_report(&sr, self.cname.as_bytes(), bye, body);
        let report = body.get(..n).unwrap_or_default();
        match s.transport {
            Transport::Udp { rtcp, .. } => self.udp.send_rtcp(rtcp, report),
            Transport::Interleaved { rtcp, .. } => {
                let ci = s.conn;
                let Some(conn) = ctx.conns.get_mut(ci) else {
                    return;
                };
                if conn.ctrl_pending() < CTRL_HIGH_WATER {
                    frame_head.copy_from_slice(&[b'$', rtcp, (n >> 8) as u8, n as u8]);
                    conn.ctrl.extend_from_slice(frame_head);
                    conn.ctrl.extend_from_slice(report);
                    self.flush(ci, ctx);
                }
            }
        }
    }
}
