//! What root's asys reads from other users: files other processes name
//! (`/proc/PID/maps` paths, perf maps, jitdumps, interpreter binaries), and
//! the bytes of names and tables they can make asys hold.
//!
//! Every such file is opened through [`open::open`], which never blocks on
//! a FIFO or device, never follows a link another user could have planted,
//! takes only regular files within a size cap, and gives up on an open that
//! hangs (a stalled network or FUSE file system) after a deadline. What
//! other users' data may make asys keep in memory is bounded by
//! [`budget::Budget`]s, per process and in all; what a budget refuses is
//! counted in the report's `drops` and named in a warning.
pub mod budget;
pub mod open;
