//! Names of kernel code addresses, from /proc/kallsyms (read once, on the
//! first kernel stack of a recording; modules included). Where the kernel
//! hides addresses (`kernel.kptr_restrict`, or asys without
//! CAP_SYSLOG) every address reads as zero: asys says so once and keeps the
//! frames as addresses.
use std::collections::HashMap;

pub const KALLSYMS: &str = "/proc/kallsyms";

/// The text symbols of the kernel and its modules, by address.
#[derive(Debug, Default)]
pub struct Kallsyms {
    /// (address, `name` or `name [module]`), sorted by address.
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Parses kallsyms' lines (`ADDR TYPE NAME[\t[MODULE]]`); only code
    /// symbols (t, T, w, W) with an address are kept.
    pub fn parse(text: &str) -> Self {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let addr = u64::from_str_radix(words.next()?, 16).ok()?;
                let kind = words.next()?;
                let name = words.next()?;
                if addr == 0 || !matches!(kind, "t" | "T" | "w" | "W") {
                    return None;
                }
                Some(match words.next() {
                    Some(module) => (addr, format!("{name} {module}")),
                    None => (addr, name.to_string()),
                })
            })
            .collect();
        symbols.sort_by_key(|s| s.0);
        Self { symbols }
    }

    /// Whether any address could be read (none: they are hidden).
    pub fn has_addresses(&self) -> bool {
        !self.symbols.is_empty()
    }

    /// `function+0xoff` for the function at or below `addr`; a module's
    /// function keeps its `[module]` after the offset.
    pub fn name(&self, addr: u64) -> Option<String> {
        let i = self
            .symbols
            .partition_point(|s| s.0 <= addr)
            .checked_sub(1)?;
        let (start, name) = &self.symbols[i];
        let off = addr - start;
        Some(match name.split_once(' ') {
            Some((f, module)) if off > 0 => format!("{f}+{off:#x} {module}"),
            Some(_) => name.clone(),
            None if off > 0 => format!("{name}+{off:#x}"),
            None => name.clone(),
        })
    }
}

/// The names of one recording's kernel frames, cached by address.
#[derive(Debug, Default)]
pub struct KernelNames {
    symbols: Option<Kallsyms>,
    /// kallsyms being read on a thread of its own ([`Self::preload`]).
    pending: Option<std::thread::JoinHandle<Kallsyms>>,
    names: HashMap<u64, String>,
}

/// Reads and parses kallsyms (some 200,000 lines: a few hundred ms in the
/// tests' build).
fn load() -> Kallsyms {
    let text = std::fs::read_to_string(KALLSYMS).unwrap_or_default();
    Kallsyms::parse(&text)
}

impl KernelNames {
    /// Starts reading kallsyms on a thread of its own, for a recording that
    /// will have kernel stacks: read on the first kernel stack instead, it
    /// held up the event reader long enough for a busy application to fill
    /// the API ring (about 2,000 calls lost, in `stats_surface`'s rich run).
    pub fn preload(&mut self) {
        if self.symbols.is_none() && self.pending.is_none() {
            self.pending = std::thread::Builder::new()
                .name("asys-kallsyms".into())
                .spawn(load)
                .ok();
        }
    }

    /// The frame's name, or its address in hex where kallsyms has none.
    pub fn name(&mut self, addr: u64) -> &str {
        let pending = &mut self.pending;
        let symbols = self.symbols.get_or_insert_with(|| {
            let symbols = pending
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_else(load);
            if !symbols.has_addresses() {
                eprintln!(
                    "asys: warning: {KALLSYMS} shows no addresses (kernel.kptr_restrict, or \
                     no CAP_SYSLOG): kernel frames are kept as addresses"
                );
            }
            symbols
        });
        self.names
            .entry(addr)
            .or_insert_with(|| symbols.name(addr).unwrap_or_else(|| format!("{addr:#x}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "ffffffff81000000 T _stext\n\
        ffffffff81001000 T do_syscall_64\n\
        ffffffff81001400 d some_data\n\
        ffffffff81002000 t entry_SYSCALL_64\n\
        ffffffffc0100000 t nvme_irq\t[nvme]\n";

    #[test]
    fn functions_and_offsets() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.name(0xffffffff81001000).unwrap(), "do_syscall_64");
        // Data symbols do not name code.
        assert_eq!(k.name(0xffffffff81001410).unwrap(), "do_syscall_64+0x410");
        assert_eq!(k.name(0xffffffff81002010).unwrap(), "entry_SYSCALL_64+0x10");
        assert_eq!(k.name(0xffffffffc0100004).unwrap(), "nvme_irq+0x4 [nvme]");
        assert!(k.name(0x1000).is_none());
    }

    #[test]
    fn hidden_addresses_are_seen() {
        let k = Kallsyms::parse("0000000000000000 T _stext\n0000000000000000 T do_syscall_64\n");
        assert!(!k.has_addresses());
        assert!(Kallsyms::parse(TEXT).has_addresses());
    }
}
