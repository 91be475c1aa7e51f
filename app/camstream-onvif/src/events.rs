//! ONVIF's event service (Profile S, PullPoint only): the motion topics
//! camstream publishes, the subscriptions clients make (each its own
//! user's, bounded in number, queue and term) and the service's answers.
//! No I/O: the daemon says when it is and what changed, and parks a
//! PullMessages that finds nothing queued.

use std::collections::VecDeque;
use std::fmt::Write;

use crate::ns;
use crate::responses::DateTime;
pub use crate::topics::{FilterError, Topics, subscription_filter, topic_filter};
use crate::wsse::parse_created;
use crate::xml::escape;

/// What bounds the subscriptions (docs/SECURITY.md).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub total: usize,
    pub per_user: usize,
    /// Notifications kept per subscription: the oldest go first.
    pub queue: usize,
    /// A term's bounds, in seconds: a request for less or more gets these.
    pub min_term: i64,
    pub max_term: i64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            total: 16,
            per_user: 4,
            queue: 32,
            min_term: 10,
            max_term: 3600,
        }
    }
}

/// The topics, both properties of the one video source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// tns1:RuleEngine/CellMotionDetector/Motion, data IsMotion: what
    /// Home Assistant and most NVRs look for.
    CellMotion,
    /// tns1:VideoSource/MotionAlarm, data State: older NVRs'.
    MotionAlarm,
}

impl Topic {
    pub const ALL: [Topic; 2] = [Topic::CellMotion, Topic::MotionAlarm];

    pub fn name(self) -> &'static str {
        match self {
            Topic::CellMotion => "tns1:RuleEngine/CellMotionDetector/Motion",
            Topic::MotionAlarm => "tns1:VideoSource/MotionAlarm",
        }
    }
}

/// One change of a topic's value (or its value at a synchronization
/// point: `initialized`). Small and Copy: a queue of 32 of them is all a
/// subscription holds beside its id, user and term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notification {
    pub topic: Topic,
    /// Seconds since 1970, UTC.
    pub utc: i64,
    pub initialized: bool,
    pub value: bool,
}

/// Both topics' state now, as a synchronization point sends it.
pub fn state(moving: bool, utc: i64) -> [Notification; 2] {
    Topic::ALL.map(|topic| Notification {
        topic,
        utc,
        initialized: true,
        value: moving,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No subscription at that address (never made, unsubscribed, or its
    /// term ran out).
    Unknown,
    /// Another user's: answered as NotAuthorized.
    NotYours,
    TooMany {
        per_user: bool,
    },
}

impl Refusal {
    pub fn describe(self) -> &'static str {
        match self {
            Refusal::Unknown => "no such subscription (unsubscribed, or its term ran out)",
            Refusal::NotYours => "the subscription is another user's",
            Refusal::TooMany { per_user: true } => {
                "this user has as many subscriptions as a user may (4): renew or unsubscribe one"
            }
            Refusal::TooMany { per_user: false } => {
                "the camera has as many subscriptions as it keeps (16)"
            }
        }
    }
}

#[derive(Debug)]
pub struct Subscription {
    pub id: u64,
    /// Who made it (None: no users are set); only they may use it.
    pub user: Option<String>,
    /// When its term ends, in seconds since 1970.
    pub expires: i64,
    /// What its filter selected.
    pub topics: Topics,
    queue: VecDeque<Notification>,
}

impl Subscription {
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Up to `limit` notifications, oldest first, out of the queue.
    pub fn take(&mut self, limit: usize) -> Vec<Notification> {
        let n = limit.min(self.queue.len());
        self.queue.drain(..n).collect()
    }

    fn push(&mut self, n: Notification, cap: usize) {
        if !self.topics.has(n.topic) {
            return;
        }
        while self.queue.len() >= cap.max(1) {
            self.queue.pop_front();
        }
        self.queue.push_back(n);
    }
}

#[derive(Debug, Default)]
pub struct Subscriptions {
    list: Vec<Subscription>,
    limits: Limits,
}

impl Subscriptions {
    pub fn new(limits: Limits) -> Subscriptions {
        Subscriptions {
            list: Vec::new(),
            limits,
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// A term asked for (`until`, seconds since 1970), brought within the
    /// limits from `now`.
    pub fn term(&self, now: i64, until: Option<i64>) -> i64 {
        let min = now.saturating_add(self.limits.min_term);
        let max = now.saturating_add(self.limits.max_term);
        until.unwrap_or(max).clamp(min, max)
    }

    /// A new subscription `id` for `user` to `topics`, its queue starting
    /// with their `state` (a property's Initialized messages).
    pub fn create(
        &mut self,
        id: u64,
        user: Option<&str>,
        expires: i64,
        topics: Topics,
        state: &[Notification],
    ) -> Result<&Subscription, Refusal> {
        if self.list.len() >= self.limits.total {
            return Err(Refusal::TooMany { per_user: false });
        }
        if user.is_some()
            && self
                .list
                .iter()
                .filter(|s| s.user.as_deref() == user)
                .count()
                >= self.limits.per_user
        {
            return Err(Refusal::TooMany { per_user: true });
        }
        let mut s = Subscription {
            id,
            user: user.map(str::to_owned),
            expires,
            topics,
            queue: VecDeque::with_capacity(state.len()),
        };
        for n in state {
            s.push(*n, self.limits.queue);
        }
        self.list.push(s);
        self.list.last().ok_or(Refusal::Unknown)
    }

    /// The subscription `id`, if it is `user`'s.
    pub fn find(&mut self, id: u64, user: Option<&str>) -> Result<&mut Subscription, Refusal> {
        let s = self
            .list
            .iter_mut()
            .find(|s| s.id == id)
            .ok_or(Refusal::Unknown)?;
        if s.user.as_deref() != user {
            return Err(Refusal::NotYours);
        }
        Ok(s)
    }

    /// Whether `id` is still there (a parked pull's subscription).
    pub fn exists(&self, id: u64) -> bool {
        self.list.iter().any(|s| s.id == id)
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut Subscription> {
        self.list.iter_mut().find(|s| s.id == id)
    }

    /// SetSynchronizationPoint: the topics' `state` queued to `id` again.
    pub fn synchronize(
        &mut self,
        id: u64,
        user: Option<&str>,
        state: &[Notification],
    ) -> Result<(), Refusal> {
        let cap = self.limits.queue;
        let s = self.find(id, user)?;
        for n in state {
            s.push(*n, cap);
        }
        Ok(())
    }

    pub fn remove(&mut self, id: u64, user: Option<&str>) -> Result<(), Refusal> {
        self.find(id, user)?;
        self.list.retain(|s| s.id != id);
        Ok(())
    }

    /// A change, queued to every subscription.
    pub fn publish(&mut self, n: Notification) {
        let cap = self.limits.queue;
        for s in &mut self.list {
            s.push(n, cap);
        }
    }

    /// Ends the subscriptions whose term is over at `now`; says how many.
    pub fn expire(&mut self, now: i64) -> usize {
        let before = self.list.len();
        self.list.retain(|s| s.expires > now);
        before - self.list.len()
    }
}

/// A subscription's id as its address writes it, and back.
pub fn id_text(id: u64) -> String {
    format!("{id:016x}")
}

pub fn parse_id(s: &str) -> Option<u64> {
    (s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
}

/// An xs:duration as seconds (whole; a fraction is dropped). Years and
/// months have no fixed length and are refused, as is a negative one.
pub fn parse_duration(s: &str) -> Option<i64> {
    let rest = s.trim_matches(XML_SPACE).strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total = 0i64;
    let mut any = false;
    if !date.is_empty() {
        total = digits(date.strip_suffix('D')?)?.checked_mul(86400)?;
        any = true;
    }
    if let Some(mut rest) = time {
        for (unit, secs) in [('H', 3600), ('M', 60), ('S', 1)] {
            let Some((num, after)) = rest.split_once(unit) else {
                continue;
            };
            // Seconds alone may have a fraction.
            let whole = match num.split_once('.') {
                Some((w, f)) if unit == 'S' && digits(f).is_some() => w,
                Some(_) => return None,
                None => num,
            };
            total = total.checked_add(digits(whole)?.checked_mul(secs)?)?;
            rest = after;
            any = true;
        }
        if !rest.is_empty() {
            return None;
        }
    }
    any.then_some(total)
}

/// Decimal digits, at least one, as a number.
fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

const XML_SPACE: [char; 4] = [' ', '\t', '\r', '\n'];

/// A termination time as WS-BaseNotification allows it: an xs:dateTime or
/// an xs:duration from `now`.
pub fn parse_termination(s: &str, now: i64) -> Option<i64> {
    let t = s.trim_matches(XML_SPACE);
    if t.starts_with('P') {
        parse_duration(t).map(|d| now.saturating_add(d))
    } else {
        parse_created(t)
    }
}

fn time(t: i64) -> String {
    let d = DateTime::from_unix(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        d.year, d.month, d.day, d.hour, d.minute, d.second
    )
}

/// A SOAP envelope with the event service's namespaces, and the
/// WS-Addressing Action of the answer (WS-BaseNotification's bindings
/// name one per answer).
fn envelope(action: &str, body: &str) -> String {
    let mut s = String::with_capacity(body.len() + 700);
    let _ = write!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="{}" xmlns:wsa="{}" xmlns:tt="{}" xmlns:tev="{}" xmlns:wsnt="{}" xmlns:wstop="{}" xmlns:tns1="{}"><env:Header><wsa:Action>{action}</wsa:Action></env:Header><env:Body>"#,
        ns::SOAP_ENV,
        ns::WSA,
        ns::SCHEMA,
        ns::EVENTS,
        ns::WSNT,
        ns::WSTOP,
        ns::TOPICS,
    );
    s.push_str(body);
    s.push_str("</env:Body></env:Envelope>");
    s
}

const TEV_ACTION: &str = "http://www.onvif.org/ver10/events/wsdl";

fn capabilities_element(limits: &Limits) -> String {
    format!(
        r#"<tev:Capabilities WSSubscriptionPolicySupport="false" WSPausableSubscriptionManagerInterfaceSupport="false" MaxNotificationProducers="0" MaxPullPoints="{}" PersistentNotificationStorage="false"/>"#,
        limits.total
    )
}

/// The event service's capabilities, as GetServices includes them.
pub fn service_capabilities_element() -> String {
    capabilities_element(&Limits::default())
}

pub fn service_capabilities() -> String {
    envelope(
        &format!("{TEV_ACTION}/EventPortType/GetServiceCapabilitiesResponse"),
        &format!(
            "<tev:GetServiceCapabilitiesResponse>{}</tev:GetServiceCapabilitiesResponse>",
            service_capabilities_element()
        ),
    )
}

/// GetEventProperties: the two topics, their sources and data.
pub fn event_properties() -> String {
    let item =
        |name: &str, ty: &str| format!(r#"<tt:SimpleItemDescription Name="{name}" Type="{ty}"/>"#);
    let describe = |source: String, data: String| {
        format!(
            r#"<tt:MessageDescription IsProperty="true"><tt:Source>{source}</tt:Source><tt:Data>{data}</tt:Data></tt:MessageDescription>"#
        )
    };
    let cell = describe(
        item("VideoSourceConfigurationToken", "tt:ReferenceToken")
            + &item("VideoAnalyticsConfigurationToken", "tt:ReferenceToken")
            + &item("Rule", "xs:string"),
        item("IsMotion", "xs:boolean"),
    );
    let alarm = describe(
        item("Source", "tt:ReferenceToken"),
        item("State", "xs:boolean"),
    );
    let body = format!(
        r#"<tev:GetEventPropertiesResponse><tev:TopicNamespaceLocation>http://www.onvif.org/onvif/ver10/topics/topicns.xml</tev:TopicNamespaceLocation><wsnt:FixedTopicSet>true</wsnt:FixedTopicSet><wstop:TopicSet><tns1:RuleEngine wstop:topic="false"><CellMotionDetector wstop:topic="false"><Motion wstop:topic="true">{cell}</Motion></CellMotionDetector></tns1:RuleEngine><tns1:VideoSource wstop:topic="false"><MotionAlarm wstop:topic="true">{alarm}</MotionAlarm></tns1:VideoSource></wstop:TopicSet><wsnt:TopicExpressionDialect>http://www.onvif.org/ver10/tev/topicExpression/ConcreteSet</wsnt:TopicExpressionDialect><wsnt:TopicExpressionDialect>http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete</wsnt:TopicExpressionDialect><tev:MessageContentFilterDialect>http://www.onvif.org/ver10/tev/messageContentFilter/ItemFilter</tev:MessageContentFilterDialect><tev:MessageContentSchemaLocation>http://www.onvif.org/onvif/ver10/schema/onvif.xsd</tev:MessageContentSchemaLocation></tev:GetEventPropertiesResponse>"#
    );
    envelope(
        &format!("{TEV_ACTION}/EventPortType/GetEventPropertiesResponse"),
        &body,
    )
}

pub fn create_pull_point(address: &str, now: i64, expires: i64) -> String {
    let body = format!(
        "<tev:CreatePullPointSubscriptionResponse><tev:SubscriptionReference><wsa:Address>{}</wsa:Address></tev:SubscriptionReference><wsnt:CurrentTime>{}</wsnt:CurrentTime><wsnt:TerminationTime>{}</wsnt:TerminationTime></tev:CreatePullPointSubscriptionResponse>",
        escape(address),
        time(now),
        time(expires)
    );
    envelope(
        &format!("{TEV_ACTION}/EventPortType/CreatePullPointSubscriptionResponse"),
        &body,
    )
}

/// Where the notifications come from: the video source, its (one)
/// analytics configuration and rule.
pub struct Source<'a> {
    pub video_source: &'a str,
    pub video_source_configuration: &'a str,
    pub analytics: &'a str,
    pub rule: &'a str,
}

pub fn pull_messages(now: i64, expires: i64, notes: &[Notification], src: &Source<'_>) -> String {
    let mut body = format!(
        "<tev:PullMessagesResponse><tev:CurrentTime>{}</tev:CurrentTime><tev:TerminationTime>{}</tev:TerminationTime>",
        time(now),
        time(expires)
    );
    for n in notes {
        let source = match n.topic {
            Topic::CellMotion => format!(
                r#"<tt:SimpleItem Name="VideoSourceConfigurationToken" Value="{}"/><tt:SimpleItem Name="VideoAnalyticsConfigurationToken" Value="{}"/><tt:SimpleItem Name="Rule" Value="{}"/>"#,
                escape(src.video_source_configuration),
                escape(src.analytics),
                escape(src.rule)
            ),
            Topic::MotionAlarm => format!(
                r#"<tt:SimpleItem Name="Source" Value="{}"/>"#,
                escape(src.video_source)
            ),
        };
        let data = match n.topic {
            Topic::CellMotion => "IsMotion",
            Topic::MotionAlarm => "State",
        };
        let _ = write!(
            body,
            r#"<wsnt:NotificationMessage><wsnt:Topic Dialect="http://www.onvif.org/ver10/tev/topicExpression/ConcreteSet">{}</wsnt:Topic><wsnt:Message><tt:Message UtcTime="{}" PropertyOperation="{}"><tt:Source>{source}</tt:Source><tt:Data><tt:SimpleItem Name="{data}" Value="{}"/></tt:Data></tt:Message></wsnt:Message></wsnt:NotificationMessage>"#,
            n.topic.name(),
            time(n.utc),
            if n.initialized {
                "Initialized"
            } else {
                "Changed"
            },
            n.value
        );
    }
    body.push_str("</tev:PullMessagesResponse>");
    envelope(
        &format!("{TEV_ACTION}/PullPointSubscription/PullMessagesResponse"),
        &body,
    )
}

pub fn renew(now: i64, expires: i64) -> String {
    envelope(
        "http://docs.oasis-open.org/wsn/bw-2/SubscriptionManager/RenewResponse",
        &format!(
            "<wsnt:RenewResponse><wsnt:TerminationTime>{}</wsnt:TerminationTime><wsnt:CurrentTime>{}</wsnt:CurrentTime></wsnt:RenewResponse>",
            time(expires),
            time(now)
        ),
    )
}

pub fn unsubscribe() -> String {
    envelope(
        "http://docs.oasis-open.org/wsn/bw-2/SubscriptionManager/UnsubscribeResponse",
        "<wsnt:UnsubscribeResponse/>",
    )
}

pub fn set_synchronization_point() -> String {
    envelope(
        &format!("{TEV_ACTION}/PullPointSubscription/SetSynchronizationPointResponse"),
        "<tev:SetSynchronizationPointResponse/>",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xml::{Doc, Limits as XmlLimits};

    #[test]
    fn durations() {
        assert_eq!(parse_duration("PT60S"), Some(60));
        assert_eq!(parse_duration("PT1M"), Some(60));
        assert_eq!(parse_duration("PT1H2M3.5S"), Some(3723));
        assert_eq!(parse_duration("P1DT1S"), Some(86401));
        assert_eq!(parse_duration(" PT10S\n"), Some(10));
        assert_eq!(parse_duration("PT0S"), Some(0));
        for not in [
            "",
            "P",
            "PT",
            "60",
            "PT60",
            "PTS",
            "P1Y",
            "P1M",
            "-PT5S",
            "PT5S5S",
            "PT1S1M",
            "PT.5S",
            "PT5.5M",
            "P1.5D",
            "PT99999999999999999999S",
        ] {
            assert_eq!(parse_duration(not), None, "{not}");
        }
        assert_eq!(parse_termination("PT60S", 1000), Some(1060));
        assert_eq!(parse_termination("1970-01-01T00:20:00Z", 0), Some(1200));
        assert_eq!(parse_termination("tomorrow", 0), None);
    }

    #[test]
    fn ids() {
        assert_eq!(
            parse_id(&id_text(0xdead_beef_0123_4567)),
            Some(0xdead_beef_0123_4567)
        );
        assert_eq!(parse_id("00000000000000001"), None);
        assert_eq!(parse_id("+000000000000001"), None);
        assert_eq!(parse_id("zzzzzzzzzzzzzzzz"), None);
    }

    #[test]
    fn a_notification_is_small() {
        assert!(std::mem::size_of::<Notification>() <= 24);
    }

    fn note(value: bool, utc: i64) -> Notification {
        Notification {
            topic: Topic::CellMotion,
            utc,
            initialized: false,
            value,
        }
    }

    #[test]
    fn subscriptions_are_their_users_and_bounded() {
        let mut subs = Subscriptions::new(Limits::default());
        let init = state(false, 100);
        for id in 0..4 {
            subs.create(id, Some("alice"), 200, Topics::ALL, &init)
                .unwrap();
        }
        assert_eq!(
            subs.create(4, Some("alice"), 200, Topics::ALL, &init)
                .unwrap_err(),
            Refusal::TooMany { per_user: true }
        );
        assert_eq!(subs.find(0, Some("bob")).unwrap_err(), Refusal::NotYours);
        assert_eq!(subs.find(0, None).unwrap_err(), Refusal::NotYours);
        assert_eq!(subs.find(99, Some("alice")).unwrap_err(), Refusal::Unknown);
        assert_eq!(subs.remove(0, Some("bob")).unwrap_err(), Refusal::NotYours);
        subs.remove(0, Some("alice")).unwrap();
        subs.create(4, Some("alice"), 200, Topics::ALL, &init)
            .unwrap();
        for id in 10..22 {
            subs.create(id, Some(&format!("u{}", id % 3)), 200, Topics::ALL, &init)
                .unwrap();
        }
        assert_eq!(subs.len(), 16);
        assert_eq!(
            subs.create(30, Some("carol"), 200, Topics::ALL, &init)
                .unwrap_err(),
            Refusal::TooMany { per_user: false }
        );
        // Terms end.
        subs.get_mut(1).unwrap().expires = 150;
        assert_eq!(subs.expire(150), 1);
        assert!(!subs.exists(1));
    }

    #[test]
    fn queues_start_with_the_state_and_keep_the_newest() {
        let mut subs = Subscriptions::new(Limits {
            queue: 4,
            ..Limits::default()
        });
        subs.create(1, None, 500, Topics::ALL, &state(true, 100))
            .unwrap();
        let s = subs.find(1, None).unwrap();
        let first = s.take(10);
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|n| n.initialized && n.value));
        assert!(s.is_empty());
        for t in 0..10 {
            subs.publish(note(t % 2 == 0, t));
        }
        let s = subs.find(1, None).unwrap();
        let kept = s.take(2);
        assert_eq!(kept.iter().map(|n| n.utc).collect::<Vec<_>>(), [6, 7]);
        assert_eq!(s.take(100).len(), 2);
    }

    #[test]
    fn terms_within_the_limits() {
        let subs = Subscriptions::new(Limits::default());
        assert_eq!(subs.term(1000, None), 4600);
        assert_eq!(subs.term(1000, Some(1001)), 1010);
        assert_eq!(subs.term(1000, Some(99_999)), 4600);
        assert_eq!(subs.term(1000, Some(1060)), 1060);
    }

    /// The event requests of the two clients, recorded through a relay
    /// (user admin, password "secret-pass"): what the daemon reads of them
    /// is there and parses.
    #[test]
    fn recorded_requests() {
        use crate::soap::Request;
        for (client, ops) in [
            (
                "onvif-zeep-async-4.3.0",
                &[
                    "GetServiceCapabilities",
                    "GetEventProperties",
                    "CreatePullPointSubscription",
                    "SetSynchronizationPoint",
                    "PullMessages",
                    "Renew",
                    "Unsubscribe",
                ][..],
            ),
            (
                "node-onvif-0.8.3",
                &[
                    "CreatePullPointSubscription",
                    "PullMessages",
                    "Renew",
                    "Unsubscribe",
                ][..],
            ),
        ] {
            for op in ops {
                let path = format!(
                    "{}/../../tests/testdata/onvif/{client}-{op}.http",
                    env!("CARGO_MANIFEST_DIR")
                );
                let all = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
                let body = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                let r = Request::parse(&all[body..], &XmlLimits::default()).unwrap();
                assert_eq!(r.operation(), *op, "{path}");
                let t = r.token.as_ref().unwrap().as_ref().unwrap();
                assert!(t.username == "admin" && t.matches("secret-pass"), "{path}");
                match *op {
                    "CreatePullPointSubscription" => {
                        let term = r.arg(&["InitialTerminationTime"]).unwrap();
                        assert!(parse_termination(term, 0).unwrap() >= 60, "{path}");
                    }
                    "PullMessages" => {
                        let timeout = parse_duration(r.arg(&["Timeout"]).unwrap());
                        assert!(timeout.is_some_and(|t| t > 0), "{path}");
                        assert!(r.arg(&["MessageLimit"]).unwrap().parse::<usize>().is_ok());
                    }
                    "Renew" => {
                        let term = r.arg(&["TerminationTime"]).unwrap();
                        assert!(parse_termination(term, 0).unwrap() >= 60, "{path}");
                    }
                    _ => {}
                }
                // The request line names the path the daemon routes by.
                let line =
                    String::from_utf8_lossy(&all[..all.iter().position(|&b| b == b'\r').unwrap()])
                        .into_owned();
                let pullpoint = matches!(
                    *op,
                    "PullMessages" | "Renew" | "Unsubscribe" | "SetSynchronizationPoint"
                );
                assert_eq!(
                    line.contains("/onvif/events_service/pullpoint/"),
                    pullpoint,
                    "{line}"
                );
            }
        }
    }

    #[test]
    fn answers_are_well_formed() {
        let src = Source {
            video_source: "camera",
            video_source_configuration: "camera",
            analytics: "analytics",
            rule: "motion",
        };
        for xml in [
            service_capabilities(),
            event_properties(),
            create_pull_point("http://cam/onvif/events_service/pullpoint/00&<", 0, 60),
            pull_messages(0, 60, &state(true, 0), &src),
            pull_messages(0, 60, &[], &src),
            renew(0, 60),
            unsubscribe(),
            set_synchronization_point(),
        ] {
            Doc::parse(xml.as_bytes(), &XmlLimits::default())
                .unwrap_or_else(|e| panic!("{e}: {xml}"));
        }
        let m = pull_messages(0, 60, &[note(true, 86400)], &src);
        assert!(
            m.contains(r#"UtcTime="1970-01-02T00:00:00Z" PropertyOperation="Changed""#),
            "{m}"
        );
        assert!(
            m.contains(r#"<tt:SimpleItem Name="IsMotion" Value="true"/>"#),
            "{m}"
        );
        assert!(
            m.contains(">tns1:RuleEngine/CellMotionDetector/Motion</wsnt:Topic>"),
            "{m}"
        );
    }
}
