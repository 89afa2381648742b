//! JSON: the [`Document`] as it is (every sample included).

use super::{Exporter, Output};
use crate::result::Document;
use std::io;

pub struct Json {
    pub name: String,
}

impl Exporter for Json {
    fn export(&self, doc: &Document) -> io::Result<Vec<Output>> {
        let contents = serde_json::to_string_pretty(doc).map_err(io::Error::other)?;
        Ok(vec![Output { name: self.name.clone(), contents }])
    }
}
