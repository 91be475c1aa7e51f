//! MQTT (`[mqtt]`): motion, and the picture when it starts, published to a
//! broker, with Home Assistant's MQTT discovery so that the camera shows
//! up there by itself, as a motion binary_sensor and a camera whose
//! picture is the last motion's. Its own thread runs rumqttc's client
//! (which reconnects; the thread waits 1 s, then twice as long each time,
//! up to a minute, between tries); the event loop only hands it changes,
//! never waiting on the broker.
//!
//! Topics, under `topic` (`camstream/HOSTNAME`): `availability` (online,
//! or offline as the broker's last will), `motion` (ON, OFF) and
//! `snapshot` (a JPEG), all retained; under `discovery_prefix`
//! (`homeassistant`): `binary_sensor/NODE/motion/config` and
//! `camera/NODE/snapshot/config`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use rumqttc::{Client, ConnectionError, Event, LastWill, MqttOptions, Packet, QoS};

use crate::config::MqttSettings;

/// The largest picture published (a 1080p JPEG at quality 95 is about
/// 1 MB).
const MAX_PICTURE: usize = 4 << 20;

struct Topics {
    availability: String,
    motion: String,
    snapshot: String,
    /// (topic, JSON) of each discovery message.
    discovery: Vec<(String, String)>,
}

/// What the thread publishes again each time it connects.
struct Shared {
    moving: AtomicBool,
    connected: AtomicBool,
    picture: Mutex<Option<Vec<u8>>>,
}

pub struct Mqtt {
    client: Client,
    shared: Arc<Shared>,
    motion_topic: String,
    snapshot_topic: String,
    moving: bool,
}

/// Home Assistant's ids take letters, digits, _ and -.
fn node_id(hostname: &str) -> String {
    hostname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn topics(s: &MqttSettings, hostname: &str) -> Topics {
    let node = node_id(hostname);
    let base = s
        .topic
        .clone()
        .unwrap_or_else(|| format!("camstream/{node}"));
    let availability = format!("{base}/availability");
    let motion = format!("{base}/motion");
    let snapshot = format!("{base}/snapshot");
    let device = serde_json::json!({
        "identifiers": [format!("camstream_{node}")],
        "name": hostname,
        "manufacturer": "camstream",
        "model": "camstream",
        "sw_version": env!("CARGO_PKG_VERSION"),
    });
    let binary_sensor = serde_json::json!({
        "name": "Motion",
        "unique_id": format!("camstream_{node}_motion"),
        "object_id": format!("{node}_motion"),
        "device_class": "motion",
        "state_topic": motion,
        "payload_on": "ON",
        "payload_off": "OFF",
        "availability_topic": availability,
        "device": device,
    });
    let camera = serde_json::json!({
        "name": "Last motion",
        "unique_id": format!("camstream_{node}_snapshot"),
        "object_id": format!("{node}_snapshot"),
        "topic": snapshot,
        "availability_topic": availability,
        "device": device,
    });
    let prefix = &s.discovery_prefix;
    Topics {
        discovery: vec![
            (
                format!("{prefix}/binary_sensor/{node}/motion/config"),
                binary_sensor.to_string(),
            ),
            (
                format!("{prefix}/camera/{node}/snapshot/config"),
                camera.to_string(),
            ),
        ],
        availability,
        motion,
        snapshot,
    }
}

fn on_off(moving: bool) -> &'static str {
    if moving { "ON" } else { "OFF" }
}

impl Mqtt {
    /// Starts the MQTT thread, which connects to the broker (and keeps
    /// trying).
    pub fn start(s: &MqttSettings, hostname: &str) -> Result<Mqtt> {
        let t = topics(s, hostname);
        let mut opts =
            MqttOptions::new(format!("camstream-{}", node_id(hostname)), &s.host, s.port);
        opts.set_keep_alive(Duration::from_secs(30));
        opts.set_max_packet_size(64 << 10, MAX_PICTURE + 1024);
        opts.set_last_will(LastWill::new(
            &t.availability,
            "offline",
            QoS::AtLeastOnce,
            true,
        ));
        if let Some((user, password)) = &s.credentials {
            opts.set_credentials(user, password);
        }
        // Room for a change or two while the thread waits to reconnect.
        let (client, connection) = Client::new(opts, 16);
        let shared = Arc::new(Shared {
            moving: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            picture: Mutex::new(None),
        });
        let broker = format!("{}:{}", s.host, s.port);
        log::info!(
            "MQTT: publishing motion to {broker} under {} (Home Assistant's discovery under {})",
            t.motion.trim_end_matches("/motion"),
            s.discovery_prefix
        );
        let motion_topic = t.motion.clone();
        let snapshot_topic = t.snapshot.clone();
        let (c, sh) = (client.clone(), shared.clone());
        std::thread::Builder::new()
            .name("mqtt".into())
            .spawn(move || run(connection, c, &sh, &t, &broker))
            .context("starting the MQTT thread")?;
        Ok(Mqtt {
            client,
            shared,
            motion_topic,
            snapshot_topic,
            moving: false,
        })
    }

    pub fn connected(&self) -> bool {
        self.shared.connected.load(Ordering::Relaxed)
    }

    /// Motion as the detector says it is now, and the picture it looked
    /// at: a start publishes the picture, then ON; a stop OFF. Never
    /// waits: while the broker is away, the thread publishes the state
    /// when it is back.
    pub fn motion(&mut self, moving: bool, picture: Option<&[u8]>) {
        if moving == self.moving {
            return;
        }
        self.moving = moving;
        self.shared.moving.store(moving, Ordering::Relaxed);
        let picture = picture.filter(|p| moving && p.len() <= MAX_PICTURE);
        if let Some(p) = picture {
            if let Ok(mut kept) = self.shared.picture.lock() {
                *kept = Some(p.to_vec());
            }
        }
        if !self.connected() {
            return;
        }
        if let Some(p) = picture {
            let _ =
                self.client
                    .try_publish(&self.snapshot_topic, QoS::AtMostOnce, true, p.to_vec());
        }
        if let Err(e) =
            self.client
                .try_publish(&self.motion_topic, QoS::AtLeastOnce, true, on_off(moving))
        {
            log::debug!("MQTT: motion {} not queued: {e}", on_off(moving));
        }
    }
}

/// The MQTT thread: drives the client's connection, publishes discovery
/// and the state on each connection, waits longer after each failure.
fn run(
    mut connection: rumqttc::Connection,
    client: Client,
    shared: &Shared,
    t: &Topics,
    broker: &str,
) {
    const FIRST_WAIT: Duration = Duration::from_secs(1);
    let mut wait = FIRST_WAIT;
    let mut said = String::new();
    for event in connection.iter() {
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                log::info!("MQTT: connected to {broker}");
                said.clear();
                wait = FIRST_WAIT;
                shared.connected.store(true, Ordering::Relaxed);
                let moving = shared.moving.load(Ordering::Relaxed);
                let picture = shared.picture.lock().ok().and_then(|p| p.clone());
                let mut out: Vec<(&str, QoS, Vec<u8>)> = t
                    .discovery
                    .iter()
                    .map(|(topic, json)| {
                        (topic.as_str(), QoS::AtLeastOnce, json.clone().into_bytes())
                    })
                    .collect();
                out.push((&t.availability, QoS::AtLeastOnce, b"online".to_vec()));
                if let Some(p) = picture {
                    out.push((&t.snapshot, QoS::AtMostOnce, p));
                }
                out.push((&t.motion, QoS::AtLeastOnce, on_off(moving).into()));
                for (topic, qos, payload) in out {
                    // The request queue is the client's: this thread must
                    // not wait on it, as it is the one that empties it.
                    if let Err(e) = client.try_publish(topic, qos, true, payload) {
                        log::warn!("MQTT: {topic} not queued: {e}");
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                shared.connected.store(false, Ordering::Relaxed);
                let why = match &e {
                    ConnectionError::ConnectionRefused(code) => {
                        format!("the broker refused the connection ({code:?})")
                    }
                    other => other.to_string(),
                };
                // Each new reason once, not each try.
                if why != said {
                    log::warn!("MQTT: {broker}: {why}; trying again, less often each time");
                    said = why;
                }
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(60));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_names_the_camera_and_its_topics() {
        let s = MqttSettings {
            host: "b".into(),
            port: 1883,
            credentials: None,
            topic: None,
            discovery_prefix: "homeassistant".into(),
        };
        let t = topics(&s, "Porch Cam.local");
        assert_eq!(t.motion, "camstream/porch_cam_local/motion");
        assert_eq!(
            t.discovery[0].0,
            "homeassistant/binary_sensor/porch_cam_local/motion/config"
        );
        assert_eq!(
            t.discovery[1].0,
            "homeassistant/camera/porch_cam_local/snapshot/config"
        );
        let sensor: serde_json::Value = serde_json::from_str(&t.discovery[0].1).unwrap();
        assert_eq!(sensor["device_class"], "motion");
        assert_eq!(sensor["state_topic"], t.motion);
        assert_eq!(sensor["device"]["name"], "Porch Cam.local");
        let camera: serde_json::Value = serde_json::from_str(&t.discovery[1].1).unwrap();
        assert_eq!(camera["topic"], t.snapshot);
        assert_ne!(sensor["unique_id"], camera["unique_id"]);
    }
}
