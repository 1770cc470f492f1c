use std::{
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use object::Object;

use super::*;

/// A fresh folder under the temporary folder, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("asys-debuginfod-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn urls_are_split_on_white_space_and_only_http_and_https_are_taken() {
    let (ok, refused) = parse_urls(
        "http://a.example:8002/  https://b.example/debuginfod//\n\thttp://a.example:8002 \
         ftp://c.example file:///srv/debug http:// HTTPS://D.example",
    );
    assert_eq!(
        ok,
        [
            "http://a.example:8002",
            "https://b.example/debuginfod",
            "HTTPS://D.example"
        ]
    );
    assert_eq!(refused, ["ftp://c.example", "file:///srv/debug", "http://"]);
    assert_eq!(parse_urls("   "), (vec![], vec![]));
}

#[test]
fn timeouts_and_size_limits_are_read_as_elfutils_writes_them() {
    assert_eq!(parse_timeout("2"), Some(Duration::from_secs(2)));
    assert_eq!(parse_timeout(" 0.5 "), Some(Duration::from_millis(500)));
    assert_eq!(parse_timeout("0"), None);
    assert_eq!(parse_timeout("-3"), None);
    assert_eq!(parse_timeout("soon"), None);
    assert_eq!(parse_max_size("1048576"), Some(1 << 20));
    // elfutils' 0 is "no limit": asys's bound is what it maps.
    assert_eq!(parse_max_size("0"), Some(MAX_MAPPED_BYTES));
    assert_eq!(parse_max_size("99999999999999"), Some(MAX_MAPPED_BYTES));
    assert_eq!(parse_max_size("1G"), None);
}

fn write_aged(path: &Path, len: usize, age_s: u64) {
    std::fs::write(path, vec![7u8; len]).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(age_s))
        .unwrap();
}

#[test]
fn eviction_removes_the_files_used_longest_ago_down_to_the_cap_and_no_link() {
    let d = Dir::new("evict");
    let cache = Cache::open(d.0.join("cache"), 100).unwrap();
    let outside = d.0.join("outside.debug");
    std::fs::write(&outside, vec![1u8; 500]).unwrap();
    write_aged(&cache.path_of("aa"), 40, 300);
    write_aged(&cache.path_of("bb"), 40, 200);
    write_aged(&cache.path_of("cc"), 40, 100);
    // A link someone planted, to a large file: neither counted nor followed.
    symlink(&outside, cache.path_of("dd")).unwrap();
    // A temporary file a crashed run left, and one being written now.
    write_aged(&cache.dir().join(".ee.tmp-1-0"), 10, 2 * 3600);
    write_aged(&cache.dir().join(".ff.tmp-1-0"), 10, 0);
    cache.evict(&cache.path_of("cc"));
    assert!(!cache.path_of("aa").exists(), "the oldest file stays");
    assert!(cache.path_of("bb").exists() && cache.path_of("cc").exists());
    assert!(std::fs::symlink_metadata(cache.path_of("dd")).is_ok());
    assert_eq!(std::fs::metadata(&outside).unwrap().len(), 500);
    assert!(!cache.dir().join(".ee.tmp-1-0").exists());
    assert!(cache.dir().join(".ff.tmp-1-0").exists());
    // The file kept is never removed, even alone over the cap.
    let small = Cache::open(d.0.join("cache"), 10).unwrap();
    small.evict(&small.path_of("cc"));
    assert!(!small.path_of("bb").exists());
    assert!(small.path_of("cc").exists());
}

#[test]
fn a_link_in_the_cache_is_never_read_and_a_linked_cache_folder_is_refused() {
    let d = Dir::new("links");
    let cache = Cache::open(d.0.join("cache"), CACHE_CAP_BYTES).unwrap();
    let elsewhere = d.0.join("secret");
    std::fs::write(&elsewhere, b"\x7fELF not yours").unwrap();
    symlink(&elsewhere, cache.path_of("abcd")).unwrap();
    assert!(cache.get("abcd").is_none());
    // A hard link (two names) is not read either.
    std::fs::hard_link(&elsewhere, cache.path_of("beef")).unwrap();
    assert!(cache.get("beef").is_none());
    // A file of asys's own is.
    std::fs::write(cache.path_of("cafe"), b"bytes").unwrap();
    assert_eq!(&*cache.get("cafe").unwrap(), b"bytes");
    // The folder itself a link: refused.
    symlink(d.0.join("cache"), d.0.join("linked")).unwrap();
    assert!(Cache::open(d.0.join("linked"), CACHE_CAP_BYTES).is_err());
    // A temporary file is made afresh...
    let (t, _file) = cache.create_temp("aa11").unwrap();
    assert!(std::fs::symlink_metadata(&t.path).unwrap().is_file());
    // ... and never through a link planted at its name (every name this
    // process would use next).
    for n in 0..1000 {
        let name = format!(".bb22.tmp-{}-{n}", std::process::id());
        let _ = symlink(&elsewhere, cache.dir().join(name));
    }
    assert!(cache.create_temp("bb22").is_err());
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"\x7fELF not yours");
}

/// A small program with DWARF and a build id (built with cc), and its id.
fn debug_file(d: &Dir) -> (Vec<u8>, Vec<u8>) {
    let src = d.0.join("p.c");
    std::fs::write(
        &src,
        "int f(int x) { return x * 3; }\nint main(void) { return f(1); }\n",
    )
    .unwrap();
    let out = d.0.join("p");
    let o = std::process::Command::new("cc")
        .args(["-g", "-Wl,--build-id", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("cc runs");
    assert!(
        o.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bytes = std::fs::read(&out).unwrap();
    let id = object::File::parse(&*bytes)
        .unwrap()
        .build_id()
        .unwrap()
        .expect("a build id")
        .to_vec();
    (bytes, id)
}

/// How the fake server answers one request.
#[derive(Clone)]
enum Answer {
    /// 200 with these bytes (with a Content-Length when `.1`).
    Body(Vec<u8>, bool),
    /// Takes the request and never answers.
    Silent,
    /// 404.
    NotFound,
}

/// A server on localhost answering every request with `answer`; returns
/// its base URL and the paths asked for.
fn serve(answer: Answer) -> (String, std::sync::Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let asked = std::sync::Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (answer, log) = (answer.clone(), log.clone());
            std::thread::spawn(move || answer_one(conn, &answer, &log));
        }
    });
    (base, asked)
}

fn answer_one(mut conn: TcpStream, answer: &Answer, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
            break;
        }
    }
    let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
    log.lock().unwrap().push(path);
    match answer {
        Answer::Silent => std::thread::sleep(Duration::from_secs(60)),
        Answer::NotFound => {
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
        Answer::Body(bytes, with_length) => {
            let head = if *with_length {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    bytes.len()
                )
            } else {
                "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(bytes);
        }
    }
}

fn client(d: &Dir, urls: &[&str], timeout: Duration, max_bytes: u64) -> Client {
    Client::new(Settings {
        urls: urls.iter().map(|u| u.to_string()).collect(),
        timeout,
        max_bytes,
        cache_dir: d.0.join("cache"),
        cache_cap: CACHE_CAP_BYTES,
    })
    .unwrap()
}

#[test]
fn a_debug_file_is_fetched_once_kept_and_then_read_from_the_cache() {
    let d = Dir::new("fetch");
    let (bytes, id) = debug_file(&d);
    let (missing, _) = serve(Answer::NotFound);
    let (base, asked) = serve(Answer::Body(bytes.clone(), true));
    let c = client(&d, &[&missing, &base], Duration::from_secs(10), 1 << 30);
    let got = c.debug_file(&id).expect("fetched");
    assert_eq!(&**got.data, &bytes[..]);
    assert_eq!(got.path, c.cache.path_of(&hex(&id)));
    // Asked again in the run: remembered, not fetched again.
    assert!(c.debug_file(&id).is_some());
    assert_eq!(
        *asked.lock().unwrap(),
        [format!("/buildid/{}/debuginfo", hex(&id))]
    );
    assert_eq!(got.debuginfod, Some(hex(&id)));
    // A later run finds it in the cache, with no server (nothing listens
    // on port 9 of localhost: a request would fail and warn).
    let later = client(&d, &["http://127.0.0.1:9"], Duration::from_secs(1), 1 << 30);
    assert_eq!(&**later.debug_file(&id).unwrap().data, &bytes[..]);
    assert!(
        later.down.lock().unwrap().is_empty(),
        "the server was asked"
    );
}

#[test]
fn bodies_that_are_not_the_debug_file_asked_for_are_refused_and_not_kept() {
    let d = Dir::new("refused");
    let (bytes, id) = debug_file(&d);
    let c = client(&d, &[], Duration::from_secs(10), 1 << 30);
    let h = hex(&id);
    let url = |base: &str| format!("{base}/buildid/{h}/debuginfo");
    let (garbage, _) = serve(Answer::Body(b"<html>no</html>".to_vec(), true));
    let e = c
        .fetch(&url(&garbage), Duration::from_secs(10), &h, &id)
        .map(|f| f.map(|(path, _)| path));
    assert!(matches!(e, Err(FetchError::NotElf)), "{e:?}");
    // The right file asked for under another build id.
    let (right, _) = serve(Answer::Body(bytes.clone(), true));
    let other = vec![0xab; id.len()];
    let e = c
        .fetch(&url(&right), Duration::from_secs(10), &hex(&other), &other)
        .map(|f| f.map(|(path, _)| path));
    assert!(matches!(e, Err(FetchError::OtherBuild { .. })), "{e:?}");
    // Over the size limit: by its Content-Length, and while streamed
    // without one.
    let small = client(&d, &[], Duration::from_secs(10), 1000);
    let e = small
        .fetch(&url(&right), Duration::from_secs(10), &h, &id)
        .map(|f| f.map(|(path, _)| path));
    assert!(matches!(e, Err(FetchError::TooLarge { .. })), "{e:?}");
    let (streamed, _) = serve(Answer::Body(bytes.clone(), false));
    let e = small
        .fetch(&url(&streamed), Duration::from_secs(10), &h, &id)
        .map(|f| f.map(|(path, _)| path));
    assert!(matches!(e, Err(FetchError::TooLong { max: 1000 })), "{e:?}");
    // Nothing was kept, not even a temporary file.
    let left: Vec<_> = std::fs::read_dir(c.cache.dir()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_silent_server_costs_the_timeout_once_and_is_not_asked_again() {
    let d = Dir::new("silent");
    let (silent, asked) = serve(Answer::Silent);
    let timeout = Duration::from_millis(1500);
    let c = client(&d, &[&silent], timeout, 1 << 30);
    let t = Instant::now();
    assert!(c.debug_file(&[1, 2, 3, 4]).is_none());
    let first = t.elapsed();
    assert!(
        first >= timeout && first < timeout + Duration::from_secs(2),
        "{first:?} for a {timeout:?} timeout"
    );
    let t = Instant::now();
    assert!(c.debug_file(&[5, 6, 7, 8]).is_none());
    assert!(c.debug_file(&[1, 2, 3, 4]).is_none());
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(asked.lock().unwrap().len(), 1);
}
