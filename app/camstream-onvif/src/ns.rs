//! The XML namespaces ONVIF's messages use.

pub const SOAP_ENV: &str = "http://www.w3.org/2003/05/soap-envelope";
/// SOAP 1.1's, which ONVIF does not speak: answered with VersionMismatch.
pub const SOAP11_ENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
pub const DEVICE: &str = "http://www.onvif.org/ver10/device/wsdl";
pub const MEDIA: &str = "http://www.onvif.org/ver10/media/wsdl";
pub const SCHEMA: &str = "http://www.onvif.org/ver10/schema";
pub const ERROR: &str = "http://www.onvif.org/ver10/error";
pub const NETWORK: &str = "http://www.onvif.org/ver10/network/wsdl";
pub const WSSE: &str =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd";
pub const WSU: &str =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd";
pub const PASSWORD_DIGEST: &str = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest";
pub const PASSWORD_TEXT: &str = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText";
/// WS-Addressing as WS-Discovery 1.0 (2005/04, which ONVIF uses) has it.
pub const WSA_2004: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing";
pub const WSA: &str = "http://www.w3.org/2005/08/addressing";
pub const WSD: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery";
/// The "To" of every multicast WS-Discovery message.
pub const WSD_URN: &str = "urn:schemas-xmlsoap-org:ws:2005:04:discovery";
pub const EVENTS: &str = "http://www.onvif.org/ver10/events/wsdl";
pub const IMAGING: &str = "http://www.onvif.org/ver20/imaging/wsdl";
/// WS-BaseNotification and WS-Topics, which ONVIF's events build on.
pub const WSNT: &str = "http://docs.oasis-open.org/wsn/b-2";
pub const WSTOP: &str = "http://docs.oasis-open.org/wsn/t-1";
/// ONVIF's topic namespace (tns1:).
pub const TOPICS: &str = "http://www.onvif.org/ver10/topics";
