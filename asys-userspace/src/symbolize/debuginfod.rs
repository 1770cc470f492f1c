//! A debuginfod client: the debug file of a build id, fetched from the
//! servers `DEBUGINFOD_URLS` names (`BASE/buildid/HEX/debuginfo`, as elfutils
//! asks), for the binaries that have no debug information of their own nor
//! on this machine (`debug_info.rs` looks there first). Used by the symbolize
//! stage at the end of a recording and by `asys symbolize`.
//!
//! What a server sends is untrusted input, and the recording must finish
//! whatever the server does:
//! - each build id costs at most the timeout (`DEBUGINFOD_TIMEOUT` seconds,
//!   [`DEFAULT_TIMEOUT`] unset), over every server asked and the whole of each
//!   request, connection and body; its answer, found or not, is remembered
//!   for the run; a server that did not answer in time or refused the
//!   connection is not asked again in the run;
//! - a body over `DEBUGINFOD_MAXSIZE` bytes ([`DEFAULT_MAX_BYTES`] unset,
//!   never over what asys maps: [`MAX_MAPPED_BYTES`]) is refused by its
//!   Content-Length, or as soon as that many bytes came without one;
//! - a body that is not ELF, or is the debug file of another build id, or
//!   holds neither DWARF nor symbols, is refused;
//! - each failure is one line on stderr (`asys: warning: debuginfod URL:
//!   ...`); a server's "not found" is no failure and says nothing.
//!
//! Fetched files are kept in `$XDG_CACHE_HOME/asys/debuginfod` (else
//! `~/.cache/asys/debuginfod`), `HEX.debug` each, written to a new file
//! (O_CREAT|O_EXCL|O_NOFOLLOW) renamed into place once whole and checked, so
//! a crash leaves no half file under a build id's name; a file there is
//! opened without following a link at its name, and must be the caller's
//! and have one name. The folder holds at most [`CACHE_CAP_BYTES`]: the
//! files used longest ago go first.
use std::{
    collections::{HashMap, HashSet},
    io::{Read, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, OnceLock},
    time::{Duration, Instant, SystemTime},
};

use asys_report::untrusted::open::{Links, MAX_MAPPED_BYTES, Policy};
use object::Object;

use super::debug_info::{DebugFile, hex};
use crate::elf::mapped::FileBytes;

pub const URLS_ENV: &str = "DEBUGINFOD_URLS";
pub const TIMEOUT_ENV: &str = "DEBUGINFOD_TIMEOUT";
pub const MAXSIZE_ENV: &str = "DEBUGINFOD_MAXSIZE";

/// What one build id may cost when `DEBUGINFOD_TIMEOUT` is unset. elfutils
/// gives 90 s to each server's connection and first bytes; asys bounds the
/// whole request (connection and body) and every server together, and a
/// recording waits for it, so less: a debug file of a few hundred MB comes
/// from a server nearby within it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest body taken when `DEBUGINFOD_MAXSIZE` is unset: the debug files
/// of the largest libraries asys meets (PyTorch's CUDA libraries) are under
/// it, and it bounds the disk one build id may take.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// The most the cache folder keeps.
pub const CACHE_CAP_BYTES: u64 = 4 << 30;

/// A temporary file older than this is the leftover of a crashed run.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// Why a fetch failed: each is said in one line.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no answer within {0:.1?}; not asked again in this run")]
    TimedOut(Duration),
    #[error("{0}; not asked again in this run")]
    Unreachable(String),
    #[error("{0}")]
    Http(String),
    #[error("HTTP status {0}")]
    Status(u16),
    #[error("Content-Length {size} is over the {max}-byte limit ({MAXSIZE_ENV}); refused")]
    TooLarge { size: u64, max: u64 },
    #[error("the body grew past the {max}-byte limit ({MAXSIZE_ENV}); refused")]
    TooLong { max: u64 },
    #[error("the body is not an ELF file; refused")]
    NotElf,
    #[error("the body is the debug file of build id {got}, not of the one asked for; refused")]
    OtherBuild { got: String },
    #[error("the body holds neither DWARF nor a symbol table; refused")]
    Empty,
    #[error("cache {0}: {1}")]
    Cache(PathBuf, std::io::Error),
}

impl FetchError {
    /// The server did not answer: asking it for the next build id would
    /// cost the same again.
    fn server_down(&self) -> bool {
        matches!(self, Self::TimedOut(_) | Self::Unreachable(_))
    }
}

/// The servers of `DEBUGINFOD_URLS`: base URLs separated by white space (as
/// elfutils reads it), each without its trailing slashes. Only http and
/// https are fetched; any other is returned as refused.
pub fn parse_urls(value: &str) -> (Vec<String>, Vec<String>) {
    let (mut ok, mut refused) = (Vec::new(), Vec::new());
    for url in value.split_whitespace() {
        let lower = url.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"));
        match rest {
            Some(host) if !host.is_empty() && !host.starts_with('/') => {
                let base = url.trim_end_matches('/').to_string();
                if !ok.contains(&base) {
                    ok.push(base);
                }
            }
            _ => refused.push(url.to_string()),
        }
    }
    (ok, refused)
}

/// `DEBUGINFOD_TIMEOUT`: whole seconds as elfutils reads it (a fraction is
/// taken too); None for a value that is not a positive number.
pub fn parse_timeout(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs > 0.0 && secs < 1e9).then(|| Duration::from_secs_f64(secs))
}

/// `DEBUGINFOD_MAXSIZE`: bytes; 0 (elfutils: no limit) and anything over what
/// asys maps give that bound. None for a value that is not a number.
pub fn parse_max_size(value: &str) -> Option<u64> {
    let n: u64 = value.trim().parse().ok()?;
    Some(if n == 0 {
        MAX_MAPPED_BYTES
    } else {
        n.min(MAX_MAPPED_BYTES)
    })
}

/// The cache folder: `$XDG_CACHE_HOME/asys/debuginfod`, else
/// `$HOME/.cache/asys/debuginfod`.
pub fn cache_dir_from_env() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| h.join(".cache")))
        .map(|c| c.join("asys").join("debuginfod"))
}

/// The cache of fetched debug files (see the module's notes).
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
    cap: u64,
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

impl Cache {
    /// The cache at `dir`, created (mode 0700) if missing. Refused when a
    /// link of another user is on the way, or `dir` itself is a link or
    /// not the caller's folder.
    pub fn open(dir: PathBuf, cap: u64) -> std::io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        asys_report::trusted_path::check(&dir).map_err(std::io::Error::other)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let meta = std::fs::symlink_metadata(&dir)?;
        if !meta.is_dir() {
            return Err(std::io::Error::other("not a folder (a link?); not used"));
        }
        if meta.uid() != euid() {
            return Err(std::io::Error::other(format!(
                "owned by uid {}, not by this user; not used",
                meta.uid()
            )));
        }
        Ok(Self { dir, cap })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the debug file of build id `hex` is kept.
    pub fn path_of(&self, hex: &str) -> PathBuf {
        self.dir.join(format!("{hex}.debug"))
    }

    /// How a kept file is opened: no link at its name, the caller's (or
    /// root's), one name, and no larger than asys maps.
    const POLICY: Policy = Policy {
        links: Links::NotLast,
        max_bytes: MAX_MAPPED_BYTES,
        owner: None,
        single_name: true,
    };

    /// The kept file of build id `hex`, mapped, if there is one; it counts
    /// as used now (eviction takes the files used longest ago).
    pub fn get(&self, hex: &str) -> Option<FileBytes> {
        let path = self.path_of(hex);
        let policy = Policy {
            owner: Some(euid()),
            ..Self::POLICY
        };
        let opened = asys_report::untrusted::open::open(&path, &policy).ok()?;
        let _ = opened.file.set_modified(SystemTime::now());
        FileBytes::map_file(&opened.file, opened.len).ok()
    }

    /// Removes the kept file of build id `hex` (one found damaged); a link
    /// there is unlinked, never followed.
    fn remove(&self, hex: &str) {
        let _ = std::fs::remove_file(self.path_of(hex));
    }

    /// A new temporary file for build id `hex`, in the cache folder (for the
    /// rename), created afresh: never through a link.
    fn create_temp(&self, hex: &str) -> std::io::Result<(Temp, std::fs::File)> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self
            .dir
            .join(format!(".{hex}.tmp-{}-{n}", std::process::id()));
        // As files::create_new (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), and
        // readable: the body is mapped from it to be checked.
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o600)
            .open(&path)?;
        Ok((Temp { path, kept: false }, file))
    }

    /// Removes the files used longest ago until the folder holds at most
    /// its cap, never `keep`; and the temporary files crashed runs left.
    /// Only regular files asys names are counted or removed: a link or
    /// anything else someone put there is left alone, never followed.
    pub fn evict(&self, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut kept: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            // DirEntry::metadata does not follow links.
            let Ok(meta) = e.metadata() else { continue };
            if !meta.file_type().is_file() {
                continue;
            }
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with('.') && name.contains(".tmp-") {
                if now
                    .duration_since(modified)
                    .is_ok_and(|age| age > STALE_TEMP)
                {
                    let _ = std::fs::remove_file(e.path());
                }
                continue;
            }
            if name.ends_with(".debug") {
                kept.push((modified, meta.len(), e.path()));
            }
        }
        let mut total: u64 = kept.iter().map(|k| k.1).sum();
        kept.sort();
        for (_, len, path) in kept {
            if total <= self.cap {
                break;
            }
            if path == keep {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// A temporary file, removed when dropped unless renamed into place.
struct Temp {
    path: PathBuf,
    kept: bool,
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What the client was configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub urls: Vec<String>,
    pub timeout: Duration,
    pub max_bytes: u64,
    pub cache_dir: PathBuf,
    pub cache_cap: u64,
}

impl Settings {
    /// From the environment; None when `DEBUGINFOD_URLS` names no server.
    /// Values that cannot be used are warned about.
    pub fn from_env() -> Option<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let (urls, refused) = parse_urls(&var(URLS_ENV)?);
        for u in refused {
            eprintln!("asys: warning: debuginfod {u}: only http:// and https:// servers are asked");
        }
        if urls.is_empty() {
            return None;
        }
        let timeout = match var(TIMEOUT_ENV) {
            None => DEFAULT_TIMEOUT,
            Some(v) => parse_timeout(&v).unwrap_or_else(|| {
                eprintln!(
                    "asys: warning: {TIMEOUT_ENV}={v} is not a number of seconds; using {} s",
                    DEFAULT_TIMEOUT.as_secs()
                );
                DEFAULT_TIMEOUT
            }),
        };
        let max_bytes = match var(MAXSIZE_ENV) {
            None => DEFAULT_MAX_BYTES,
            Some(v) => parse_max_size(&v).unwrap_or_else(|| {
                eprintln!(
                    "asys: warning: {MAXSIZE_ENV}={v} is not a number of bytes; using {DEFAULT_MAX_BYTES}"
                );
                DEFAULT_MAX_BYTES
            }),
        };
        let Some(cache_dir) = cache_dir_from_env() else {
            eprintln!(
                "asys: warning: debuginfod: neither XDG_CACHE_HOME nor HOME is set, so there is \
                 no cache folder; debuginfod is not asked"
            );
            return None;
        };
        Some(Self {
            urls,
            timeout,
            max_bytes,
            cache_dir,
            cache_cap: CACHE_CAP_BYTES,
        })
    }
}

/// A debug file found, shared by the naming threads.
type Found = Option<(PathBuf, Arc<FileBytes>)>;

/// The client: its servers, its cache, and what this run learnt.
pub struct Client {
    settings: Settings,
    cache: Cache,
    agent: ureq::Agent,
    /// Each build id's answer, looked up once per run (threads asking for
    /// the same one wait for the first).
    lookups: Mutex<HashMap<String, Arc<OnceLock<Found>>>>,
    /// Servers that did not answer in this run.
    down: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// The process's client, made from the environment at its first use (None:
/// `DEBUGINFOD_URLS` names no server), so that what a run learnt is kept
/// across both symbolize passes of a recording.
pub fn global() -> Option<Arc<Client>> {
    static GLOBAL: OnceLock<Option<Arc<Client>>> = OnceLock::new();
    GLOBAL
        .get_or_init(|| Client::new(Settings::from_env()?).map(Arc::new))
        .clone()
}

impl Client {
    /// A client of `settings`' servers; None (with a warning) when its
    /// cache folder cannot be used.
    pub fn new(settings: Settings) -> Option<Self> {
        let cache = match Cache::open(settings.cache_dir.clone(), settings.cache_cap) {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "asys: warning: debuginfod cache {}: {e}; debuginfod is not asked",
                    settings.cache_dir.display()
                );
                return None;
            }
        };
        let agent = ureq::Agent::config_builder()
            // 404 and the rest are answers, read from the status.
            .http_status_as_error(false)
            .user_agent(format!("asys/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Some(Self {
            settings,
            cache,
            agent,
            lookups: Mutex::new(HashMap::new()),
            down: Mutex::new(HashSet::new()),
        })
    }

    /// The debug file of build id `id`: from the cache, else from the
    /// servers (each build id asked once per run).
    pub fn debug_file(&self, id: &[u8]) -> Option<DebugFile> {
        if id.is_empty() {
            return None;
        }
        let h = hex(id);
        let cell = self
            .lookups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(h.clone())
            .or_default()
            .clone();
        let (path, data) = cell.get_or_init(|| self.look_up(&h, id)).clone()?;
        Some(DebugFile {
            path,
            data,
            debuginfod: Some(h),
        })
    }

    fn look_up(&self, h: &str, id: &[u8]) -> Found {
        self.in_cache(h, id).or_else(|| self.ask_servers(h, id))
    }

    fn in_cache(&self, h: &str, id: &[u8]) -> Found {
        let data = self.cache.get(h)?;
        if check(&data, id).is_err() {
            // Damaged (or left by a crash before its checks): fetched again.
            self.cache.remove(h);
            return None;
        }
        Some((self.cache.path_of(h), Arc::new(data)))
    }

    fn ask_servers(&self, h: &str, id: &[u8]) -> Found {
        let deadline = Instant::now() + self.settings.timeout;
        for base in &self.settings.urls {
            if self
                .down
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(base)
            {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let url = format!("{base}/buildid/{h}/debuginfo");
            match self.fetch(&url, left, h, id) {
                Ok(Some(found)) => return Some(found),
                Ok(None) => {}
                Err(e) => {
                    eprintln!("asys: warning: debuginfod {url}: {e}");
                    if e.server_down() {
                        self.down
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(base.clone());
                    }
                }
            }
        }
        None
    }

    /// GETs `url` within `timeout` (connection and body), into the cache.
    /// Ok(None): the server has no such file.
    fn fetch(&self, url: &str, timeout: Duration, h: &str, id: &[u8]) -> Result<Found, FetchError> {
        let max = self.settings.max_bytes;
        let response = self
            .agent
            .get(url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .call()
            .map_err(|e| request_error(e, timeout))?;
        match response.status().as_u16() {
            200 => {}
            404 => return Ok(None),
            s => return Err(FetchError::Status(s)),
        }
        if let Some(size) = response.body().content_length()
            && size > max
        {
            return Err(FetchError::TooLarge { size, max });
        }
        let mut body = response
            .into_body()
            .into_with_config()
            .limit(u64::MAX)
            .reader();
        let cache_err = |e| FetchError::Cache(self.cache.dir().to_path_buf(), e);
        let (mut temp, mut file) = self.cache.create_temp(h).map_err(cache_err)?;
        let mut len: u64 = 0;
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(e, timeout)),
            };
            len += n as u64;
            if len > max {
                return Err(FetchError::TooLong { max });
            }
            file.write_all(&buf[..n]).map_err(cache_err)?;
        }
        let data = FileBytes::map_file(&file, len).map_err(cache_err)?;
        check(&data, id)?;
        let target = self.cache.path_of(h);
        // rename replaces whatever is at the name (a link too), never
        // writing through it.
        std::fs::rename(&temp.path, &target).map_err(cache_err)?;
        temp.kept = true;
        self.cache.evict(&target);
        Ok(Some((target, Arc::new(data))))
    }
}

fn request_error(e: ureq::Error, timeout: Duration) -> FetchError {
    match e {
        ureq::Error::Timeout(_) => FetchError::TimedOut(timeout),
        ureq::Error::Io(io) => io_error(io, timeout),
        e @ (ureq::Error::HostNotFound | ureq::Error::ConnectionFailed) => {
            FetchError::Unreachable(e.to_string())
        }
        other => FetchError::Http(other.to_string()),
    }
}

fn io_error(e: std::io::Error, timeout: Duration) -> FetchError {
    use std::io::ErrorKind as K;
    // ureq's own errors while the body is read come wrapped in io::Error.
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>())
        && matches!(inner, ureq::Error::Timeout(_))
    {
        return FetchError::TimedOut(timeout);
    }
    match e.kind() {
        K::TimedOut | K::WouldBlock => FetchError::TimedOut(timeout),
        K::ConnectionRefused | K::ConnectionReset | K::ConnectionAborted | K::NotConnected => {
            FetchError::Unreachable(e.to_string())
        }
        _ => FetchError::Http(e.to_string()),
    }
}

/// Whether `data` is the debug file of build id `id`: ELF, that build id,
/// and DWARF or a symbol table in it.
fn check(data: &[u8], id: &[u8]) -> Result<(), FetchError> {
    let obj = object::File::parse(data).map_err(|_| FetchError::NotElf)?;
    if obj.format() != object::BinaryFormat::Elf {
        return Err(FetchError::NotElf);
    }
    match obj.build_id().ok().flatten() {
        Some(got) if got == id => {}
        got => {
            return Err(FetchError::OtherBuild {
                got: got.map_or_else(|| "none".to_string(), hex),
            });
        }
    }
    let has_symbols = obj.symbols().next().is_some();
    if !super::lines::has_dwarf(&obj) && !has_symbols {
        return Err(FetchError::Empty);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
