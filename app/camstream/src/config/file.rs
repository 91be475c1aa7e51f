//! The config file: where it is, reading it, and its mistakes said in one
//! line: the file, the line and column, the key, what is wrong.

use std::path::Path;

use anyhow::{Context, Result};

use super::Options;

/// Where the daemon looks for its settings when `--config` is not given.
pub const DEFAULT_CONFIG: &str = "/etc/camstream.toml";

/// A config file's settings, and its text (for errors found later).
pub(super) fn read_file(path: &Path) -> Result<(Options, String)> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    Ok((parse_file(path, &text)?, text))
}

/// The line and column of the value of `key` (dotted: `streams.sub.fps`)
/// in a config's text, if it sets it.
pub(super) fn locate(text: &str, key: &str) -> Option<(usize, usize)> {
    use toml::de::{DeTable, DeValue};
    let parsed = DeTable::parse(text).ok()?;
    let mut table = parsed.get_ref();
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        let (_, value) = table.iter().find(|(k, _)| k.get_ref() == part)?;
        if parts.peek().is_none() {
            return Some(line_column(text, value.span().start));
        }
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            _ => return None,
        }
    }
    None
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = at - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// A config file's settings. An error is one line: file, line and column,
/// the key it is about (unless the message names it already), and what is
/// wrong there.
pub(super) fn parse_file(path: &Path, text: &str) -> Result<Options> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = line_column(text, e.span().map_or(0, |s| s.start));
        let key = e
            .span()
            .and_then(|s| key_at(text, s))
            .filter(|k| !e.message().contains(&format!("`{k}`")))
            .map_or(String::new(), |k| format!("{k}: "));
        anyhow::anyhow!(
            "config {}:{line}:{column}: {key}{}",
            path.display(),
            in_words(e.message())
        )
    })
}

/// A TOML type error as a person would say it: the number types' ranges
/// rather than their Rust names.
fn in_words(message: &str) -> String {
    let mut m = message.replace("invalid type: string ", "invalid type: text ");
    for (rust, words) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number from 0"),
        ("expected a boolean", "expected true or false"),
    ] {
        m = m.replace(rust, words);
    }
    m
}

/// The dotted name of the key that a span of a config's text (a TOML
/// error's) is about: the innermost key whose name or value holds it.
fn key_at(text: &str, span: std::ops::Range<usize>) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    fn find(table: &DeTable, at: &std::ops::Range<usize>) -> Option<Vec<String>> {
        let holds = |s: std::ops::Range<usize>| s.start <= at.start && at.end <= s.end;
        for (k, v) in table {
            let name = k.get_ref().to_string();
            // A table's own span is its header only: look inside each.
            if let DeValue::Table(t) = v.get_ref() {
                if let Some(mut inner) = find(t, at) {
                    inner.insert(0, name);
                    return Some(inner);
                }
            }
            if holds(k.span()) || holds(v.span()) {
                return Some(vec![name]);
            }
        }
        None
    }
    let dotted = |path: Vec<String>| {
        let bare = |k: &str| {
            !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        let keys: Vec<String> = path
            .into_iter()
            .map(|k| if bare(&k) { k } else { format!("{k:?}") })
            .collect();
        keys.join(".")
    };
    // A key: renamed, the parse keeps it where it was given (the first of
    // a key given twice is all it keeps otherwise).
    const STAND_IN: &str = "camstream-key-at-fault";
    let written = text.get(span.clone())?;
    let key_like = written
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        || (written.len() >= 2
            && (written.starts_with('"') && written.ends_with('"')
                || written.starts_with('\'') && written.ends_with('\''))
            && !written.contains('\n'));
    if key_like {
        let renamed = format!("{}{STAND_IN}{}", &text[..span.start], &text[span.end..]);
        let at = span.start..span.start + STAND_IN.len();
        if let Some(mut path) = find(DeTable::parse_recoverable(&renamed).0.get_ref(), &at) {
            if let Some(last) = path.last_mut().filter(|k| *k == STAND_IN) {
                *last = written.trim_matches(['"', '\'']).to_string();
                return Some(dotted(path));
            }
        }
    }
    // A value, or a table's header.
    find(DeTable::parse_recoverable(text).0.get_ref(), &span).map(dotted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_errors_name_the_key() {
        let error = |text: &str| {
            parse_file(Path::new("c.toml"), text)
                .unwrap_err()
                .to_string()
        };
        for (text, want) in [
            (
                "fps = -1",
                "c.toml:1:7: fps: invalid value: integer `-1`, expected a whole number from 0 to 4294967295",
            ),
            ("fps = 1\nfps = 2", "c.toml:2:1: fps: duplicate key"),
            (
                "[controls]\nbrightness = 1\nbrightness = 2",
                "c.toml:3:1: controls.brightness: duplicate key",
            ),
            (
                "[users.\"bob smith\"]\nmd5 = 1",
                "c.toml:2:7: users.\"bob smith\".md5: invalid type: integer `1`, expected a string",
            ),
            (
                "users = { a = { md5 = \"1\" }, a = { md5 = \"2\" } }",
                "c.toml:1:30: users.a: duplicate key",
            ),
            (
                "[users.a]\nmd5 = \"1\"\n[users.a]",
                "c.toml:3:8: users.a: duplicate key",
            ),
            (
                "streams = { sub = { fps = 1, fps = 2 } }",
                "c.toml:1:30: streams.sub.fps: duplicate key",
            ),
            // Named by the message already.
            (
                "rtsp_prot = 1",
                "c.toml:1:1: unknown field `rtsp_prot`, expected one of",
            ),
        ] {
            let e = error(text);
            assert!(e.starts_with(&format!("config {want}")), "{text:?}: {e}");
        }
    }
}
