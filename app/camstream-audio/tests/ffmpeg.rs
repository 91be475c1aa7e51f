//! What FFmpeg 5.1 (Debian 12) made and sent, read back: its AAC-hbr RTP
//! packets (several access units a packet, and one in fragments) give the
//! access units of its ADTS file of the same encode, byte for byte, with
//! the ADTS headers this crate writes; its Opus packets' durations are
//! what their timestamps advance by; its µ-law codes are this crate's.
//! testdata/README.md says how each file was made.

use camstream_audio::{aac, opus, pcmu};
use camstream_rtp::rtp::IncomingPacket;

fn read(name: &str) -> Vec<u8> {
    let path = format!("{}/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One packet a line, in hex.
fn packets(name: &str) -> Vec<Vec<u8>> {
    String::from_utf8(read(name))
        .unwrap()
        .lines()
        .map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn aac_rtp_gives_the_adts_file_s_access_units() {
    let adts = read("ffmpeg-5.1-aac-64k-48000-mono.adts");
    // FFmpeg's SDP said config=118856E500: LC, 48 kHz, mono (and SBR's
    // signalling after, which the two bytes leave).
    let config = aac::Config::parse_hex("118856E500").unwrap();
    assert_eq!(config, aac::Config::lc(48_000, 1).unwrap());
    for name in [
        "ffmpeg-5.1-aac-64k-48000-mono.rtp",
        "ffmpeg-5.1-aac-64k-48000-mono-pkt_size-100.rtp",
    ] {
        let mut d = aac::Depacketizer::new();
        let mut rebuilt = Vec::new();
        let mut stamps = Vec::new();
        let all = packets(name);
        for p in &all {
            let p = IncomingPacket::parse(p).unwrap();
            d.push(&p, |au, ts| {
                rebuilt.extend_from_slice(&config.adts(au.len()).unwrap());
                rebuilt.extend_from_slice(au);
                stamps.push(ts);
            })
            .unwrap();
        }
        // The ADTS file has all 25 units of the half second; FFmpeg's RTP
        // muxer left the last few it had gathered unsent at the end.
        assert!(stamps.len() >= 20, "{name}: {}", stamps.len());
        assert!(rebuilt == adts[..rebuilt.len()], "{name}");
        assert!(
            stamps.windows(2).all(|w| w[1].wrapping_sub(w[0]) == 1024),
            "{name}"
        );
        // The small packets split units: more packets than units.
        if name.contains("pkt_size") {
            assert!(all.len() > stamps.len());
        } else {
            assert!(all.len() < stamps.len());
        }
    }
}

#[test]
fn a_lost_fragment_drops_its_unit_only() {
    let all = packets("ffmpeg-5.1-aac-64k-48000-mono-pkt_size-100.rtp");
    let mut d = aac::Depacketizer::new();
    let (mut units, mut errors) = (0, 0);
    // Every seventh packet lost.
    for (i, p) in all.iter().enumerate() {
        if i % 7 == 3 {
            continue;
        }
        let p = IncomingPacket::parse(p).unwrap();
        match d.push(&p, |_, _| units += 1) {
            Ok(()) => {}
            Err(aac::DepacketizeError::Lost | aac::DepacketizeError::Truncated) => errors += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(errors > 0);
    assert!(units > 10 && units < 24, "{units}");
}

#[test]
fn opus_durations_are_the_timestamps_steps() {
    let all = packets("ffmpeg-5.1-libopus-32k-48000-mono.rtp");
    let mut last: Option<(u32, u32)> = None;
    for p in &all {
        let p = IncomingPacket::parse(p).unwrap();
        let samples = opus::samples(p.payload).unwrap();
        // libopus's default: 20 ms frames.
        assert_eq!(samples, 960);
        if let Some((ts, n)) = last {
            assert_eq!(p.header.timestamp.wrapping_sub(ts), n);
        }
        last = Some((p.header.timestamp, samples));
    }
    assert!(all.len() >= 25);
}

#[test]
fn mu_law_codes_are_ffmpeg_s() {
    let s16 = read("ffmpeg-5.1-sine-440-8000-volume-8.s16");
    let ul = read("ffmpeg-5.1-pcm_mulaw-sine-440-8000-volume-8.ul");
    let samples: Vec<i16> = s16
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    let mut out = vec![0; samples.len()];
    pcmu::encode_into(&samples, &mut out);
    assert_eq!(out, ul);
}
