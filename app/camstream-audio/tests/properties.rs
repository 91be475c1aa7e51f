//! Properties of the packetizers, the decimator and the capture clock.

use camstream_audio::aac::{self, Config};
use camstream_audio::packetize::{Format, MIN_MTU, Packetizer};
use camstream_audio::{Decimator, SampleClock, opus, pcmu};
use camstream_rtp::rtp::IncomingPacket;
use proptest::prelude::*;

/// A packet as the wire has it.
fn bytes(
    p: &camstream_rtp::rtp::OutgoingPacket<'_, { camstream_audio::packetize::MAX_HEADER_LEN }>,
) -> Vec<u8> {
    let mut b = vec![0; p.len()];
    p.write_to(&mut b);
    b
}

proptest! {
    /// Access units of any size AAC-hbr carries, at any MTU: each comes
    /// back whole with its timestamp, no packet past the MTU, the marker
    /// on each unit's last packet only, sequence numbers without a gap.
    #[test]
    fn aac_round_trip(
        sizes in prop::collection::vec(1usize..=aac::MAX_AU, 1..6),
        mtu in MIN_MTU..=1500usize,
        ssrc: u32,
        sequence: u16,
        start: u32,
    ) {
        let format = Format::Aac(Config::lc(48_000, 1).unwrap());
        let mut p = Packetizer::new(format, ssrc, sequence, mtu).unwrap();
        let mut d = aac::Depacketizer::new();
        let mut next = sequence;
        for (i, &size) in sizes.iter().enumerate() {
            let au: Vec<u8> = (0..size).map(|j| (j * 7 + i) as u8).collect();
            let ts = start.wrapping_add(1024 * i as u32);
            let packets: Vec<_> = p.packetize(&au, ts).unwrap().map(|q| (bytes(&q), q.marker())).collect();
            prop_assert_eq!(packets.len(), size.div_ceil(mtu - 16));
            let mut got = Vec::new();
            for (k, (b, marker)) in packets.iter().enumerate() {
                prop_assert!(b.len() <= mtu);
                prop_assert_eq!(*marker, k + 1 == packets.len());
                let q = IncomingPacket::parse(b).unwrap();
                prop_assert_eq!(q.header.sequence, next);
                prop_assert_eq!(q.header.ssrc, ssrc);
                prop_assert_eq!(q.header.payload_type, 97);
                next = next.wrapping_add(1);
                d.push(&q, |a, t| got.push((a.to_vec(), t))).unwrap();
            }
            prop_assert_eq!(got, vec![(au, ts)]);
        }
    }

    /// Opus and PCMU frames go whole, as they are.
    #[test]
    fn opus_and_pcmu_frames_go_whole(frame in prop::collection::vec(any::<u8>(), 1..=320), opus: bool, ts: u32) {
        let format = if opus { Format::Opus } else { Format::Pcmu };
        let mut p = Packetizer::new(format, 1, 2, MIN_MTU).unwrap();
        let packets: Vec<_> = p.packetize(&frame, ts).unwrap().map(|q| bytes(&q)).collect();
        prop_assert_eq!(packets.len(), 1);
        let q = IncomingPacket::parse(&packets[0]).unwrap();
        prop_assert_eq!(q.payload, &frame[..]);
        prop_assert_eq!(q.header.timestamp, ts);
        prop_assert_eq!(q.header.payload_type, if opus { 98 } else { 0 });
    }

    /// What arrives from anyone: the depacketizer and the Opus framing
    /// refuse or take it, never panic.
    #[test]
    fn any_payload_is_taken_or_refused(payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 1..8), marker: bool) {
        let mut d = aac::Depacketizer::new();
        for (i, payload) in payloads.iter().enumerate() {
            let mut b = vec![0x80, if marker { 0xe1 } else { 0x61 }, 0, i as u8, 0, 0, 0, 0, 0, 0, 0, 1];
            b.extend_from_slice(payload);
            let q = IncomingPacket::parse(&b).unwrap();
            let _ = d.push(&q, |au, _| assert!(au.len() <= aac::MAX_AU));
            if let Ok(n) = opus::samples(payload) {
                prop_assert!((120..=opus::MAX_SAMPLES).contains(&n));
            }
        }
    }

    /// A card whose crystal is off by up to 200 ppm, its instants known to
    /// 0.2 ms, read every 10 ms for 20 s: the fit's rate is within 100 ppm
    /// and the sample it gives for the last instant within 1 ms. (The worst
    /// the jitter can do to ten seconds of 40 points: 62 ppm and 0.5 ms.)
    #[test]
    fn the_clock_follows_a_drifting_card(
        ppm in -200.0f64..200.0,
        jitter in prop::collection::vec(-200_000i64..=200_000, 2000),
        start_ns in 0u64..1 << 50,
        first_sample in 0u64..1 << 40,
        rate in prop::sample::select(vec![8_000u32, 16_000, 44_100, 48_000]),
    ) {
        let mut c = SampleClock::new(rate);
        let true_rate = f64::from(rate) * (1.0 + ppm * 1e-6);
        let mut last = (0, 0.0);
        for (i, j) in jitter.iter().enumerate() {
            let t = i as f64 * 0.01;
            let sample = first_sample + (t * true_rate) as u64;
            let at = start_ns + (t * 1e9) as u64;
            c.observe(sample, at.saturating_add_signed(*j));
            last = (at, sample as f64);
        }
        let drift = c.drift_ppm().unwrap();
        prop_assert!((drift - ppm).abs() < 100.0, "{drift} for {ppm}");
        let off = (c.sample_at(last.0).unwrap() - last.1) / f64::from(rate);
        prop_assert!(off.abs() < 1e-3, "{off} s");
    }
}

/// The decimator's response, measured with tones: what G.711 carries
/// passes, what would alias into it is gone.
#[test]
fn decimation_keeps_the_band_and_stops_aliases() {
    fn gain(rate: u32, hz: f64) -> f64 {
        let mut d = Decimator::new(rate).unwrap();
        let input: Vec<i16> = (0..rate as usize)
            .map(|i| {
                (10_000.0 * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin())
                    as i16
            })
            .collect();
        let mut out = Vec::new();
        d.push(&input, |y| out.push(f64::from(y)));
        // The last half second's RMS against the input's.
        let tail = &out[out.len() / 2..];
        let rms = (tail.iter().map(|y| y * y).sum::<f64>() / tail.len() as f64).sqrt();
        20.0 * (rms / (10_000.0 / 2f64.sqrt())).log10()
    }
    for rate in [16_000, 24_000, 32_000, 48_000] {
        for hz in [300.0, 1_000.0, 3_000.0] {
            let g = gain(rate, hz);
            assert!(g.abs() < 1.0, "{rate} Hz input, {hz} Hz tone: {g:.2} dB");
        }
        for hz in [4_500.0, 5_000.0, 7_000.0] {
            if hz < f64::from(rate) / 2.0 {
                let g = gain(rate, hz);
                assert!(g < -40.0, "{rate} Hz input, {hz} Hz tone: {g:.2} dB");
            }
        }
    }
    let mut d = Decimator::new(8_000).unwrap();
    let mut out = Vec::new();
    d.push(&[1, -2, 3], |y| out.push(y));
    assert_eq!(out, [1, -2, 3]);
    assert_eq!(Decimator::new(48_000).unwrap().delay(), 96);
}

/// PCMU's bytes after the decimator: a 1 kHz tone at 48 kHz comes out as
/// 160 codes each 20 ms, decoding back to the tone.
#[test]
fn tone_to_pcmu() {
    let mut d = Decimator::new(48_000).unwrap();
    let input: Vec<i16> = (0..4_800)
        .map(|i| (8_000.0 * (2.0 * std::f64::consts::PI * i as f64 / 48.0).sin()) as i16)
        .collect();
    let mut eight = Vec::new();
    d.push(&input, |y| eight.push(y));
    assert_eq!(eight.len(), 800);
    let mut codes = vec![0; eight.len()];
    pcmu::encode_into(&eight, &mut codes);
    let back: Vec<f64> = codes[400..]
        .iter()
        .map(|&c| f64::from(pcmu::decode(c)))
        .collect();
    let peak = back.iter().fold(0f64, |m, v| m.max(v.abs()));
    assert!((peak - 8_000.0).abs() < 400.0, "{peak}");
}
