//! Why `-t cuda` recorded no device activity, in one line: a report with
//! CUDA calls and no kernel, copy or memset leaves a user guessing between
//! "no GPU", "asys's library never loaded" and "CUPTI refused".
use asys_report::recorded_settings::Mode;
use asys_report::report::metadata::Metadata;

/// The reason, when CUDA was traced, its runtime was found, and no device
/// record arrived; None otherwise.
pub fn cuda_without_device_activity(m: &Metadata) -> Option<String> {
    let traced =
        m.trace.iter().any(|t| t == "cuda") && !m.items_not_found.iter().any(|t| t == "cuda");
    let records = m
        .tables
        .get(asys_report::report::schema::HGGC_ACTIVITY)
        .copied()
        .unwrap_or(0);
    if !traced || records > 0 {
        return None;
    }
    let driver = m.libraries.keys().any(|path| {
        path.rsplit('/')
            .next()
            .is_some_and(crate::apis::is_cuda_driver)
    });
    let why = if !driver {
        "no traced process loaded CUDA's driver (libcuda.so.1), so nothing ran on a GPU \
         (without a driver the runtime returns cudaErrorInsufficientDriver, 35)"
            .to_string()
    } else if !m.device_activity {
        match m.mode {
            Mode::Attach | Mode::SystemWide => {
                "the processes were not started with CUDA_INJECTION64_PATH naming asys's \
                 injection library, which CUPTI's records come through"
                    .to_string()
            }
            _ => "CUDA's driver never loaded asys's injection library (it does at cuInit, \
                 from CUDA_INJECTION64_PATH)"
                .to_string(),
        }
    } else {
        "CUPTI delivered no record: it was not found, or refused (the driver too old, or \
         another CUPTI client; asys-inject's warning above says which), or the application \
         ran no kernel, copy or memset"
            .to_string()
    };
    Some(format!("no CUDA device activity was recorded: {why}"))
}
