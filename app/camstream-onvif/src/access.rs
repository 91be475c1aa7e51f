//! Who may call what: ONVIF Core's user levels, the access class of each
//! operation camstream serves (from the Core and Media service
//! specifications), and the Core's default access policy between them.

use std::fmt;
use std::str::FromStr;

/// An operation's access class (ONVIF Core, "Access classes for service
/// requests").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessClass {
    /// Served without a user.
    PreAuth,
    ReadSystem,
    ReadSystemSensitive,
    ReadSystemSecret,
    WriteSystem,
    Unrecoverable,
    ReadMedia,
    /// Changes what the device does for everyone (an encoder's settings).
    Actuate,
}

/// The operations of class PRE_AUTH camstream serves: a client needs the
/// camera's time and its services before it can make a token.
pub const PRE_AUTH: [&str; 7] = [
    "GetSystemDateAndTime",
    "GetServices",
    "GetServiceCapabilities",
    "GetCapabilities",
    "GetHostname",
    "GetWsdlUrl",
    "GetEndpointReference",
];

impl AccessClass {
    /// The class of `op` (a device or media service operation); an
    /// operation camstream does not class is taken as WRITE_SYSTEM, so that
    /// one added later without a class is the Administrator's alone.
    pub fn of(op: &str) -> AccessClass {
        match op {
            _ if PRE_AUTH.contains(&op) => AccessClass::PreAuth,
            "GetDeviceInformation" | "GetScopes" | "GetNetworkInterfaces" => {
                AccessClass::ReadSystem
            }
            "GetProfiles"
            | "GetProfile"
            | "GetVideoSources"
            | "GetVideoSourceConfigurations"
            | "GetVideoSourceConfiguration"
            | "GetVideoEncoderConfigurations"
            | "GetVideoEncoderConfiguration"
            | "GetVideoEncoderConfigurationOptions"
            | "GetStreamUri"
            | "GetSnapshotUri"
            | "GetAudioSources"
            | "GetAudioSourceConfigurations"
            | "GetAudioSourceConfiguration"
            | "GetCompatibleAudioSourceConfigurations"
            | "GetAudioSourceConfigurationOptions"
            | "GetAudioEncoderConfigurations"
            | "GetAudioEncoderConfiguration"
            | "GetCompatibleAudioEncoderConfigurations"
            | "GetAudioEncoderConfigurationOptions"
            // The event service's (its WSDL's access classes).
            | "GetEventProperties"
            | "CreatePullPointSubscription"
            | "PullMessages"
            | "Renew"
            | "Unsubscribe"
            | "SetSynchronizationPoint"
            // The imaging service's.
            | "GetImagingSettings"
            | "GetOptions"
            | "GetStatus"
            | "GetMoveOptions" => AccessClass::ReadMedia,
            "SetVideoEncoderConfiguration"
            | "SetAudioEncoderConfiguration"
            | "SetAudioSourceConfiguration"
            | "SetImagingSettings"
            | "AddAudioSourceConfiguration"
            | "AddAudioEncoderConfiguration" => AccessClass::Actuate,
            "GetUsers" => AccessClass::ReadSystemSecret,
            _ => AccessClass::WriteSystem,
        }
    }

    /// The lowest user level the Core's default access policy gives it.
    pub fn needs(self) -> UserLevel {
        match self {
            AccessClass::PreAuth | AccessClass::ReadSystem | AccessClass::ReadMedia => {
                UserLevel::User
            }
            AccessClass::ReadSystemSensitive | AccessClass::Actuate => UserLevel::Operator,
            AccessClass::ReadSystemSecret
            | AccessClass::WriteSystem
            | AccessClass::Unrecoverable => UserLevel::Administrator,
        }
    }
}

impl fmt::Display for AccessClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AccessClass::PreAuth => "PRE_AUTH",
            AccessClass::ReadSystem => "READ_SYSTEM",
            AccessClass::ReadSystemSensitive => "READ_SYSTEM_SENSITIVE",
            AccessClass::ReadSystemSecret => "READ_SYSTEM_SECRET",
            AccessClass::WriteSystem => "WRITE_SYSTEM",
            AccessClass::Unrecoverable => "UNRECOVERABLE",
            AccessClass::ReadMedia => "READ_MEDIA",
            AccessClass::Actuate => "ACTUATE",
        })
    }
}

/// A user's level (ONVIF's UserLevel), least to most: each may do what
/// the ones below it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UserLevel {
    /// Watches: PRE_AUTH, READ_SYSTEM, READ_MEDIA.
    User,
    /// Also changes what everyone sees: READ_SYSTEM_SENSITIVE, ACTUATE.
    Operator,
    /// Everything.
    Administrator,
}

impl UserLevel {
    /// The names the config and `camstream passwd` take, as ONVIF's
    /// UserLevel values are spelled, in lower case like the config's other
    /// values.
    pub const NAMES: [&'static str; 3] = ["administrator", "operator", "user"];

    /// Whether the Core's default access policy lets this level call an
    /// operation of class `class`.
    pub fn may(self, class: AccessClass) -> bool {
        self >= class.needs()
    }
}

impl fmt::Display for UserLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UserLevel::User => "user",
            UserLevel::Operator => "operator",
            UserLevel::Administrator => "administrator",
        })
    }
}

impl FromStr for UserLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<UserLevel, String> {
        match s {
            "administrator" => Ok(UserLevel::Administrator),
            "operator" => Ok(UserLevel::Operator),
            "user" => Ok(UserLevel::User),
            _ => Err(format!(
                "{s:?} is not a user level: use administrator, operator or user"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_access_policy() {
        use AccessClass::*;
        use UserLevel::*;
        // ONVIF Core's table, row by row: Administrator, Operator, User.
        for (class, want) in [
            (PreAuth, [true, true, true]),
            (ReadSystem, [true, true, true]),
            (ReadSystemSensitive, [true, true, false]),
            (ReadSystemSecret, [true, false, false]),
            (WriteSystem, [true, false, false]),
            (Unrecoverable, [true, false, false]),
            (ReadMedia, [true, true, true]),
            (Actuate, [true, true, false]),
        ] {
            let got = [Administrator, Operator, User].map(|l| l.may(class));
            assert_eq!(got, want, "{class}");
        }
    }

    #[test]
    fn operations_and_names() {
        assert_eq!(AccessClass::of("GetStreamUri"), AccessClass::ReadMedia);
        assert!(!UserLevel::User.may(AccessClass::of("SetVideoEncoderConfiguration")));
        assert!(UserLevel::Operator.may(AccessClass::of("SetVideoEncoderConfiguration")));
        assert!(!UserLevel::User.may(AccessClass::of("SetAudioEncoderConfiguration")));
        assert!(UserLevel::Operator.may(AccessClass::of("SetAudioEncoderConfiguration")));
        assert!(!UserLevel::Operator.may(AccessClass::of("SetSystemFactoryDefault")));
        for name in UserLevel::NAMES {
            assert_eq!(name.parse::<UserLevel>().unwrap().to_string(), name);
        }
        assert!("Operator".parse::<UserLevel>().is_err());
    }
}
