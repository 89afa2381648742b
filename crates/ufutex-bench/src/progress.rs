//! A one-line progress indicator on stderr, shown only when stderr is a terminal.

use std::io::{IsTerminal, Write};

pub struct Progress {
    enabled: bool,
    color: bool,
}

impl Progress {
    /// Enabled only on a terminal and when not silenced; colour unless `NO_COLOR` is set.
    pub fn new(quiet: bool) -> Self {
        let tty = std::io::stderr().is_terminal();
        Progress { enabled: tty && !quiet, color: tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) }
    }

    #[cfg(test)]
    pub fn disabled() -> Self {
        Progress { enabled: false, color: false }
    }

    /// Show `label` with a bar for `done` of `total`.
    pub fn show(&self, label: &str, done: usize, total: usize) {
        if !self.enabled {
            return;
        }
        const WIDTH: usize = 24;
        let filled = (done * WIDTH).checked_div(total).unwrap_or(0).min(WIDTH);
        let bar = format!("{}{}", "#".repeat(filled), "-".repeat(WIDTH - filled));
        let bar = if self.color { format!("\x1b[36m{bar}\x1b[0m") } else { bar };
        let mut label = label.to_string();
        label.truncate(60);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K[{bar}] {done}/{total} {label}");
        let _ = err.flush();
    }

    /// Erase the line.
    pub fn clear(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}
