//! Interns strings (API names, kernel names, paths, commands) to ids.
use std::collections::HashMap;

#[derive(Default)]
pub struct StringTable {
    ids: HashMap<String, u32>,
    values: Vec<String>,
}

impl StringTable {
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(s.to_owned());
        self.ids.insert(s.to_owned(), id);
        id
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
        Self { ids, values }
    }

    pub fn get(&self, id: u32) -> Option<&str> {
        self.values.get(id as usize).map(String::as_str)
    }
}
