//! Event types shared by the eBPF programs and the `asys` binary.
//!
//! Every record that crosses the ring buffer starts with an [`EventHeader`] whose
//! `kind` is one of [`EventKind`]. Kinds reserve id ranges per category (as kunai
//! does) so later sources slot in without renumbering: 1..99 accelerator API
//! calls, 100..199 process lifecycle, 200..299 loader notifications.
//!
//! One module per family of events and of the map values that go with them;
//! every item is re-exported here, so both sides name it `asys_common::X`.
//! Both sides compile these types, for different targets (bpfel and the
//! host), and read each other's bytes: the size of every type that crosses,
//! and the offset of every field one side reads or writes by position, is
//! asserted at compile time next to the type, so a change that moves a field
//! fails to build on both sides instead of decoding garbage.
#![no_std]

mod activity;
mod api_call;
mod capture;
mod cookie;
mod drops;
mod event_header;
mod kernel_settings;
mod nvtx_registry_layout;
mod osrt;
#[cfg(feature = "user")]
mod pod;
mod process_events;
mod python;
mod sample;
mod sched;
mod stack;
mod tracepoint_layout;
mod user_probe;

pub use activity::*;
pub use api_call::*;
pub use capture::*;
pub use cookie::*;
pub use drops::*;
pub use event_header::*;
pub use kernel_settings::*;
pub use nvtx_registry_layout::*;
pub use osrt::*;
pub use process_events::*;
pub use python::*;
pub use sample::*;
pub use sched::*;
pub use stack::*;
pub use tracepoint_layout::*;
pub use user_probe::*;
