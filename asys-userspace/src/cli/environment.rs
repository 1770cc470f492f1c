//! The application's environment and output (`-e`, `-n`, `-w`), shared by
//! `profile` and `launch`, and the variables that make the runtime load
//! asys's injection library.
use clap::Args;

use crate::spawn::Stdio;
use asys_report::trace_items::TraceItem;

#[derive(Args, Debug)]
pub struct EnvArgs {
    /// Environment variables for the application: A=B,C=D.
    #[arg(short = 'e', long = "env-var", value_name = "A=B,C=D")]
    pub env_var: Vec<String>,

    /// Whether the application inherits asys's environment.
    #[arg(short = 'n', long = "inherit-environment", default_value = "true", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub inherit_environment: bool,

    /// Whether the application's output is shown.
    #[arg(short = 'w', long = "show-output", default_value = "true", value_name = "true|false", value_parser = super::parse_bool, action = clap::ArgAction::Set)]
    pub show_output: bool,
}

const INJECTION_ENV: &str = "HGGC_INJECTION64_PATH";
/// CUDA's driver loads the library named here at `cuInit` and calls its
/// `InitializeInjection`, as CUPTI's own injection clients are loaded.
const CUDA_INJECTION_ENV: &str = "CUDA_INJECTION64_PATH";
const CUPTI_PATH_ENV: &str = "ASYS_CUPTI_PATH";
/// `--cuda-graph-trace`, read by the injection library (cupti.rs).
const GRAPH_TRACE_ENV: &str = "ASYS_CUDA_GRAPH_TRACE";
const NVTX_INJECTION_ENV: &str = "NVTX_INJECTION64_PATH";
use crate::install_layout::{INJECTION_LIB, injection_library};
impl EnvArgs {
    /// Where the application's stdout and stderr go.
    pub fn stdio(&self) -> Stdio {
        if self.show_output {
            Stdio::Inherit
        } else {
            Stdio::Quiet
        }
    }
}

/// The injection library's settings for `items`, as `NAME=VALUE` pairs: in a
/// launched application's environment, or handed to the library asys loads
/// into a running process (`asys_inject_attach`).
pub fn injection_settings(
    items: &[TraceItem],
    common: &super::collection::CollectionArgs,
) -> Vec<(String, String)> {
    // Which device activity the injection library enables (--hggc-trace-set).
    let mut v = vec![
        (
            "ASYS_HGGC_ACTIVITY".to_string(),
            common.hggc_trace_set.activity_env(),
        ),
        // The injection library records the API at its sites only when asked.
        (
            "ASYS_API_PROBES".to_string(),
            common.api_probes.name().to_string(),
        ),
    ];
    if items.contains(&TraceItem::Cuda) {
        v.push((
            GRAPH_TRACE_ENV.into(),
            common.cuda_graph_trace.name().into(),
        ));
        if let Some(p) = &common.cupti_path {
            v.push((CUPTI_PATH_ENV.into(), p.display().to_string()));
        }
    }
    v
}

impl EnvArgs {
    /// The application's environment: asys's own (unless `-n false`), the
    /// `-e` variables, and what points the runtime at the injection library.
    pub fn build(
        &self,
        items: &[TraceItem],
        common: &super::collection::CollectionArgs,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let mut env: Vec<(String, String)> = if self.inherit_environment {
            std::env::vars().collect()
        } else {
            Vec::new()
        };
        for pair in self.env_var.iter().flat_map(|v| v.split(',')) {
            let Some((k, v)) = pair.split_once('=').filter(|(k, _)| !k.is_empty()) else {
                anyhow::bail!("invalid --env-var '{pair}' (expected NAME=VALUE)");
            };
            env.retain(|(name, _)| name != k);
            env.push((k.to_string(), v.to_string()));
        }
        // Device activity comes through our injection library, which the
        // runtime loads from HGGC_INJECTION64_PATH (unless the user set one
        // already). NVTX v3 reaches asys through the same library, as its
        // NVTX tool.
        if items.contains(&TraceItem::Nvtx)
            && !env.iter().any(|(k, _)| k == NVTX_INJECTION_ENV)
            && let Some(lib) = injection_library()
        {
            env.push((NVTX_INJECTION_ENV.into(), lib.display().to_string()));
        }
        // What the injection library is to record (the same variables an
        // attach hands to a library it loads into a running process).
        let settings = injection_settings(items, common);
        env.retain(|(k, _)| {
            !settings.iter().any(|(name, _)| name == k)
                && k != CUPTI_PATH_ENV
                && k != GRAPH_TRACE_ENV
        });
        env.extend(settings);
        // CUDA's device activity comes through the same library, over CUPTI.
        if items.contains(&TraceItem::Cuda) {
            if env.iter().any(|(k, _)| k == CUDA_INJECTION_ENV) {
                eprintln!(
                    "asys: warning: {CUDA_INJECTION_ENV} is set already; CUDA device activity is recorded only if it names asys's {INJECTION_LIB}"
                );
            } else if let Some(lib) = injection_library() {
                env.push((CUDA_INJECTION_ENV.into(), lib.display().to_string()));
            }
        }
        if !env.iter().any(|(k, _)| k == INJECTION_ENV) {
            match injection_library() {
                Some(lib) => env.push((INJECTION_ENV.into(), lib.display().to_string())),
                None => eprintln!(
                    "asys: warning: no injection library ({}); device activity will not be recorded",
                    crate::install_layout::injection_library_places()
                ),
            }
        }
        Ok(env)
    }
}
