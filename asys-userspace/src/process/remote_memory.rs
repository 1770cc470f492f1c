//! Reading another process's memory. What asys decodes there (CPython code
//! objects and thread states, the NVTX registration table) is the traced
//! process's to write, so the decoders read through [`RemoteMemory`]: the
//! same code runs over a live process ([`Process`], `process_vm_readv`) and,
//! in the fuzz targets (fuzz/), over an address space made of the fuzzer's
//! bytes.
//!
//! A read can block: a page the other process maps from a file on a FUSE
//! (or hung NFS) mount is read in by the page fault, which waits for the
//! file system's answer, killably only, so not even a signal gets the
//! reading thread back. [`Process`] therefore reads on a thread of its own
//! and gives up after [`READ_DEADLINE`]; a process whose read timed out is
//! not read again for the rest of the run (counted as
//! `remote_memory_read_timeouts`, warned about once), so that a hung page
//! costs one deadline, not one per sample.
//!
//! The reading thread is not started per read: each thread that reads
//! keeps one reader thread, handed reads over a channel, and replaced only
//! when a read times out (the stuck one is left to the kernel: it ends if
//! the file system ever answers, else with asys). Measured
//! (`reads_through_the_reader_thread_cost_microseconds`, 8-byte reads of
//! asys's own memory, a debug build on a 2-CPU machine shared with
//! builds): 1.4 µs a read direct, 9 to 18 µs through the reader thread,
//! 90 to 175 µs with a thread started per read (as opens are). The Python
//! sampler reads a code object once (about 20 reads, then cached) and a
//! process's thread names at most every 100 ms, so the hop costs well under
//! a millisecond a second. Telling the hung pages apart instead (the file
//! system behind each address in `/proc/PID/maps`) would cost a read of the
//! maps per read, still miss a file system that hangs later or memory
//! registered with userfaultfd, and could not bound a read that hangs all
//! the same.
use std::{
    cell::RefCell,
    collections::BTreeSet,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::Duration,
};

/// How long one read of another process's memory may take before it is
/// abandoned: a read of resident memory takes microseconds, and one that
/// faults a page in from a local disk milliseconds; this long, it waits on
/// a file system that does not answer.
pub const READ_DEADLINE: Duration = Duration::from_millis(500);

/// The memory of one process, read by address.
pub trait RemoteMemory {
    /// The process, as errors name it.
    fn pid(&self) -> u32;

    /// `len` bytes at `addr`, all or nothing: None where any of them is not
    /// readable (unmapped, or past the end of the address space).
    fn read(&self, addr: u64, len: usize) -> Option<Vec<u8>>;

    /// The little-endian u64 at `addr`.
    fn read_u64(&self, addr: u64) -> Option<u64> {
        Some(u64::from_le_bytes(self.read(addr, 8)?.try_into().ok()?))
    }
}

/// A live process's memory, read with `process_vm_readv` (which fails,
/// rather than faults, where the other process has nothing mapped), on
/// this thread's reader thread within [`READ_DEADLINE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process(pub u32);

impl RemoteMemory for Process {
    fn pid(&self) -> u32 {
        self.0
    }

    fn read(&self, addr: u64, len: usize) -> Option<Vec<u8>> {
        read_within(self.0, addr, len, (READ_DEADLINE, read_now))
    }
}

/// Processes whose read timed out: not read again.
static HUNG: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Reads that timed out since the last [`take_timeouts`].
static TIMEOUTS: AtomicU64 = AtomicU64::new(0);

/// How a reader thread reads: [`read_now`] (tests give a slow one).
type ReadFn = fn(u32, u64, usize) -> Option<Vec<u8>>;

/// One read asked of a reader thread: (pid, addr, len, how).
type Request = (u32, u64, usize, ReadFn);

/// A thread that reads for the thread that started it.
struct Reader {
    requests: mpsc::Sender<Request>,
    replies: mpsc::Receiver<Option<Vec<u8>>>,
}

impl Reader {
    fn start() -> Option<Self> {
        let (requests, asked) = mpsc::channel::<Request>();
        let (reply, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("asys-memread".into())
            .stack_size(64 << 10)
            .spawn(move || {
                // Ends when its reader is dropped (after a timeout, the
                // reply has no one to go to either).
                while let Ok((pid, addr, len, read)) = asked.recv() {
                    if reply.send(read(pid, addr, len)).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Self { requests, replies })
    }
}

thread_local! {
    static READER: RefCell<Option<Reader>> = const { RefCell::new(None) };
}

/// `len` bytes at `addr` of process `pid`, read by `read` on this thread's
/// reader thread within `limit`; None where unreadable, timed out, or `pid`
/// timed out before.
fn read_within(
    pid: u32,
    addr: u64,
    len: usize,
    (limit, read): (Duration, ReadFn),
) -> Option<Vec<u8>> {
    if HUNG
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&pid)
    {
        return None;
    }
    READER.with_borrow_mut(|slot| {
        if slot.is_none() {
            // No thread to be had: nothing is read rather than risk
            // blocking.
            *slot = Some(Reader::start()?);
        }
        let reader = slot.as_ref()?;
        reader.requests.send((pid, addr, len, read)).ok()?;
        match reader.replies.recv_timeout(limit) {
            Ok(read) => read,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The reader is stuck in the read: left behind, and the
                // next read gets a new one.
                *slot = None;
                timed_out(pid, limit);
                None
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                *slot = None;
                None
            }
        }
    })
}

fn timed_out(pid: u32, limit: Duration) {
    if HUNG.lock().unwrap_or_else(|e| e.into_inner()).insert(pid) {
        TIMEOUTS.fetch_add(1, Ordering::Relaxed);
        eprintln!(
            "asys: warning: process {pid}: a read of its memory took over {} ms (a page of a file on a mount that does not answer?); its memory is not read again (counted in drops as {})",
            limit.as_millis(),
            asys_report::report::metadata::REMOTE_MEMORY_READ_TIMEOUTS
        );
    }
}

/// Processes whose memory reads timed out since the last call (each
/// counted once), for the report being written.
pub fn take_timeouts() -> u64 {
    TIMEOUTS.swap(0, Ordering::Relaxed)
}

/// The read itself, on the calling thread.
fn read_now(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; len];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` is `out`, `len` bytes long; the kernel writes at
    // most that much there and reads the other process's memory
    // (failing, not faulting, where it is not mapped).
    let got = unsafe { libc::process_vm_readv(pid as i32, &local, 1, &remote, 1, 0) };
    (got >= 0 && got as usize == len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_reads_its_own_memory_and_not_what_is_unmapped() {
        let values: [u64; 2] = [0x1122_3344_5566_7788, 9];
        let me = Process(std::process::id());
        assert_eq!(me.read_u64(values.as_ptr() as u64), Some(values[0]));
        assert_eq!(
            me.read(values.as_ptr() as u64, 16).map(|b| b.len()),
            Some(16)
        );
        assert!(me.read(8, 8).is_none());
        assert!(me.read(u64::MAX - 3, 8).is_none());
    }

    /// The figures in the module's comment: `cargo test -p asys-userspace
    /// --release reader_thread -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn reads_through_the_reader_thread_cost_microseconds() {
        let value = 7u64;
        let (pid, addr) = (std::process::id(), &value as *const u64 as u64);
        let n = 100_000;
        let time = |f: &dyn Fn() -> Option<Vec<u8>>| {
            let t = std::time::Instant::now();
            for _ in 0..n {
                assert!(f().is_some());
            }
            t.elapsed().as_nanos() as f64 / n as f64 / 1000.0
        };
        let direct = time(&|| read_now(pid, addr, 8));
        let hop = time(&|| Process(pid).read(addr, 8));
        let spawned = time(&|| {
            asys_report::untrusted::open::with_deadline(READ_DEADLINE, move || {
                read_now(pid, addr, 8)
            })
            .flatten()
        });
        eprintln!(
            "per read: direct {direct:.2} µs, reader thread {hop:.2} µs, thread per read {spawned:.2} µs"
        );
    }

    #[test]
    fn a_read_that_does_not_finish_in_time_is_abandoned_and_its_process_not_read_again() {
        // A read that takes 10 s (as a page of a hung FUSE file would take
        // for ever), of a pid no other test reads.
        fn slow(_: u32, _: u64, _: usize) -> Option<Vec<u8>> {
            std::thread::sleep(Duration::from_secs(10));
            Some(vec![0; 8])
        }
        let pid = u32::MAX - 7;
        let t = std::time::Instant::now();
        let limit = Duration::from_millis(100);
        assert!(read_within(pid, 0, 8, (limit, slow)).is_none());
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(HUNG.lock().unwrap().contains(&pid));
        // Not read again: no deadline waited for.
        let t = std::time::Instant::now();
        assert!(read_within(pid, 0, 8, (Duration::from_secs(5), slow)).is_none());
        assert!(t.elapsed() < Duration::from_millis(50));
        // Another process is read as before, by a new reader thread.
        let value = 7u64;
        let me = Process(std::process::id());
        assert_eq!(me.read_u64(&value as *const u64 as u64), Some(7));
    }
}
