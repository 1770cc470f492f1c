//! The OS runtime trace item: system calls from the system-call
//! tracepoints, one row per call, and pthread lock waits from the futex
//! system calls libc's lock code makes, one row per wait that blocked,
//! named after the lock function, with `--osrt-threshold` applied in the
//! kernel. Counts and times are checked against the workload's own.
use asys_tests::*;

/// Locks, condition waits, sleeps, pipe I/O of a size nothing else uses
/// (777 bytes, told apart by the Bytes column) and a forked child's sleep;
/// it prints how many of each it made.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static sem_t held;
static int flag;
static long locks, cond_waits, sleeps;
static void lock(void) { pthread_mutex_lock(&m); __atomic_add_fetch(&locks, 1, __ATOMIC_RELAXED); }
static void nap(unsigned us) { usleep(us); __atomic_add_fetch(&sleeps, 1, __ATOMIC_RELAXED); }
static void *holder(void *a) { lock(); sem_post(&held); nap(30000); pthread_mutex_unlock(&m); return 0; }
static void *signaler(void *a) {
    nap(10000);
    lock(); flag = 1; pthread_cond_signal(&c); pthread_mutex_unlock(&m);
    return 0;
}
int main(void) {
    sem_init(&held, 0, 0);
    /* Uncontended: never waits. */
    for (int i = 0; i < 2000; i++) { lock(); pthread_mutex_unlock(&m); }
    /* Contended: blocks until the holder lets go, 30 ms later. */
    pthread_t t;
    pthread_create(&t, 0, holder, 0);
    sem_wait(&held);
    lock(); pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    /* A condition wait, which re-locks the mutex inside. */
    lock();
    pthread_create(&t, 0, signaler, 0);
    while (!flag) { cond_waits++; pthread_cond_wait(&c, &m); }
    pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    for (int i = 0; i < 4; i++) nap(1000);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    char buf[777] = {0};
    long writes = 0, reads = 0;
    for (int i = 0; i < 9; i++) writes += write(fds[1], buf, sizeof buf) == sizeof buf;
    for (int i = 0; i < 9; i++) reads += read(fds[0], buf, sizeof buf) == sizeof buf;
    pid_t child = fork();
    if (child == 0) { usleep(40000); _exit(0); }
    int status;
    waitpid(child, &status, 0);
    printf("workload-mutex %lu\n", (unsigned long)&m);
    printf("workload-cond %lu\n", (unsigned long)&c);
    printf("workload-calls pthread_mutex_lock %ld\n", locks);
    printf("workload-calls pthread_cond_wait %ld\n", cond_waits);
    printf("workload-calls clock_nanosleep %ld\n", sleeps);
    printf("workload-calls write %ld\n", writes);
    printf("workload-calls read %ld\n", reads);
    return 0;
}
"#;

struct Traced {
    report: std::path::PathBuf,
    root: u64,
    tally: std::collections::BTreeMap<String, u64>,
    /// The address of the workload's mutex and condition variable.
    mutex: u64,
    cond: u64,
}

fn profile(s: &Scratch, threshold: &str) -> Traced {
    let bin = compile_c(&s.0, "osrt_calls", PROGRAM, &["-lpthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "--osrt-threshold",
        threshold,
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let root = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let tally = workload_calls(&stdout(&o));
    assert_eq!(tally["pthread_mutex_lock"], 2004, "{tally:?}");
    let printed = |what: &str| -> u64 {
        stdout(&o)
            .lines()
            .find_map(|l| l.strip_prefix(what))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("the workload prints {what}"))
    };
    Traced {
        report,
        root,
        tally,
        mutex: printed("workload-mutex "),
        cond: printed("workload-cond "),
    }
}

/// The rows of `pthread_cond_wait`: those that waited on the condition
/// variable (its futex words lie inside it), and the others, which may only
/// be its re-lock of the mutex after the wake-up (when the signaler still
/// held it: a wait of its own, on the mutex).
fn cond_waits(t: &Traced, rows: &[serde_json::Value]) -> usize {
    const COND_SIZE: u64 = 48;
    let pointer = |r: &serde_json::Value| r["Pointer"].as_u64().unwrap();
    let (on_cond, relocks): (Vec<_>, Vec<_>) = rows
        .iter()
        .partition(|r| (t.cond..t.cond + COND_SIZE).contains(&pointer(r)));
    assert!(relocks.len() <= on_cond.len(), "{rows:?}");
    assert!(relocks.iter().all(|r| pointer(r) == t.mutex), "{rows:?}");
    on_cond.len()
}

fn calls(report: &std::path::Path, name: &str, pid: Option<u64>) -> Vec<serde_json::Value> {
    stats_json(report, "osrt_trace")
        .into_iter()
        .filter(|r| r["Name"] == name && pid.is_none_or(|p| r["Pid"] == p))
        .collect()
}

#[test]
fn uncontended_locks_record_nothing_under_the_threshold_and_a_blocked_lock_one_row() {
    require_root();
    let s = Scratch::new("osrt");
    // The default threshold, 1,000 ns.
    let t = profile(&s, "1000");
    // 2,004 locks, of which only one waited (30 ms, for the holder).
    let locks = calls(&t.report, "pthread_mutex_lock", Some(t.root));
    assert_eq!(locks.len(), 1, "{locks:?}");
    let d = locks[0]["Duration (ns)"].as_i64().unwrap();
    assert!(d >= 10_000_000, "the blocked lock took {d} ns");
    assert_eq!(locks[0]["Pointer"], t.mutex);
    // The condition wait blocked for the signaler (10 ms): one row on the
    // condition variable.
    let waits = calls(&t.report, "pthread_cond_wait", Some(t.root));
    assert_eq!(
        cond_waits(&t, &waits) as u64,
        t.tally["pthread_cond_wait"],
        "{waits:?}"
    );
}

#[test]
fn each_sleep_is_one_row_and_the_forked_child_is_traced() {
    require_root();
    let s = Scratch::new("osrt-sleep");
    let t = profile(&s, "1000");
    let sleeps = calls(&t.report, "clock_nanosleep", Some(t.root));
    // usleep -> nanosleep -> clock_nanosleep: one call, one row (4 naps of
    // 1 ms, the holder's and the signaler's).
    assert_eq!(
        sleeps.len() as u64,
        t.tally["clock_nanosleep"],
        "{sleeps:?}"
    );
    assert_eq!(t.tally["clock_nanosleep"], 6);
    for r in &sleeps {
        assert!(r["Duration (ns)"].as_i64().unwrap() >= 1_000_000, "{r}");
        assert_eq!(r["Result"], 0);
    }
    assert!(calls(&t.report, "usleep", None).is_empty());
    assert!(calls(&t.report, "nanosleep", None).is_empty());
    // The child sleeps 40 ms; the parent waits for it in wait4 (waitpid).
    let child: Vec<_> = calls(&t.report, "clock_nanosleep", None)
        .into_iter()
        .filter(|r| r["Pid"] != t.root)
        .collect();
    assert_eq!(child.len(), 1, "{child:?}");
    assert_eq!(calls(&t.report, "wait4", Some(t.root)).len(), 1);
    // Pipe I/O of 777 bytes takes microseconds or less: kept only if over
    // the threshold, never more rows than calls.
    let writes = calls(&t.report, "write", Some(t.root));
    assert!(writes.iter().filter(|w| w["Bytes"] == 777).count() <= 9);
}

#[test]
fn with_no_threshold_every_call_and_every_lock_wait_is_one_row() {
    require_root();
    let s = Scratch::new("osrt-all");
    let t = profile(&s, "0");
    let count = |name: &str| {
        calls(&t.report, name, Some(t.root))
            .iter()
            .filter(|r| name != "read" && name != "write" || r["Bytes"] == 777)
            .count() as u64
    };
    for name in ["read", "write", "clock_nanosleep"] {
        assert_eq!(count(name), t.tally[name], "{name}");
    }
    let waits = calls(&t.report, "pthread_cond_wait", Some(t.root));
    assert_eq!(cond_waits(&t, &waits) as u64, t.tally["pthread_cond_wait"]);
    // A lock that does not wait makes no system call: of the 2,004 lock
    // calls, the one that blocked is the one row. libc's own locks
    // (pthread_create takes the loader's) are none.
    let locks = calls(&t.report, "pthread_mutex_lock", Some(t.root));
    assert_eq!(locks.len(), 1, "{locks:?}");
    assert_eq!(locks[0]["Pointer"], t.mutex);
}

#[test]
fn system_calls_of_an_untraced_process_are_not_recorded() {
    require_root();
    let s = Scratch::new("osrt-untraced");
    // Writes 555-byte blocks to /dev/null while the traced workload runs.
    let noise = compile_c(
        &s.0,
        "noise",
        r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    char b[555] = {0};
    int fd = open("/dev/null", O_WRONLY);
    for (;;) { write(fd, b, sizeof b); usleep(100); }
}
"#,
        &[],
    );
    let mut noise = ChildGuard(Some(std::process::Command::new(&noise).spawn().unwrap()));
    let noise_pid = u64::from(noise.child().id());
    let t = profile(&s, "0");
    noise.child().kill().unwrap();
    let rows = stats_json(&t.report, "osrt_trace");
    assert!(rows.iter().all(|r| r["Pid"] != noise_pid));
    assert!(rows.iter().all(|r| r["Bytes"] != 555));
    // The traced process's own writes are all there.
    let writes = calls(&t.report, "write", Some(t.root));
    assert_eq!(
        writes.iter().filter(|w| w["Bytes"] == 777).count() as u64,
        t.tally["write"]
    );
}

/// A sleep stopped and continued (SIGSTOP, SIGCONT: the kernel restarts it
/// through restart_syscall), then a sleep cut short by a signal handler
/// (EINTR): two calls, two rows.
const INTERRUPTED: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
static void on_alarm(int sig) { (void)sig; }
int main(void) {
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        usleep(100000);
        kill(parent, SIGSTOP);
        usleep(50000);
        kill(parent, SIGCONT);
        _exit(0);
    }
    int first = usleep(300000);
    waitpid(child, 0, 0);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval t = {{0, 0}, {0, 50000}};
    setitimer(ITIMER_REAL, &t, 0);
    int second = usleep(300000);
    printf("results %d %d\n", first, second);
    return 0;
}
"#;

#[test]
fn a_restarted_sleep_is_one_row_and_an_interrupted_one_ends_in_eintr() {
    require_root();
    let s = Scratch::new("osrt-restart");
    let bin = compile_c(&s.0, "interrupted", INTERRUPTED, &[]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // usleep's own results: the restarted one succeeded, the other did not.
    assert!(stdout(&o).contains("results 0 -1"), "{}", stdout(&o));
    let report = report.with_extension("asysrep");
    let root = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let sleeps = calls(&report, "clock_nanosleep", Some(root));
    assert_eq!(sleeps.len(), 2, "{sleeps:?}");
    let took = |i: usize| sleeps[i]["Duration (ns)"].as_i64().unwrap();
    // From its first entry to its end, the stop included.
    assert!(took(0) >= 300_000_000, "{sleeps:?}");
    assert_eq!(sleeps[0]["Result"], 0);
    assert!((50_000_000..300_000_000).contains(&took(1)), "{sleeps:?}");
    assert_eq!(sleeps[1]["Result"], -libc::EINTR);
}

/// Writes its pid and where `pthread_mutex_lock` is in its memory to the
/// file named by its argument, then waits until that file is removed.
const WHERE_IS_THE_LOCK: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%d %lu\n", getpid(), (unsigned long)dlsym(RTLD_DEFAULT, "pthread_mutex_lock"));
    fclose(f);
    rename(tmp, argv[1]);
    while (access(argv[1], F_OK) == 0) usleep(10000);
    return 0;
}
"#;

/// The pid and lock address a WHERE_IS_THE_LOCK process wrote to `file`.
fn wait_for_lock_address(file: &std::path::Path) -> (u32, u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            let mut words = text.split_whitespace();
            let pid = words.next().unwrap().parse().unwrap();
            return (pid, words.next().unwrap().parse().unwrap());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never came",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The first byte of the instruction at `addr` in `pid`'s memory.
fn first_byte(pid: u32, addr: u64) -> u8 {
    use std::os::unix::fs::FileExt as _;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8];
    mem.read_exact_at(&mut b, addr).unwrap();
    b[0]
}

#[test]
fn osrt_puts_no_breakpoint_in_libc() {
    require_root();
    const INT3: u8 = 0xcc;
    let s = Scratch::new("osrt-no-probe");
    let bin = compile_c(&s.0, "where", WHERE_IS_THE_LOCK, &["-ldl"]);
    // The same program, untraced, started first: it maps the same libc.
    let other_file = s.path("other");
    let _other = ChildGuard(Some(
        std::process::Command::new(&bin)
            .arg(&other_file)
            .spawn()
            .unwrap(),
    ));
    let (other_pid, other_lock) = wait_for_lock_address(&other_file);
    let traced_file = s.path("traced");
    let (asys, _err, _line) = start_tracing(
        asys()
            .args(["profile", "-t", "osrt", "-o"])
            .arg(s.path("r"))
            .arg(&bin)
            .arg(&traced_file),
    );
    let (traced_pid, traced_lock) = wait_for_lock_address(&traced_file);
    // Lock waits come from the futex system calls: no breakpoint (and no
    // trap on every lock call) in the traced process's libc, nor in the
    // other's.
    assert_ne!(first_byte(traced_pid, traced_lock), INT3);
    assert_ne!(first_byte(other_pid, other_lock), INT3);
    std::fs::remove_file(&traced_file).unwrap();
    assert!(asys.wait().success());
    std::fs::remove_file(&other_file).unwrap();
}

/// Each kind of lock waits once, for a holder that lets go 20 ms later
/// (one kind at a time); the waiter times its own call and prints
/// `workload-wait NAME NS OBJECT SIZE`. Then a futex wait that is no lock's (the
/// program's own, through libc's `syscall`), which must be no row.
const LOCK_KINDS: &str = r#"
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t pi;
static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t b;
static sem_t s;
static int flag;
static const char *kind;
static long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}
static struct timespec later(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 60;
    return t;
}
static void *waiter(void *a) {
    struct timespec t = later();
    void *object = 0;
    unsigned long size = 0;
    long start = now();
    if (!strcmp(kind, "pthread_mutex_lock")) { pthread_mutex_lock(&m); object = &m; size = sizeof m; pthread_mutex_unlock(&m); }
    else if (!strcmp(kind, "pthread_mutex_lock-pi")) { pthread_mutex_lock(&pi); object = &pi; size = sizeof pi; pthread_mutex_unlock(&pi); }
    else if (!strcmp(kind, "pthread_mutex_timedlock")) { pthread_mutex_timedlock(&m, &t); object = &m; size = sizeof m; pthread_mutex_unlock(&m); }
    else if (!strcmp(kind, "pthread_rwlock_rdlock")) { pthread_rwlock_rdlock(&rw); object = &rw; size = sizeof rw; pthread_rwlock_unlock(&rw); }
    else if (!strcmp(kind, "pthread_rwlock_wrlock")) { pthread_rwlock_wrlock(&rw); object = &rw; size = sizeof rw; pthread_rwlock_unlock(&rw); }
    else if (!strcmp(kind, "sem_wait")) { sem_wait(&s); object = &s; size = sizeof s; }
    else if (!strcmp(kind, "sem_timedwait")) { sem_timedwait(&s, &t); object = &s; size = sizeof s; }
    else if (!strcmp(kind, "pthread_barrier_wait")) { pthread_barrier_wait(&b); object = &b; size = sizeof b; }
    else if (!strcmp(kind, "pthread_cond_wait")) {
        pthread_mutex_lock(&cm);
        start = now();
        while (!flag) pthread_cond_wait(&c, &cm);
        object = &c;
        size = sizeof c;
        pthread_mutex_unlock(&cm);
    } else if (!strcmp(kind, "pthread_cond_timedwait")) {
        pthread_mutex_lock(&cm);
        start = now();
        while (!flag) pthread_cond_timedwait(&c, &cm, &t);
        object = &c;
        size = sizeof c;
        pthread_mutex_unlock(&cm);
    }
    printf("workload-wait %s %ld %lu %lu\n", kind, now() - start, (unsigned long)object, size);
    return 0;
}
static void hold(void) { usleep(20000); }
int main(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&pi, &attr);
    pthread_barrier_init(&b, 0, 2);
    sem_init(&s, 0, 0);
    const char *kinds[] = {"pthread_mutex_lock", "pthread_mutex_lock-pi", "pthread_mutex_timedlock",
        "pthread_rwlock_rdlock", "pthread_rwlock_wrlock", "sem_wait", "sem_timedwait",
        "pthread_barrier_wait", "pthread_cond_wait", "pthread_cond_timedwait"};
    for (unsigned i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        pthread_t t;
        kind = kinds[i];
        flag = 0;
        if (!strcmp(kind, "pthread_mutex_lock") || !strcmp(kind, "pthread_mutex_timedlock")) {
            pthread_mutex_lock(&m);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_mutex_unlock(&m);
        } else if (!strcmp(kind, "pthread_mutex_lock-pi")) {
            pthread_mutex_lock(&pi);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_mutex_unlock(&pi);
        } else if (!strcmp(kind, "pthread_rwlock_rdlock")) {
            pthread_rwlock_wrlock(&rw);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_rwlock_unlock(&rw);
        } else if (!strcmp(kind, "pthread_rwlock_wrlock")) {
            pthread_rwlock_rdlock(&rw);
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_rwlock_unlock(&rw);
        } else if (!strncmp(kind, "sem_", 4)) {
            pthread_create(&t, 0, waiter, 0);
            hold();
            sem_post(&s);
        } else if (!strcmp(kind, "pthread_barrier_wait")) {
            pthread_create(&t, 0, waiter, 0);
            hold();
            pthread_barrier_wait(&b);
        } else {
            pthread_create(&t, 0, waiter, 0);
            hold();
            /* Signalled after the mutex is let go: the waiter re-locks it
               without waiting. */
            pthread_mutex_lock(&cm);
            flag = 1;
            pthread_mutex_unlock(&cm);
            pthread_cond_signal(&c);
        }
        pthread_join(t, 0);
    }
    /* pthread_join waits for a thread that sleeps 20 ms. */
    pthread_t t;
    kind = "none";
    pthread_create(&t, 0, (void *(*)(void *))hold, 0);
    long start = now();
    pthread_join(t, 0);
    printf("workload-wait pthread_join %ld 0 0\n", now() - start);
    /* The program's own futex wait, times out after 20 ms: no lock's. */
    static int word;
    struct timespec twenty = {0, 20000000};
    syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &twenty, 0, 0);
    printf("workload-futex %lu\n", (unsigned long)&word);
    return 0;
}
"#;

#[test]
fn each_kind_of_lock_waits_one_row_as_long_as_it_waited() {
    require_root();
    let s = Scratch::new("osrt-kinds");
    let bin = compile_c(&s.0, "lock_kinds", LOCK_KINDS, &["-lpthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let root = metadata(&report)["root_pids"][0].as_u64().unwrap();
    let out = stdout(&o);
    let rows = stats_json(&report, "osrt_trace");
    let mut kinds = 0;
    for line in out.lines().filter_map(|l| l.strip_prefix("workload-wait ")) {
        let w: Vec<&str> = line.split(' ').collect();
        let (kind, took) = (w[0], w[1].parse::<i64>().unwrap());
        let (object, size) = (w[2].parse::<u64>().unwrap(), w[3].parse::<u64>().unwrap());
        let name = kind.trim_end_matches("-pi");
        // The waiter's own call, timed by itself: held for most of the
        // holder's 20 ms (the waiter starts after the holder took it).
        assert!(took >= 15_000_000, "{kind} took {took} ns");
        let mine: Vec<_> = rows
            .iter()
            .filter(|r| r["Name"] == name && r["Pid"] == root)
            .filter(|r| {
                // The object waited on: its futex word lies in it (a
                // joined thread's is in its descriptor).
                let p = r["Pointer"].as_u64().unwrap();
                object == 0 || (object..object + size).contains(&p)
            })
            .filter(|r| r["Duration (ns)"].as_i64().unwrap() >= 10_000_000)
            .collect();
        assert_eq!(mine.len(), 1, "{kind}: {mine:?}\n{out}");
        let d = mine[0]["Duration (ns)"].as_i64().unwrap();
        // The wait is the call's, less what the call did before and after.
        assert!(
            d <= took && d >= took - 5_000_000,
            "{kind}: waited {d} ns in a call of {took} ns"
        );
        kinds += 1;
    }
    assert_eq!(kinds, 11, "{out}");
    // The program's own futex wait is no lock's: no row.
    let word: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("workload-futex "))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(rows.iter().all(|r| r["Pointer"] != word), "{rows:?}");
    assert!(rows.iter().all(|r| r["Name"] != "futex"), "{rows:?}");
}

/// A lock that waits 20 ms in a forked child, and in a child that executed
/// the program anew: each prints `workload-contended PID`.
const CHILDREN: &str = r#"
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static sem_t held;
static void *holder(void *a) {
    pthread_mutex_lock(&m);
    sem_post(&held);
    usleep(20000);
    pthread_mutex_unlock(&m);
    return 0;
}
static void contend(void) {
    pthread_t t;
    sem_init(&held, 0, 0);
    pthread_create(&t, 0, holder, 0);
    sem_wait(&held);
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    pthread_join(t, 0);
    printf("workload-contended %d\n", getpid());
    fflush(stdout);
}
int main(int argc, char **argv) {
    if (argc > 1) { contend(); return 0; }
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) { contend(); _exit(0); }
    waitpid(c, 0, 0);
    pid_t e = fork();
    if (e == 0) { execl(argv[0], argv[0], "again", (char *)0); _exit(1); }
    waitpid(e, 0, 0);
    return 0;
}
"#;

#[test]
fn lock_waits_of_a_forked_and_of_an_executed_child_are_named() {
    require_root();
    let s = Scratch::new("osrt-children");
    let bin = compile_c(&s.0, "children", CHILDREN, &["-lpthread"]);
    let report = s.path("r");
    let o = run(&[
        "profile",
        "-t",
        "osrt",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let pids: Vec<u64> = stdout(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("workload-contended "))
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2, "{}", stdout(&o));
    for pid in pids {
        let locks = calls(&report, "pthread_mutex_lock", Some(pid));
        assert_eq!(locks.len(), 1, "child {pid}: {locks:?}");
        let d = locks[0]["Duration (ns)"].as_i64().unwrap();
        assert!(d >= 10_000_000, "child {pid} waited {d} ns");
    }
}
