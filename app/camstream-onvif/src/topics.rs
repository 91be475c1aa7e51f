//! Which topics a subscription gets: CreatePullPointSubscription's
//! Filter, its TopicExpressions in WS-Topics' Concrete dialect and ONVIF's
//! ConcreteSet, read against the topics camstream publishes.

use crate::events::Topic;

impl Topic {
    /// Its path below ONVIF's topic namespace (tns1).
    fn path(self) -> &'static [&'static str] {
        match self {
            Topic::CellMotion => &["RuleEngine", "CellMotionDetector", "Motion"],
            Topic::MotionAlarm => &["VideoSource", "MotionAlarm"],
        }
    }

    fn bit(self) -> u8 {
        match self {
            Topic::CellMotion => 1,
            Topic::MotionAlarm => 2,
        }
    }
}

/// The topics a subscription gets: all, unless its filter names some.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topics(u8);

impl Topics {
    pub const ALL: Topics = Topics(3);

    pub fn has(self, t: Topic) -> bool {
        self.0 & t.bit() != 0
    }
}

/// WS-Topics' Concrete dialect: one topic's path.
pub const CONCRETE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete";
/// ONVIF's ConcreteSet: paths joined by `|`, a path ending in `//.`
/// taking the topics below it too (ONVIF Core, event handling).
pub const CONCRETE_SET: &str = "http://www.onvif.org/ver10/tev/topicExpression/ConcreteSet";

/// Why a subscription's filter is refused (WS-BaseNotification's faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterError {
    /// A dialect other than Concrete and ConcreteSet.
    Dialect,
    /// Not a topic expression of its dialect.
    Expression,
    /// No topic camstream has (GetEventProperties lists them).
    NoTopic,
}

impl FilterError {
    /// The fault's subcodes.
    pub fn subcodes(self) -> &'static [&'static str] {
        match self {
            FilterError::Dialect => &[
                "ter:InvalidArgVal",
                "wsnt:TopicExpressionDialectUnknownFault",
            ],
            FilterError::Expression => &["ter:InvalidArgVal", "wsnt:InvalidTopicExpressionFault"],
            FilterError::NoTopic => &["ter:InvalidArgVal", "wsnt:TopicNotSupportedFault"],
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            FilterError::Dialect => {
                "the TopicExpression's Dialect is neither Concrete nor ConcreteSet"
            }
            FilterError::Expression => "the TopicExpression is not a topic path of its dialect",
            FilterError::NoTopic => {
                "the filter selects no topic this camera has (tns1:RuleEngine/CellMotionDetector/Motion, tns1:VideoSource/MotionAlarm)"
            }
        }
    }
}

/// The most alternatives a ConcreteSet expression may join, and steps a
/// path may have: more is refused, not matched.
const MAX_ALTERNATIVES: usize = 16;
const MAX_STEPS: usize = 8;

/// The topics a TopicExpression selects: `expr` in `dialect` (absent:
/// ConcreteSet, the dialect ONVIF clients use), its prefixes resolved by
/// `ns_of` where the expression is.
pub fn topic_filter<'a>(
    expr: &str,
    dialect: Option<&str>,
    ns_of: impl Fn(&str) -> Option<&'a str>,
) -> Result<Topics, FilterError> {
    let set = match dialect.map(str::trim) {
        None => true,
        Some(d) if d == CONCRETE_SET => true,
        Some(d) if d == CONCRETE => false,
        Some(_) => return Err(FilterError::Dialect),
    };
    let mut topics = 0u8;
    let alternatives = expr.split('|');
    if !set && expr.contains('|') {
        return Err(FilterError::Expression);
    }
    for (n, alt) in alternatives.enumerate() {
        if n >= MAX_ALTERNATIVES {
            return Err(FilterError::Expression);
        }
        let alt = alt.trim();
        let (path, below) = match alt.strip_suffix("//.") {
            Some(p) if set => (p, true),
            Some(_) => return Err(FilterError::Expression),
            None => (alt, false),
        };
        let mut root_ns = None;
        let mut steps: Vec<&str> = Vec::new();
        for (i, step) in path.split('/').enumerate() {
            if i >= MAX_STEPS {
                return Err(FilterError::Expression);
            }
            let (prefix, local) = step.split_once(':').unwrap_or(("", step));
            let name_ok = |s: &str| {
                !s.is_empty()
                    && s.chars().all(|c| c.is_alphanumeric() || "_-.".contains(c))
                    && !s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
            };
            if !name_ok(local) || (!prefix.is_empty() && !name_ok(prefix)) {
                return Err(FilterError::Expression);
            }
            // Clients write tns1 without declaring it often enough that
            // it stands for ONVIF's topics unless declared otherwise.
            let ns = match ns_of(prefix) {
                Some(ns) => Some(ns),
                None if prefix == "tns1" => Some(crate::ns::TOPICS),
                None if prefix.is_empty() => None,
                None => return Err(FilterError::Expression),
            };
            if i == 0 {
                root_ns = ns;
            } else if !prefix.is_empty() && ns != root_ns {
                // A step in another namespace: no topic of ours.
                root_ns = None;
            }
            steps.push(local);
        }
        if root_ns != Some(crate::ns::TOPICS) {
            continue;
        }
        for t in Topic::ALL {
            let p = t.path();
            let hit = if below {
                p.starts_with(&steps)
            } else {
                p == steps.as_slice()
            };
            if hit {
                topics |= t.bit();
            }
        }
    }
    if topics == 0 {
        return Err(FilterError::NoTopic);
    }
    Ok(Topics(topics))
}

/// The topics CreatePullPointSubscription's Filter selects: each of its
/// TopicExpressions must (WS-BaseNotification: a message passes a filter
/// when it passes every part); none selects all. A MessageContent part
/// is not applied: every message of a selected topic is sent.
pub fn subscription_filter(req: &crate::soap::Request) -> Result<Topics, FilterError> {
    let doc = &req.doc;
    let Some(filter) = doc.path(req.op, &["Filter"]) else {
        return Ok(Topics::ALL);
    };
    let mut topics = Topics::ALL;
    for i in doc.children(filter) {
        let Some(el) = doc.get(i).filter(|e| e.name == "TopicExpression") else {
            continue;
        };
        let t = topic_filter(doc.text(i), el.attr("Dialect"), |p| {
            doc.resolve_prefix(i, p)
        })?;
        topics = Topics(topics.0 & t.0);
    }
    if topics.0 == 0 {
        return Err(FilterError::NoTopic);
    }
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Limits, Subscriptions, state};
    use crate::xml::Limits as XmlLimits;

    #[test]
    fn topic_expressions_select_topics() {
        use FilterError::*;
        let onvif = |p: &str| (p == "tns1").then_some(crate::ns::TOPICS);
        let f = |e: &str, d: Option<&str>| topic_filter(e, d, onvif);
        let cell = Topics(Topic::CellMotion.bit());
        let alarm = Topics(Topic::MotionAlarm.bit());
        let set = Some(CONCRETE_SET);
        assert_eq!(
            f("tns1:RuleEngine/CellMotionDetector/Motion", Some(CONCRETE)),
            Ok(cell)
        );
        assert_eq!(f(" tns1:VideoSource/MotionAlarm ", set), Ok(alarm));
        assert_eq!(f("tns1:RuleEngine//.", set), Ok(cell));
        assert_eq!(
            f("tns1:RuleEngine/CellMotionDetector/Motion//.", None),
            Ok(cell)
        );
        assert_eq!(
            f("tns1:VideoSource//.|tns1:RuleEngine//.", set),
            Ok(Topics::ALL)
        );
        // Steps may carry the root's prefix.
        assert_eq!(f("tns1:VideoSource/tns1:MotionAlarm", set), Ok(alarm));
        // Topics camstream has not, alone or beside one it has.
        assert_eq!(
            f("tns1:RuleEngine/FieldDetector/ObjectsInside", set),
            Err(NoTopic)
        );
        assert_eq!(f("tns1:RuleEngine", set), Err(NoTopic));
        assert_eq!(
            f("tns1:Device//.|tns1:VideoSource/MotionAlarm", set),
            Ok(alarm)
        );
        // A prefix bound elsewhere, or not bound.
        let axis = |p: &str| (p == "tns1").then_some("http://www.axis.com/2009/event/topics");
        assert_eq!(topic_filter("tns1:VideoSource//.", set, axis), Err(NoTopic));
        assert_eq!(f("tt:VideoSource//.", set), Err(Expression));
        // Not the dialect's syntax.
        for bad in [
            "",
            "tns1:RuleEngine//",
            "tns1:RuleEngine//./Motion",
            "tns1:Rule Engine",
            "tns1:*",
            "//.",
        ] {
            assert_eq!(f(bad, set), Err(Expression), "{bad:?}");
        }
        assert_eq!(f("tns1:RuleEngine//.", Some(CONCRETE)), Err(Expression));
        assert_eq!(
            f(
                "tns1:VideoSource/MotionAlarm|tns1:RuleEngine//.",
                Some(CONCRETE)
            ),
            Err(Expression)
        );
        assert_eq!(
            f(&["tns1:VideoSource/MotionAlarm"; 17].join("|"), set),
            Err(Expression)
        );
        assert_eq!(
            f(
                "tns1:VideoSource/MotionAlarm",
                Some("http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full")
            ),
            Err(Dialect)
        );
    }

    #[test]
    fn a_subscription_gets_only_its_filters_topics() {
        use crate::soap::Request;
        let request = |filter: &str| {
            let body = format!(
                r#"<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><CreatePullPointSubscription xmlns="http://www.onvif.org/ver10/events/wsdl"{filter}<InitialTerminationTime>PT60S</InitialTerminationTime></CreatePullPointSubscription></s:Body></s:Envelope>"#
            );
            Request::parse(body.as_bytes(), &XmlLimits::default()).unwrap()
        };
        let filter = |exprs: &[&str]| {
            let exprs: String = exprs
                .iter()
                .map(|e| format!(r#"<wsnt:TopicExpression Dialect="{CONCRETE_SET}">{e}</wsnt:TopicExpression>"#))
                .collect();
            format!(
                r#"><Filter xmlns:wsnt="http://docs.oasis-open.org/wsn/b-2" xmlns:tns1="http://www.onvif.org/ver10/topics">{exprs}</Filter>"#
            )
        };
        assert_eq!(subscription_filter(&request(">")), Ok(Topics::ALL));
        let alarm = subscription_filter(&request(&filter(&["tns1:VideoSource//."]))).unwrap();
        assert_eq!(alarm, Topics(Topic::MotionAlarm.bit()));
        // Two expressions: what both select.
        assert_eq!(
            subscription_filter(&request(&filter(&[
                "tns1:VideoSource//.|tns1:RuleEngine//.",
                "tns1:RuleEngine//."
            ]))),
            Ok(Topics(Topic::CellMotion.bit()))
        );
        assert_eq!(
            subscription_filter(&request(&filter(&[
                "tns1:VideoSource//.",
                "tns1:RuleEngine//."
            ]))),
            Err(FilterError::NoTopic)
        );
        // The prefix as the request binds it (here tns1 is not ONVIF's).
        let other = r#"><Filter xmlns:tns1="urn:other"><TopicExpression>tns1:VideoSource//.</TopicExpression></Filter>"#;
        assert_eq!(
            subscription_filter(&request(other)),
            Err(FilterError::NoTopic)
        );

        let mut subs = Subscriptions::new(Limits::default());
        subs.create(1, None, 500, alarm, &state(false, 100))
            .unwrap();
        for n in state(true, 101) {
            subs.publish(n);
        }
        let got = subs.find(1, None).unwrap().take(10);
        assert_eq!(
            got.iter().map(|n| (n.topic, n.value)).collect::<Vec<_>>(),
            [(Topic::MotionAlarm, false), (Topic::MotionAlarm, true)]
        );
    }
}
