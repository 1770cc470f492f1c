//! The library's settings. A process that asys launched has them in its
//! environment (`ASYS_HGGC_ACTIVITY`, `ASYS_API_PROBES`, ...: see
//! cli/environment.rs). A running process that asys loaded the library into
//! has no such environment: asys hands the same variables to
//! [`crate::attach::asys_inject_attach`] as `NAME=VALUE` lines, and they
//! take precedence here, for that attach and the next.
use std::sync::Mutex;

static GIVEN: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Replaces the settings given by an attach with `lines` (`NAME=VALUE`,
/// one per line; others are ignored).
pub fn set(lines: &str) {
    let parsed = lines
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if let Ok(mut g) = GIVEN.lock() {
        *g = parsed;
    }
}

/// The setting `name`: as an attach gave it, else from the environment.
pub fn var(name: &str) -> Option<String> {
    if let Ok(g) = GIVEN.lock()
        && let Some((_, v)) = g.iter().find(|(k, _)| k == name)
    {
        return Some(v.clone());
    }
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_settings_take_precedence_over_the_environment_and_are_replaced_whole() {
        set("ASYS_TEST_SETTING_A=kernel\nnot a setting\nASYS_TEST_SETTING_B = site \n");
        assert_eq!(var("ASYS_TEST_SETTING_A").as_deref(), Some("kernel"));
        assert_eq!(var("ASYS_TEST_SETTING_B").as_deref(), Some("site"));
        set("ASYS_TEST_SETTING_B=entry");
        assert_eq!(var("ASYS_TEST_SETTING_A"), None);
        assert_eq!(var("ASYS_TEST_SETTING_B").as_deref(), Some("entry"));
        set("");
    }
}
