//! The tool's errors: each prints as one line, and says which exit code it ends with.

use gpu_crash_core::report::ReportError;
use gpu_crash_core::{DsnError, OutboxError, ProbeError};

/// Why a subcommand stopped.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A report could not be read: missing, truncated, not a report, or of a newer schema.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// The DSN given (or `SENTRY_DSN`) is not a Sentry DSN.
    #[error("bad DSN: {0}")]
    Dsn(#[from] DsnError),
    /// A path given on the command line does not exist.
    #[error("{0}: no such file or directory")]
    NotFound(String),
    /// The command line was understood but cannot be acted on (e.g. `drill` without a game).
    #[error("{0}")]
    Usage(String),
    /// No DSN from `--dsn` or `SENTRY_DSN`.
    #[error("no DSN: pass --dsn or set SENTRY_DSN")]
    NoDsn,
    /// A report could not be queued in the outbox.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// No Vulkan loader or driver, or the instance could not be created.
    #[error("{0}")]
    Vulkan(String),
    /// A GPU could not be probed.
    #[error("{gpu}: {source}")]
    Probe {
        /// The GPU's name.
        gpu: String,
        /// What failed.
        source: ProbeError,
    },
    /// The game could not be started, or the layer could not be installed.
    #[error("{0}")]
    Io(String),
}

impl CliError {
    /// 2 for bad input (what the user can fix on the command line or in the file), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Report(_) | Self::Dsn(_) | Self::NotFound(_) | Self::Usage(_) | Self::NoDsn => 2,
            Self::Outbox(_) | Self::Vulkan(_) | Self::Probe { .. } | Self::Io(_) => 1,
        }
    }
}

/// What every subcommand returns: its exit code, or the one-line error.
pub type CliResult = Result<std::process::ExitCode, CliError>;
