//! Interns strings (API names, kernel names, paths, commands) to ids.
use std::collections::HashMap;

#[derive(Default, Clone)]
pub struct StringTable {
    /// foldhash, not SipHash: every recorded name is looked up here (tens
    /// of thousands from one JIT map). Its seed is random per run, so names
    /// another user chose cannot be made to collide without knowing it.
    ids: HashMap<String, u32, foldhash::fast::RandomState>,
    values: Vec<String>,
    bytes: u64,
}

impl StringTable {
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.values.len() as u32;
        self.bytes += s.len() as u64;
        self.values.push(s.to_owned());
        self.ids.insert(s.to_owned(), id);
        id
    }

    /// The strings' total length.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    pub fn from_values(values: Vec<String>) -> Self {
        let ids = values
            .iter()
            .enumerate()
            .map(|(i, v)| (v.clone(), i as u32))
            .collect();
        let bytes = values.iter().map(|v| v.len() as u64).sum();
        Self { ids, values, bytes }
    }

    pub fn get(&self, id: u32) -> Option<&str> {
        self.values.get(id as usize).map(String::as_str)
    }
}
