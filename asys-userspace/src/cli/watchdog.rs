//! `asys __watchdog SOCKET MAP`: the helper asys starts at load to continue
//! the processes the loader hook stopped should asys die (see
//! `kernel/watchdog.rs`). Not for use by hand.
pub fn main(socket: i32, map: i32) -> anyhow::Result<u8> {
    crate::kernel::watchdog::run(socket, map)?;
    Ok(0)
}
