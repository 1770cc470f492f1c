//! The `asys` binary: everything it does is the library's
//! ([`asys_userspace::main`]).
fn main() -> std::process::ExitCode {
    asys_userspace::main()
}
