//! What asys reads of other processes from outside: /proc (mappings, tasks,
//! ranks, standard streams), the files they have mapped, their control
//! groups and containers, and their memory. Shared by the stages that look
//! at traced processes (cli, kernel, collect, symbolize, record, sink).
pub mod cgroup;
pub mod mapped_file;
pub mod procfs;
pub mod remote_memory;
