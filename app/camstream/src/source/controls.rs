//! Camera controls as the config gives them (`[controls]` in the file,
//! `--control NAME=VALUE`): a name and a value, not yet checked. Each
//! camera source resolves them against what its camera has (V4L2's and
//! libcamera's `controls`), since only the camera knows its controls.

use serde::Deserialize;

/// A value as the config gives it. Fractions and lists are for libcamera's
/// controls (`AnalogueGain = 2.5`, `ScalerCrop = [0, 0, 1920, 1080]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    List(Vec<f64>),
}

impl std::str::FromStr for Value {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Value, Self::Err> {
        Ok(match s {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => {
                if let Ok(i) = s.parse() {
                    Value::Int(i)
                } else if let Ok(x) = s.parse() {
                    Value::Float(x)
                } else if let Some(l) = s
                    .split(',')
                    .map(|x| x.trim().parse().ok())
                    .collect::<Option<Vec<f64>>>()
                    .filter(|l| l.len() > 1)
                {
                    // --control ScalerCrop=0,0,1920,1080
                    Value::List(l)
                } else {
                    Value::Text(s.to_string())
                }
            }
        })
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Text(s) => write!(f, "{s:?}"),
            Value::List(l) => {
                let l: Vec<String> = l.iter().map(f64::to_string).collect();
                write!(f, "[{}]", l.join(", "))
            }
        }
    }
}

/// `NAME=VALUE` from the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlSetting {
    pub name: String,
    pub value: Value,
}

impl std::str::FromStr for ControlSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<ControlSetting, String> {
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: use NAME=VALUE, e.g. brightness=128"))?;
        Ok(ControlSetting {
            name: name.trim().to_string(),
            value: value.trim().parse().unwrap(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_the_command_line() {
        let s: ControlSetting = " auto_exposure = Manual Mode ".parse().unwrap();
        assert_eq!(s.name, "auto_exposure");
        assert_eq!(s.value, Value::Text("Manual Mode".into()));
        let value = |s: &str| s.parse::<ControlSetting>().unwrap().value;
        assert_eq!(value("a=true"), Value::Bool(true));
        assert_eq!(value("a=-3"), Value::Int(-3));
        assert_eq!(value("a=2.5"), Value::Float(2.5));
        assert_eq!(
            value("a=0,0,1920,1080"),
            Value::List(vec![0.0, 0.0, 1920.0, 1080.0])
        );
        let e = "brightness".parse::<ControlSetting>().unwrap_err();
        assert!(e.contains("use NAME=VALUE"), "{e}");
    }
}
