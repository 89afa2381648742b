//! JSON: the [`Document`] as it is (every sample included).

use super::{Exporter, Output};
use crate::result::Document;
use std::io;

pub struct Json {
    pub name: String,
}

impl Json {
    /// Write `doc` as JSON to `path` (the `--json FILE` of every subcommand and of `report`).
    pub fn write(doc: &Document, path: &std::path::Path) -> io::Result<()> {
        for o in (Json { name: String::new() }).export(doc)? {
            std::fs::write(path, o.contents)
                .map_err(|e| io::Error::new(e.kind(), format!("--json {}: {e}", path.display())))?;
        }
        Ok(())
    }
}

impl Exporter for Json {
    fn export(&self, doc: &Document) -> io::Result<Vec<Output>> {
        let contents = serde_json::to_string_pretty(doc).map_err(io::Error::other)?;
        Ok(vec![Output { name: self.name.clone(), contents }])
    }
}
