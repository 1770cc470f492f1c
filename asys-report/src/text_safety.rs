//! Text that other users chose (thread, process, range and symbol names,
//! strings read from a report or an SQLite file) made safe to print.
//!
//! Root's asys prints names that any process it traced picked for itself.
//! Written raw, such a name can drive root's terminal (clear the screen, set
//! the window title, write the clipboard with OSC 52), reorder what is shown
//! with bidirectional controls, or become a formula when a csv or tsv file
//! is opened in a spreadsheet. Every text cell of the column, table, csv and
//! tsv formats, and every top-level error line, goes through this module.
//! JSON needs none of it: its encoder escapes control characters itself, and
//! JSON output stays exact.
//!
//! The visible form (docs/stats.md, "Names in the output"):
//! - a character below U+0080 that is a control (C0, U+0000–U+001F, and DEL,
//!   U+007F) is written `\xHH` (ESC is `\x1b`, a tab `\x09`);
//! - any other escaped character is written `\u{H...}` (the C1 controls
//!   U+0080–U+009F, the bidirectional controls U+061C, U+200E, U+200F,
//!   U+202A–U+202E, U+2066–U+2069, and the line and paragraph separators
//!   U+2028 and U+2029);
//! - a backslash is doubled, so that an escaped text is never mistaken for a
//!   name that holds the same characters, and the escaping can be undone.
//!
//! Lowercase hex digits, as Rust's own escapes use.
//!
//! Names recorded from a process's memory (Python function and file names)
//! and the frame names of folded stacks and flame graphs go through
//! [`escaped_name`]: the same visible form, without doubling backslashes,
//! and also for the characters XML refuses, so no NUL reaches a report or
//! an SVG.
use std::{borrow::Cow, fmt::Write as _};

/// Whether `c` is written in its visible escaped form.
pub fn needs_escape(c: char) -> bool {
    matches!(c,
        // C0 controls, DEL, C1 controls.
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Bidirectional marks, embeddings, overrides and isolates: they
        // reorder the text around them (CVE-2021-42574, "Trojan Source").
        | '\u{61c}' | '\u{200e}' | '\u{200f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        // Line and paragraph separators: a line break to some viewers.
        | '\u{2028}' | '\u{2029}'
    )
}

/// `text` with every character [`needs_escape`] names, and every backslash,
/// written visibly; borrowed when there is nothing to escape (the usual case).
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || needs_escape(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if !needs_escape(c) {
            out.push(c);
        } else if c.is_ascii() {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Whether `c` may not appear in an XML 1.0 document at all (its `Char`
/// production): C0 controls other than tab, line feed and carriage return,
/// and the noncharacters U+FFFE and U+FFFF. (Lone surrogates cannot be in a
/// Rust string.) One of them in an SVG makes a browser show only an error.
pub fn invalid_in_xml(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}')
}

/// A name that a traced process chose, as asys records and draws it
/// (Python function and file names, folded stacks, flame graphs): every
/// character [`needs_escape`] or [`invalid_in_xml`] names written in the
/// visible form above (`\x00` for NUL, `\u{fffe}`), every other character,
/// backslashes included, kept as it is (names are seldom written with
/// backslashes, and the usual name stays byte for byte what the process
/// had). So the name is valid UTF-8 with no NUL, no control and nothing XML
/// refuses; escaping it again changes nothing. Borrowed when there is
/// nothing to escape.
pub fn escaped_name(text: &str) -> Cow<'_, str> {
    let bad = |c: char| needs_escape(c) || invalid_in_xml(c);
    if !text.chars().any(bad) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !bad(c) {
            out.push(c);
        } else if c.is_ascii() {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// The first characters that make a spreadsheet read a cell as a formula
/// (OWASP, "CSV Injection"): `=`, `+`, `-`, `@`, tab and carriage return.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A text cell of csv or tsv output: [`visible`], then, if it begins with
/// a character in [`FORMULA_STARTS`], prefixed with a single quote, which a
/// spreadsheet takes as "this cell is text" (OWASP's advice).
///
/// Only text goes through here. Numbers asys computes (a negative change in
/// a compare table, `-5`) are written as the numbers they are by the table
/// writer; a text cell that happens to look like a number (a thread named
/// `-1`) is still text and is prefixed, so a spreadsheet keeps it as such.
pub fn spreadsheet_text(text: &str) -> Cow<'_, str> {
    let shown = visible(text);
    if shown.starts_with(FORMULA_STARTS) {
        Cow::Owned(format!("'{shown}"))
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for s in [
            "",
            "hggcMemcpy",
            "Step 3",
            "std::vector<int>::push_back(int const&)",
            "名前 ✓",
        ] {
            assert!(matches!(visible(s), Cow::Borrowed(_)), "{s}");
            assert_eq!(visible(s), s);
            assert_eq!(spreadsheet_text(s), s);
        }
    }

    #[test]
    fn terminal_sequences_are_escaped_visibly() {
        assert_eq!(visible("\x1b[2J"), "\\x1b[2J");
        assert_eq!(visible("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
        assert_eq!(
            visible("\x1b]52;c;cHduZWQ=\x07"),
            "\\x1b]52;c;cHduZWQ=\\x07"
        );
        assert_eq!(
            visible("a\tb\nc\rd\0e\x7f"),
            "a\\x09b\\x0ac\\x0dd\\x00e\\x7f"
        );
        // C1: CSI (U+009B) starts an escape sequence on its own in some
        // terminals.
        assert_eq!(visible("\u{9b}2J\u{80}\u{9f}"), "\\u{9b}2J\\u{80}\\u{9f}");
        // U+00A0 (no-break space) is the first character after C1: kept.
        assert_eq!(visible("\u{a0}"), "\u{a0}");
    }

    #[test]
    fn bidirectional_controls_are_escaped() {
        for (c, shown) in [
            ('\u{202a}', "\\u{202a}"),
            ('\u{202b}', "\\u{202b}"),
            ('\u{202c}', "\\u{202c}"),
            ('\u{202d}', "\\u{202d}"),
            ('\u{202e}', "\\u{202e}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2067}', "\\u{2067}"),
            ('\u{2068}', "\\u{2068}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{61c}', "\\u{61c}"),
            ('\u{2028}', "\\u{2028}"),
            ('\u{2029}', "\\u{2029}"),
        ] {
            assert_eq!(visible(&format!("a{c}b")), format!("a{shown}b"));
        }
        // The neighbours of the ranges are ordinary text.
        for c in ['\u{2029}', '\u{202f}', '\u{2065}', '\u{206a}', '\u{200d}'] {
            assert_eq!(needs_escape(c), c == '\u{2029}', "{:x}", c as u32);
        }
    }

    #[test]
    fn backslashes_are_doubled_so_escapes_are_unambiguous() {
        // A name that spells an escape is not shown as the escape itself.
        assert_eq!(visible("\\x1b"), "\\\\x1b");
        assert_ne!(visible("\\x1b"), visible("\x1b"));
        assert_eq!(visible("C:\\dir"), "C:\\\\dir");
    }

    #[test]
    fn recorded_names_hold_nothing_xml_refuses() {
        assert_eq!(escaped_name("f"), "f");
        assert!(matches!(escaped_name("a\\b"), Cow::Borrowed(_)));
        assert_eq!(escaped_name("\0"), "\\x00");
        assert_eq!(escaped_name("\0x (odd.py:3)"), "\\x00x (odd.py:3)");
        assert_eq!(escaped_name("a\u{fffe}b\u{ffff}"), "a\\u{fffe}b\\u{ffff}");
        assert_eq!(escaped_name("\u{202e}\x1b\n"), "\\u{202e}\\x1b\\x0a");
        // Escaping twice changes nothing more.
        let once = escaped_name("x\0\x7f").into_owned();
        assert_eq!(escaped_name(&once), once);
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            let xml_ok =
                matches!(c as u32, 0x9 | 0xa | 0xd | 0x20..=0xd7ff | 0xe000..=0xfffd | 0x10000..);
            assert_eq!(invalid_in_xml(c), !xml_ok, "{:x}", c as u32);
            let e = escaped_name(&c.to_string()).into_owned();
            assert!(
                e.chars().all(|c| !invalid_in_xml(c) && !needs_escape(c)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn formula_cells_are_prefixed_with_a_quote() {
        for (name, cell) in [
            ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
            ("@SUM(1)", "'@SUM(1)"),
            ("+1", "'+1"),
            ("-1+2", "'-1+2"),
            // Text that looks like a number is still text.
            ("-5", "'-5"),
            // A leading tab or CR is escaped first; what remains begins with
            // a backslash, which no spreadsheet reads as a formula.
            ("\t=1", "\\x09=1"),
            ("\r=1", "\\x0d=1"),
            // Escaping first: an ESC before '=' leaves no '=' first.
            ("\x1b=1", "\\x1b=1"),
        ] {
            assert_eq!(spreadsheet_text(name), cell, "{name:?}");
        }
        for plain in ["a=b", "Step-1", "x+y", "mail@host", " =1"] {
            assert_eq!(spreadsheet_text(plain), plain);
        }
    }
}
