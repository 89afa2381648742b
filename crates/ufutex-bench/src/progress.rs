//! A one-line progress bar on stderr (`indicatif`), shown only when stderr is a terminal.
//!
//! Colour follows `console`: off under `NO_COLOR` or a dumb terminal. The bar is cut to the
//! terminal's width, so a long label never wraps, and it erases itself if dropped mid-run (an
//! error on its way to `main`), so the error message starts on a clean line.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use std::io::IsTerminal;

/// The bar: `[####>---] 3/8 lock threads=8 cs=50 ufutex`.
const TEMPLATE: &str = "[{bar:24.cyan}] {pos}/{len} {wide_msg}";
/// Draws per second at most. `show` is called only between runs, never inside a timed loop,
/// and a lower rate could leave the previous label standing through a long run.
const HZ: u8 = u8::MAX;

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Enabled only on a terminal and when not silenced.
    pub fn new(quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Self::disabled();
        }
        let style = ProgressStyle::with_template(TEMPLATE).expect("valid template").progress_chars("#>-");
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(HZ))
            .with_style(style)
            .with_finish(ProgressFinish::AndClear);
        Progress { bar }
    }

    /// A progress bar that never draws.
    pub fn disabled() -> Self {
        Progress { bar: ProgressBar::hidden() }
    }

    /// Show `label` with a bar for `done` of `total`.
    pub fn show(&self, label: &str, done: usize, total: usize) {
        if self.bar.is_hidden() {
            return;
        }
        if self.bar.is_finished() {
            self.bar.reset();
        }
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        self.bar.set_message(label.to_string());
    }

    /// Erase the line; a later `show` starts the bar again.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silenced_bar_never_draws_and_survives_reuse() {
        let p = Progress::new(true);
        assert!(p.bar.is_hidden());
        p.show("a", 0, 2);
        p.clear();
        p.show("b", 1, 2);
        p.clear();
    }
}
