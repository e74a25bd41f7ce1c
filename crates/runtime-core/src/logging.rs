//! Logging in runc's formats.
//!
//! `--log-format json` writes one object a line, `{"level":"error","msg":"…","time":"RFC3339"}`:
//! containerd keeps the last line whose `level` is exactly `error` and shows its `msg`; Podman
//! reads one such object. `text` writes `time="…" level=… msg="…"` like runc's logrus output.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::Registry;

use crate::error::{Error, Result};

/// Output format of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// logrus-style `key=value` text.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// A layer writing runc-style lines to a file or stderr.
struct RuncLayer {
    out: Mutex<Box<dyn Write + Send>>,
    format: LogFormat,
    max: Level,
    all_targets: bool,
}

#[derive(Default)]
struct Fields {
    msg: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.msg.push_str(value);
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.msg, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }
}

/// Render one log line (without the newline). Pure, for tests.
pub fn render(format: LogFormat, level: &Level, msg: &str, time: &str) -> String {
    let level = level.as_str().to_ascii_lowercase();
    let level = if level == "warn" {
        "warning".into()
    } else {
        level
    };
    match format {
        LogFormat::Json => {
            serde_json::json!({"level": level, "msg": msg, "time": time}).to_string()
        }
        LogFormat::Text => format!("time={time:?} level={level} msg={msg:?}"),
    }
}

impl<S: Subscriber> Layer<S> for RuncLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > self.max {
            return;
        }
        // libcontainer logs every internal step of a failure as its own error line; without
        // --debug only our own final, complete line is written, so the log's last (and only)
        // error line is the one containerd and Podman show.
        if !self.all_targets && !event.metadata().target().starts_with("shadow") {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        let msg = if f.rest.is_empty() {
            f.msg
        } else {
            format!("{}{}", f.msg, f.rest)
        };
        let time = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let mut line = render(self.format, &level, &msg, &time);
        line.push('\n');
        if let Ok(mut out) = self.out.lock() {
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }
}

/// Install the global subscriber. `log` = None writes to stderr. `debug` lowers the level from
/// `error` to `debug` (libcontainer warns about every absent v1 controller: keep the default quiet).
pub fn init(log: Option<&Path>, format: LogFormat, debug: bool) -> Result<()> {
    let out: Box<dyn Write + Send> = match log {
        Some(p) => Box::new(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| Error::io(format!("open log {}", p.display()), e))?,
        ),
        None => Box::new(io::stderr()),
    };
    let layer = RuncLayer {
        out: Mutex::new(out),
        format,
        max: if debug { Level::DEBUG } else { Level::ERROR },
        all_targets: debug,
    };
    let subscriber = Registry::default().with(layer);
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| Error::runtime(format!("install logger: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_is_what_containerd_parses() {
        let l = render(
            LogFormat::Json,
            &Level::ERROR,
            "container \"x\" does not exist",
            "2026-12-02T13:00:00.000000000Z",
        );
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["level"], "error");
        assert_eq!(v["msg"], "container \"x\" does not exist");
        assert_eq!(v["time"], "2026-12-02T13:00:00.000000000Z");
    }

    #[test]
    fn text_line_is_logrus_like() {
        assert_eq!(
            render(LogFormat::Text, &Level::WARN, "a \"b\"", "T"),
            r#"time="T" level=warning msg="a \"b\"""#
        );
    }
}
