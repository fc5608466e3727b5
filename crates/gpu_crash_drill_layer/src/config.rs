//! The drill configuration, read from the environment when an instance is created.
//!
//! Bad values never stop the application: each one logs a single `[gpu_crash_drill]` line and falls
//! back to "no fault" (scenario) or the documented default (other knobs).

use std::path::PathBuf;

use crate::log::log_line;

/// Which fault to inject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scenario {
    /// A queue submission after the target was unbound loses the device; the fault address lies inside
    /// the target's freed range: `offset` bytes past its base (the most recently unbound object named
    /// `label`), or a point of it that no live object covers (also when `offset` is not inside it).
    UseAfterFree {
        label: Option<String>,
        offset: Option<u64>,
    },
    /// The fault address is the first byte past the end of a live target.
    OutOfBounds(Option<String>),
    /// The fault address is inside a live target (a read fault): `offset` bytes past its base, or its
    /// middle (also when `offset` is not inside it).
    InBounds {
        label: Option<String>,
        offset: Option<u64>,
    },
    /// A submission never completes; the device is not lost.
    Hang,
    /// The first command buffer ended after the threshold makes the GPU wait this many milliseconds
    /// (a `vkCmdWaitEvents` the layer releases from a host thread); then everything completes.
    Stall(u64),
    /// Right after the application begins the debug label with this name (`vkCmdBeginDebugUtilsLabelEXT`),
    /// the GPU waits on a layer event that is never set: it hangs inside that labelled region.
    /// `<label>#<n>` picks the n-th such label after the threshold (e.g. the second camera's pass).
    HangInPass(String),
    /// Right after a primary command buffer binds (`vkCmdBindPipeline`) a pipeline whose debug name
    /// (`vkSetDebugUtilsObjectNameEXT`; wgpu names each `VkPipeline` with its label) is this, the GPU
    /// waits on a layer event that is never set: it hangs before the first dispatch or draw with that
    /// pipeline (inside a render pass instance: right after the instance ends). `<label>#<n>` picks
    /// the n-th command buffer after the threshold that binds it.
    HangInPipeline(String),
    /// `VK_KHR_device_fault` only: once the live object named `label` is bound (after the
    /// threshold), `count` masked, non-fatal fault reports (a read inside it, `DEVICE_LOST` clear)
    /// are queued for `vkGetDeviceFaultReportsKHR` at once, and the device keeps working.
    Masked { label: String, count: u32 },
}

/// Most reports one `masked:<label>x<N>` queues (a storm test needs about a thousand).
pub(crate) const MAX_MASKED_COUNT: u32 = 100_000;

impl Scenario {
    /// The label the scenario is restricted to, if any.
    pub(crate) fn label(&self) -> Option<&str> {
        match self {
            Scenario::UseAfterFree { label: l, .. }
            | Scenario::OutOfBounds(l)
            | Scenario::InBounds { label: l, .. } => l.as_deref(),
            Scenario::Masked { label, .. } => Some(label),
            Scenario::Hang
            | Scenario::Stall(_)
            | Scenario::HangInPass(_)
            | Scenario::HangInPipeline(_) => None,
        }
    }

    /// The scenario as written in `GPU_CRASH_DRILL`, argument included.
    pub(crate) fn display(&self) -> String {
        match self {
            Scenario::Stall(ms) => format!("stall:{ms}"),
            Scenario::HangInPass(label) => format!("hang-in-pass:{label}"),
            Scenario::HangInPipeline(label) => format!("hang-in-pipeline:{label}"),
            Scenario::Masked { label, count: 1 } => format!("masked:{label}"),
            Scenario::Masked { label, count } => format!("masked:{label}x{count}"),
            Scenario::InBounds {
                label: Some(label),
                offset: Some(offset),
            }
            | Scenario::UseAfterFree {
                label: Some(label),
                offset: Some(offset),
            } => format!("{}:{label}@{offset}", self.name()),
            s => match s.label() {
                Some(l) => format!("{}:{l}", s.name()),
                None => s.name().to_string(),
            },
        }
    }

    /// True for the scenarios that fault at an object's address (`use-after-free`, `out-of-bounds`,
    /// `in-bounds`): the ones `GPU_CRASH_DRILL_AIM` can aim.
    pub(crate) fn is_memory(&self) -> bool {
        matches!(
            self,
            Scenario::UseAfterFree { .. } | Scenario::OutOfBounds(_) | Scenario::InBounds { .. }
        )
    }

    /// True for scenarios that record a `vkCmdWaitEvents` on a layer-owned event into an
    /// application command buffer.
    pub(crate) fn records_wait(&self) -> bool {
        matches!(
            self,
            Scenario::Stall(_) | Scenario::HangInPass(_) | Scenario::HangInPipeline(_)
        )
    }

    /// True for the scenarios that hang the GPU (`hang`, `hang-in-pass`, `hang-in-pipeline`): a
    /// watchdog timeout, which `GPU_CRASH_DRILL_LOSS=after-hang` can turn into a loss.
    pub(crate) fn is_hang(&self) -> bool {
        matches!(
            self,
            Scenario::Hang | Scenario::HangInPass(_) | Scenario::HangInPipeline(_)
        )
    }

    /// Stable name, as written in `GPU_CRASH_DRILL`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Scenario::UseAfterFree { .. } => "use-after-free",
            Scenario::OutOfBounds(_) => "out-of-bounds",
            Scenario::InBounds { .. } => "in-bounds",
            Scenario::Hang => "hang",
            Scenario::Stall(_) => "stall",
            Scenario::HangInPass(_) => "hang-in-pass",
            Scenario::HangInPipeline(_) => "hang-in-pipeline",
            Scenario::Masked { .. } => "masked",
        }
    }

    /// Code put into `vendorFaultCode` so tools can tell the scenarios apart.
    pub(crate) fn vendor_code(&self) -> u64 {
        match self {
            Scenario::UseAfterFree { .. } => 1,
            Scenario::OutOfBounds(_) => 2,
            Scenario::InBounds { .. } => 3,
            Scenario::Hang => 4,
            Scenario::HangInPass(_) => 5,
            Scenario::Stall(_) => 6,
            Scenario::Masked { .. } => 8,
            Scenario::HangInPipeline(_) => 9,
        }
    }
}

/// `hang-in-pass:<label>[#<n>]` and `hang-in-pipeline:<label>[#<n>]`: the label, and which of its
/// occurrences after the threshold hangs (from 1; two cameras begin the same pass label once each per
/// frame, in camera order). For `hang-in-pipeline` an occurrence is a command buffer that binds the
/// pipeline (a pass binds it again for each batch of draws).
pub(crate) fn hang_target(arg: &str) -> (&str, u32) {
    match arg.rsplit_once('#') {
        Some((label, n)) if !label.is_empty() => match n.parse::<u32>() {
            Ok(n) if n >= 1 => (label, n),
            _ => (arg, 1),
        },
        _ => (arg, 1),
    }
}

/// `masked:<label>[x<N>]`: the label and how many reports (1 without `x<N>`). Debug names may
/// contain `x`, so only a last `x` followed by digits (and preceded by a non-empty label) separates;
/// otherwise it all is the label (`masked:box2` is one report on "box2"; write `masked:box2x1` for
/// a label that itself ends in `x<digits>`). `None` for a count of 0 or over [`MAX_MASKED_COUNT`].
pub(crate) fn masked_target(arg: &str) -> Option<(&str, u32)> {
    match arg.rsplit_once('x') {
        Some((label, n))
            if !label.is_empty() && !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) =>
        {
            match n.parse::<u32>() {
                Ok(count) if (1..=MAX_MASKED_COUNT).contains(&count) => Some((label, count)),
                _ => None,
            }
        }
        _ => Some((arg, 1)),
    }
}

/// `in-bounds:<label>[@<offset>]` and `use-after-free:<label>[@<offset>]`: the label, and the byte
/// offset from the object's base the fault address is at (decimal or `0x` hex). Debug names may contain '@', so only a last '@' followed by a
/// number (and preceded by a non-empty label) separates them; otherwise it all is the label.
pub(crate) fn in_bounds_target(arg: &str) -> (&str, Option<u64>) {
    match arg.rsplit_once('@') {
        Some((label, n)) if !label.is_empty() => match parse_offset(n) {
            Some(offset) => (label, Some(offset)),
            None => (arg, None),
        },
        _ => (arg, None),
    }
}

/// The memory scenario `name` (`use-after-free`, `out-of-bounds` or `in-bounds`) with `arg`, what
/// follows `<name>:` in `GPU_CRASH_DRILL`: `<label>[@<offset>]` for the two that take an offset, the
/// label (`@` and all) for `out-of-bounds`. `None` for any other name.
pub(crate) fn memory_scenario(name: &str, arg: Option<&str>) -> Option<Scenario> {
    let (label, offset) = match arg.map(in_bounds_target) {
        Some((l, offset)) => (Some(l.to_string()), offset),
        None => (None, None),
    };
    match name {
        "use-after-free" => Some(Scenario::UseAfterFree { label, offset }),
        "in-bounds" => Some(Scenario::InBounds { label, offset }),
        "out-of-bounds" => Some(Scenario::OutOfBounds(arg.map(String::from))),
        _ => None,
    }
}

/// What the first line of a `GPU_CRASH_DRILL_AIM` file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AimLine {
    /// No first line yet (an empty file, or one whose first line is empty): keep waiting, silently.
    NotYet,
    /// A first line without a label (blanks only, or `@<offset>`): keep waiting; this is the line.
    NoLabel(String),
    /// `scenario` aimed at the line's `<label>[@<offset>]`.
    Aim(Scenario),
}

/// Reads the aim of memory scenario `scenario` from `content`, an aim file's text: its first line,
/// without surrounding blanks, is the scenario's argument as `GPU_CRASH_DRILL=<name>:<argument>` takes
/// it (`<label>[@<offset>]`, parsed by [`memory_scenario`]) and replaces its label and offset.
pub(crate) fn aim_line(scenario: &Scenario, content: &str) -> AimLine {
    let first = content.split('\n').next().unwrap_or_default();
    let first = first.strip_suffix('\r').unwrap_or(first);
    if first.is_empty() {
        return AimLine::NotYet;
    }
    let arg = first.trim();
    // `@<offset>` alone would be a label in `GPU_CRASH_DRILL`, but in an aim it is an offset whose
    // label the tool forgot.
    if arg.is_empty()
        || arg
            .strip_prefix('@')
            .is_some_and(|n| parse_offset(n).is_some())
    {
        return AimLine::NoLabel(first.to_string());
    }
    match memory_scenario(scenario.name(), Some(arg)) {
        Some(aimed) => AimLine::Aim(aimed),
        None => AimLine::NoLabel(first.to_string()),
    }
}

/// Digits only: `str::parse` would also take a sign (`+5`), which no offset is written with.
fn parse_offset(s: &str) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Which fault extension the layer provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultApi {
    /// `VK_EXT_device_fault`.
    Ext,
    /// `VK_KHR_device_fault` + `VK_KHR_shader_abort`.
    Khr,
}

/// When the drill loses the device (`GPU_CRASH_DRILL_LOSS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LossMode {
    /// The triggering submission returns `VK_ERROR_DEVICE_LOST`.
    AtFault,
    /// `use-after-free` only: the GPU stops at the triggering submission (it and all later ones are
    /// swallowed); the device is lost at the first submission after a bind covers the fault address
    /// again.
    AfterRebind,
    /// `hang` / `hang-in-pass` / `hang-in-pipeline` only: the hang happens as without it, then `ms` milliseconds later
    /// the device is lost, as when a driver's watchdog resets a hung GPU (amdgpu after its lockup
    /// timeout). With `label`, the loss also reports a read fault inside the live object of that
    /// debug name, like the fault address such a reset may come with.
    AfterHang { ms: u64, label: Option<String> },
}

/// Everything the environment configures.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub scenario: Option<Scenario>,
    pub api: FaultApi,
    /// Number of submissions that pass before a fault may trigger.
    pub after: u64,
    /// `addressPrecision` of reported addresses (a power of two).
    pub precision: u64,
    /// `GPU_CRASH_DRILL_LOSS`: `after-rebind` applies to `use-after-free`, `after-hang` to the
    /// hang scenarios; parsing drops a mode that does not apply to the scenario.
    pub loss: LossMode,
    /// `GPU_CRASH_DRILL_AIM`: a memory scenario fires only once this file's first line gave it its
    /// `<label>[@<offset>]` (see [`aim_line`]); `None` for the other scenarios.
    pub aim_file: Option<PathBuf>,
    /// `GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS=<ms>[:hung|:lost]`: fault queries
    /// (`vkGetDeviceFaultInfoEXT`, `vkGetDeviceFaultReportsKHR`) sleep this long in their first call, as a driver
    /// stuck in its fault query does (a reporter must not stall the game behind it); with `:hung`
    /// only while the device is not lost (a hang report's query), with `:lost` only once it is.
    pub fault_query_delay: Option<QueryDelay>,
    /// `GPU_CRASH_DRILL_MEMORY_BUDGET=<bytes>` (decimal or `0x` hex): where the layer provides
    /// `VK_EXT_memory_budget`, each heap's budget is at most this many bytes (else the heap's
    /// size), so an application's real usage can pass 95% of it without filling the machine.
    pub memory_budget: Option<u64>,
}

/// A slow fault query (see [`Config::fault_query_delay`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueryDelay {
    pub delay: std::time::Duration,
    /// `Some(lost)`: only when the device's lost state is `lost`; `None`: always.
    pub when_lost: Option<bool>,
}

pub(crate) const DEFAULT_AFTER: u64 = 30;
pub(crate) const DEFAULT_PRECISION: u64 = 4096;

impl Config {
    /// Reads `GPU_CRASH_DRILL`, `GPU_CRASH_DRILL_API`, `GPU_CRASH_DRILL_AFTER`,
    /// `GPU_CRASH_DRILL_PRECISION`, `GPU_CRASH_DRILL_LOSS`, `GPU_CRASH_DRILL_AIM`,
    /// `GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS`, `GPU_CRASH_DRILL_MEMORY_BUDGET`.
    pub(crate) fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Self::parse(
            var("GPU_CRASH_DRILL").as_deref(),
            var("GPU_CRASH_DRILL_API").as_deref(),
            var("GPU_CRASH_DRILL_AFTER").as_deref(),
            var("GPU_CRASH_DRILL_PRECISION").as_deref(),
            var("GPU_CRASH_DRILL_LOSS").as_deref(),
            &mut |line| log_line(line),
        )
        .with_aim_file(var("GPU_CRASH_DRILL_AIM").as_deref(), &mut |line| {
            log_line(line)
        })
        .with_fault_query_delay(
            var("GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS").as_deref(),
            &mut |line| log_line(line),
        )
        .with_memory_budget(
            var("GPU_CRASH_DRILL_MEMORY_BUDGET").as_deref(),
            &mut |line| log_line(line),
        )
    }

    /// Sets `GPU_CRASH_DRILL_MEMORY_BUDGET` (bytes, decimal or `0x` hex); a bad value logs one line
    /// and is ignored.
    pub(crate) fn with_memory_budget(
        mut self,
        bytes: Option<&str>,
        log: &mut dyn FnMut(&str),
    ) -> Self {
        self.memory_budget = bytes.and_then(|value| {
            let parsed = parse_offset(value.trim());
            if parsed.is_none() {
                log(&format!(
                    "GPU_CRASH_DRILL_MEMORY_BUDGET={value}: expected bytes (decimal or 0x hex); \
                     ignored"
                ));
            }
            parsed
        });
        self
    }

    /// Sets `GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS` (milliseconds); a bad value logs one line and is
    /// ignored.
    pub(crate) fn with_fault_query_delay(
        mut self,
        ms: Option<&str>,
        log: &mut dyn FnMut(&str),
    ) -> Self {
        self.fault_query_delay = ms.and_then(|value| {
            let (ms, when) = match value.trim().split_once(':') {
                Some((ms, when)) => (ms, Some(when.trim().to_ascii_lowercase())),
                None => (value.trim(), None),
            };
            let when_lost = match when.as_deref() {
                None => Some(None),
                Some("hung") => Some(Some(false)),
                Some("lost") => Some(Some(true)),
                Some(_) => None,
            };
            match (ms.parse::<u64>(), when_lost) {
                (Ok(ms), Some(when_lost)) => Some(QueryDelay {
                    delay: std::time::Duration::from_millis(ms),
                    when_lost,
                }),
                _ => {
                    log(&format!(
                        "GPU_CRASH_DRILL_FAULT_QUERY_DELAY_MS={value}: expected <ms>, <ms>:hung or \
                         <ms>:lost; ignored"
                    ));
                    None
                }
            }
        });
        self
    }

    /// Sets `GPU_CRASH_DRILL_AIM` (a path, taken as written). Only memory scenarios can be aimed: with
    /// another one it logs one line and is ignored; without a scenario it does nothing.
    pub(crate) fn with_aim_file(mut self, path: Option<&str>, log: &mut dyn FnMut(&str)) -> Self {
        self.aim_file = match (path, &self.scenario) {
            (Some(path), Some(s)) if !s.is_memory() => {
                log(&format!(
                    "GPU_CRASH_DRILL_AIM={path} only applies to use-after-free, out-of-bounds and \
                     in-bounds, not {}; ignored",
                    s.name()
                ));
                None
            }
            (path, _) => path.map(PathBuf::from),
        };
        self
    }

    /// Parses the five values; `log` receives one line per bad value.
    pub(crate) fn parse(
        scenario: Option<&str>,
        api: Option<&str>,
        after: Option<&str>,
        precision: Option<&str>,
        loss: Option<&str>,
        log: &mut dyn FnMut(&str),
    ) -> Self {
        let scenario = scenario.and_then(|s| {
            let s = s.trim();
            let (name, label) = match s.split_once(':') {
                Some((n, l)) if !l.is_empty() => (n, Some(l.to_string())),
                Some((n, _)) => (n, None),
                None => (s, None),
            };
            match name.to_ascii_lowercase().as_str() {
                n @ ("use-after-free" | "out-of-bounds" | "in-bounds") => {
                    memory_scenario(n, label.as_deref())
                }
                "hang" if label.is_none() => Some(Scenario::Hang),
                "hang" => {
                    log(&format!(
                        "GPU_CRASH_DRILL={s}: `hang` takes no label; no fault will be injected"
                    ));
                    None
                }
                "hang-in-pass" => match label {
                    Some(l) => Some(Scenario::HangInPass(l)),
                    None => {
                        log(&format!(
                            "GPU_CRASH_DRILL={s}: `hang-in-pass` needs the debug label of the pass \
                             (hang-in-pass:<label>); no fault will be injected"
                        ));
                        None
                    }
                },
                "hang-in-pipeline" => match label {
                    Some(l) => Some(Scenario::HangInPipeline(l)),
                    None => {
                        log(&format!(
                            "GPU_CRASH_DRILL={s}: `hang-in-pipeline` needs the debug name of the \
                             pipeline (hang-in-pipeline:<label>); no fault will be injected"
                        ));
                        None
                    }
                },
                "masked" => match label.as_deref().map(masked_target) {
                    Some(Some((label, count))) => Some(Scenario::Masked {
                        label: label.to_string(),
                        count,
                    }),
                    Some(None) => {
                        log(&format!(
                            "GPU_CRASH_DRILL={s}: `masked` takes 1 to {MAX_MASKED_COUNT} reports \
                             (masked:<label>[x<N>]); no fault will be injected"
                        ));
                        None
                    }
                    None => {
                        log(&format!(
                            "GPU_CRASH_DRILL={s}: `masked` needs the debug name of a live object \
                             (masked:<label>[x<N>]); no fault will be injected"
                        ));
                        None
                    }
                },
                "stall" => match label.as_deref().map(|ms| ms.trim().parse::<u64>()) {
                    Some(Ok(ms)) => Some(Scenario::Stall(ms)),
                    _ => {
                        log(&format!(
                            "GPU_CRASH_DRILL={s}: `stall` needs a duration in milliseconds \
                             (stall:<ms>); no fault will be injected"
                        ));
                        None
                    }
                },
                _ => {
                    log(&format!(
                        "GPU_CRASH_DRILL={s}: unknown scenario (expected \
                         use-after-free[:label[@offset]], out-of-bounds[:label], in-bounds[:label[@offset]], hang, stall:<ms>, \
                         hang-in-pass:<label>, hang-in-pipeline:<label> or masked:<label>[x<N>]); \
                         no fault will be injected"
                    ));
                    None
                }
            }
        });
        let api = match api.map(|a| a.trim().to_ascii_lowercase()) {
            None => FaultApi::Ext,
            Some(a) if a == "ext" => FaultApi::Ext,
            Some(a) if a == "khr" => FaultApi::Khr,
            Some(a) => {
                log(&format!(
                    "GPU_CRASH_DRILL_API={a}: expected `ext` or `khr`; using `ext`"
                ));
                FaultApi::Ext
            }
        };
        // Masked reports exist only in `VK_KHR_device_fault` (`VK_EXT_device_fault` reports a loss).
        let scenario = match scenario {
            Some(Scenario::Masked { .. }) if api != FaultApi::Khr => {
                log(
                    "GPU_CRASH_DRILL=masked needs GPU_CRASH_DRILL_API=khr (masked, non-fatal reports \
                     are VK_KHR_device_fault's); no fault will be injected",
                );
                None
            }
            s => s,
        };
        let after = match after.map(|a| a.trim().parse::<u64>()) {
            None => DEFAULT_AFTER,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                log(&format!(
                    "GPU_CRASH_DRILL_AFTER={}: not a number of submissions; using {DEFAULT_AFTER}",
                    after.unwrap_or_default()
                ));
                DEFAULT_AFTER
            }
        };
        let precision = match precision.map(|p| p.trim().parse::<u64>()) {
            None => DEFAULT_PRECISION,
            Some(Ok(p)) if p.is_power_of_two() => p,
            Some(_) => {
                log(&format!(
                    "GPU_CRASH_DRILL_PRECISION={}: must be a power of two in bytes; using {DEFAULT_PRECISION}",
                    precision.unwrap_or_default()
                ));
                DEFAULT_PRECISION
            }
        };
        let loss = match loss {
            None => LossMode::AtFault,
            Some(l) => parse_loss(l.trim(), scenario.as_ref(), log),
        };
        Self {
            scenario,
            api,
            after,
            precision,
            loss,
            aim_file: None,
            fault_query_delay: None,
            memory_budget: None,
        }
    }
}

/// The scenarios `after-hang` applies to, as its log lines name them.
const HANG_SCENARIOS: &str = "hang, hang-in-pass and hang-in-pipeline";

/// Parses `GPU_CRASH_DRILL_LOSS` for `scenario` (`None`: no fault, any mode is accepted); a bad
/// value, or a mode for another scenario, logs one line and falls back to `at-fault`.
fn parse_loss(value: &str, scenario: Option<&Scenario>, log: &mut dyn FnMut(&str)) -> LossMode {
    // Only the mode's name is case-insensitive: an `after-hang` label is a debug name, kept as written.
    let (name, arg) = match value.split_once(':') {
        Some((n, a)) => (n.to_ascii_lowercase(), Some(a)),
        None => (value.to_ascii_lowercase(), None),
    };
    let (mode, applies_to) = match (name.as_str(), arg) {
        ("at-fault", None) => return LossMode::AtFault,
        ("after-rebind", None) => (LossMode::AfterRebind, "use-after-free"),
        ("after-hang", Some(arg)) => {
            let (ms, label) = match arg.split_once('@') {
                Some((ms, label)) => (ms, Some(label)),
                None => (arg, None),
            };
            match (ms.trim().parse::<u64>(), label) {
                (Ok(ms), None) => (LossMode::AfterHang { ms, label: None }, HANG_SCENARIOS),
                (Ok(ms), Some(l)) if !l.is_empty() => (
                    LossMode::AfterHang {
                        ms,
                        label: Some(l.to_string()),
                    },
                    HANG_SCENARIOS,
                ),
                _ => {
                    log(&format!(
                        "GPU_CRASH_DRILL_LOSS={value}: `after-hang` needs a delay in milliseconds and \
                         optionally a label (after-hang:<ms>[@<label>]); using `at-fault`"
                    ));
                    return LossMode::AtFault;
                }
            }
        }
        _ => {
            log(&format!(
                "GPU_CRASH_DRILL_LOSS={value}: expected `at-fault`, `after-rebind` or \
                 `after-hang:<ms>[@<label>]`; using `at-fault`"
            ));
            return LossMode::AtFault;
        }
    };
    let applies = match (&mode, scenario) {
        (_, None) => true,
        (LossMode::AfterRebind, Some(s)) => matches!(s, Scenario::UseAfterFree { .. }),
        (_, Some(s)) => s.is_hang(),
    };
    if applies {
        return mode;
    }
    log(&format!(
        "GPU_CRASH_DRILL_LOSS={value} only applies to {applies_to}, not {}; ignored",
        scenario.map_or("", Scenario::name)
    ));
    LossMode::AtFault
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_query_delay_parses_its_three_forms_and_rejects_the_rest() {
        let parse = |v: &str| {
            let mut lines = Vec::new();
            let config = Config::parse(None, None, None, None, None, &mut |_| {})
                .with_fault_query_delay(Some(v), &mut |l| lines.push(l.to_owned()));
            (config.fault_query_delay, lines.len())
        };
        let ms = std::time::Duration::from_millis;
        let delay = |d, when_lost| {
            Some(QueryDelay {
                delay: ms(d),
                when_lost,
            })
        };
        assert_eq!(parse("2000"), (delay(2000, None), 0));
        assert_eq!(parse("1500:hung"), (delay(1500, Some(false)), 0));
        assert_eq!(parse("10:LOST"), (delay(10, Some(true)), 0));
        assert_eq!(parse("soon"), (None, 1));
        assert_eq!(parse("10:later"), (None, 1));
    }

    #[test]
    fn memory_budget_takes_bytes_and_ignores_the_rest() {
        let parse = |v: &str| {
            let mut lines = Vec::new();
            let config = Config::parse(None, None, None, None, None, &mut |_| {})
                .with_memory_budget(Some(v), &mut |l| lines.push(l.to_owned()));
            (config.memory_budget, lines.len())
        };
        assert_eq!(parse("1048576"), (Some(1 << 20), 0));
        assert_eq!(parse(" 0x100000 "), (Some(1 << 20), 0));
        assert_eq!(parse("1 MiB"), (None, 1));
        assert_eq!(parse("-5"), (None, 1));
    }

    fn parse(
        s: Option<&str>,
        api: Option<&str>,
        after: Option<&str>,
        p: Option<&str>,
    ) -> (Config, Vec<String>) {
        let mut lines = Vec::new();
        let c = Config::parse(s, api, after, p, None, &mut |l| lines.push(l.to_string()));
        (c, lines)
    }

    #[test]
    fn defaults() {
        let (c, lines) = parse(None, None, None, None);
        assert_eq!(c.scenario, None);
        assert_eq!(c.api, FaultApi::Ext);
        assert_eq!(c.after, 30);
        assert_eq!(c.precision, 4096);
        assert_eq!(c.loss, LossMode::AtFault);
        assert!(lines.is_empty());
    }

    #[test]
    fn loss_modes() {
        let loss = |scenario: &str, loss: &str| {
            let mut lines = Vec::new();
            let c = Config::parse(Some(scenario), None, None, None, Some(loss), &mut |l| {
                lines.push(l.to_string())
            });
            (c.loss, lines)
        };
        assert_eq!(
            loss("use-after-free:x", "after-rebind"),
            (LossMode::AfterRebind, vec![])
        );
        assert_eq!(
            loss("use-after-free", "at-fault"),
            (LossMode::AtFault, vec![])
        );
        let (mode, lines) = loss("out-of-bounds", "after-rebind");
        assert_eq!(mode, LossMode::AtFault);
        assert!(
            lines.len() == 1 && lines[0].contains("only applies"),
            "{lines:?}"
        );
        let (mode, lines) = loss("use-after-free", "later");
        assert_eq!(mode, LossMode::AtFault);
        assert!(
            lines.len() == 1 && lines[0].contains("expected"),
            "{lines:?}"
        );
    }

    #[test]
    fn after_hang_takes_a_delay_and_an_optional_label() {
        let loss = |scenario: Option<&str>, loss: &str| {
            let mut lines = Vec::new();
            let c = Config::parse(scenario, None, None, None, Some(loss), &mut |l| {
                lines.push(l.to_string())
            });
            (c.loss, lines)
        };
        let after = |ms, label: Option<&str>| LossMode::AfterHang {
            ms,
            label: label.map(String::from),
        };
        assert_eq!(
            loss(Some("hang"), "after-hang:300"),
            (after(300, None), vec![])
        );
        // The label is a debug name: kept as written (spaces, case, '@' and ':' included).
        assert_eq!(
            loss(Some("hang"), " After-Hang:300@My buffer "),
            (after(300, Some("My buffer")), vec![])
        );
        assert_eq!(
            loss(Some("hang-in-pass:main pass"), "after-hang: 0 @a@b:c"),
            (after(0, Some("a@b:c")), vec![])
        );
        assert_eq!(
            loss(
                Some("hang-in-pipeline:main_opaque_pass_3d"),
                "after-hang:300@a"
            ),
            (after(300, Some("a")), vec![])
        );
        assert_eq!(loss(None, "after-hang:5"), (after(5, None), vec![]));
        for bad in [
            "after-hang",
            "after-hang:",
            "after-hang:soon",
            "after-hang:-1",
            "after-hang:1.5",
            "after-hang:@label",
            "after-hang:300@",
        ] {
            let (mode, lines) = loss(Some("hang"), bad);
            assert_eq!(mode, LossMode::AtFault, "{bad}");
            assert!(
                lines.len() == 1 && lines[0].contains("after-hang:<ms>[@<label>]"),
                "{bad}: {lines:?}"
            );
        }
        for other in ["use-after-free", "in-bounds:x", "stall:100"] {
            let (mode, lines) = loss(Some(other), "after-hang:300@x");
            assert_eq!(mode, LossMode::AtFault, "{other}");
            assert!(
                lines.len() == 1
                    && lines[0]
                        .contains("only applies to hang, hang-in-pass and hang-in-pipeline, not"),
                "{other}: {lines:?}"
            );
        }
        // `after-rebind` stays a use-after-free mode.
        let (mode, lines) = loss(Some("hang"), "after-rebind");
        assert_eq!(mode, LossMode::AtFault);
        assert!(
            lines.len() == 1 && lines[0].contains("only applies to use-after-free"),
            "{lines:?}"
        );
    }

    #[test]
    fn scenarios_and_labels() {
        let (c, _) = parse(
            Some("use-after-free:particles"),
            Some("khr"),
            Some("3"),
            Some("256"),
        );
        assert_eq!(
            c.scenario,
            Some(Scenario::UseAfterFree {
                label: Some("particles".into()),
                offset: None
            })
        );
        assert_eq!(c.api, FaultApi::Khr);
        assert_eq!((c.after, c.precision), (3, 256));
        assert_eq!(
            parse(Some("hang"), None, None, None).0.scenario,
            Some(Scenario::Hang)
        );
        assert_eq!(
            parse(Some("in-bounds"), None, None, None).0.scenario,
            Some(Scenario::InBounds {
                label: None,
                offset: None
            })
        );
        let (c, lines) = parse(Some("stall:300"), None, None, None);
        assert_eq!(c.scenario, Some(Scenario::Stall(300)));
        assert_eq!(c.scenario.unwrap().display(), "stall:300");
        assert!(lines.is_empty());
        let (c, lines) = parse(Some("hang-in-pass:main pass:opaque"), None, None, None);
        assert_eq!(
            c.scenario,
            Some(Scenario::HangInPass("main pass:opaque".into()))
        );
        assert!(lines.is_empty());
        let (c, lines) = parse(Some("Hang-In-Pipeline:sky pipeline#2"), None, None, None);
        let scenario = c.scenario.unwrap();
        assert_eq!(scenario, Scenario::HangInPipeline("sky pipeline#2".into()));
        assert_eq!(scenario.display(), "hang-in-pipeline:sky pipeline#2");
        assert_eq!(
            (scenario.name(), scenario.vendor_code(), scenario.label()),
            ("hang-in-pipeline", 9, None)
        );
        assert!(scenario.records_wait() && scenario.is_hang() && !scenario.is_memory());
        assert!(lines.is_empty());
        // Labels may contain colons (wgpu labels are free text).
        assert_eq!(
            parse(Some("out-of-bounds:a:b"), None, None, None)
                .0
                .scenario,
            Some(Scenario::OutOfBounds(Some("a:b".into())))
        );
    }

    #[test]
    fn in_bounds_takes_an_optional_offset_after_the_last_at() {
        let in_bounds = |s: &str| {
            let (c, lines) = parse(Some(s), None, None, None);
            assert!(lines.is_empty(), "{s}: {lines:?}");
            match c.scenario {
                Some(Scenario::InBounds { label, offset }) => (label, offset),
                other => panic!("{s}: {other:?}"),
            }
        };
        let at = |label: &str, offset: Option<u64>| (Some(label.to_string()), offset);
        assert_eq!(in_bounds("in-bounds:keep@20"), at("keep", Some(20)));
        assert_eq!(in_bounds("in-bounds:keep@0x1c"), at("keep", Some(0x1c)));
        assert_eq!(in_bounds("in-bounds:keep@0X1C"), at("keep", Some(0x1c)));
        assert_eq!(in_bounds("in-bounds:keep@0"), at("keep", Some(0)));
        assert_eq!(in_bounds("in-bounds:keep"), at("keep", None));
        assert_eq!(in_bounds("in-bounds"), (None, None));
        // A debug name may contain '@' (and ':'): only the last '@' followed by a number separates.
        assert_eq!(
            in_bounds("in-bounds:general mesh slab 3 (vertex buffer)@60"),
            at("general mesh slab 3 (vertex buffer)", Some(60))
        );
        assert_eq!(in_bounds("in-bounds:a@b:c@0x40"), at("a@b:c", Some(0x40)));
        assert_eq!(in_bounds("in-bounds:user@host"), at("user@host", None));
        assert_eq!(in_bounds("in-bounds:a@1@b"), at("a@1@b", None));
        // What follows the last '@' is not an offset: it all is the label, and nothing is logged.
        for bad in [
            "keep@",
            "keep@x",
            "keep@-4",
            "keep@+4",
            "keep@1.5",
            "keep@ 4",
            "keep@0x",
            "keep@0xg",
            "keep@18446744073709551616",
            "@4",
        ] {
            assert_eq!(
                in_bounds(&format!("in-bounds:{bad}")),
                at(bad, None),
                "{bad}"
            );
        }
        let (c, _) = parse(Some("in-bounds:a@b@0x10"), None, None, None);
        assert_eq!(c.scenario.unwrap().display(), "in-bounds:a@b@16");
        // Other scenarios keep '@' in their label.
        assert_eq!(
            parse(Some("out-of-bounds:keep@4"), None, None, None)
                .0
                .scenario,
            Some(Scenario::OutOfBounds(Some("keep@4".into())))
        );
    }

    #[test]
    fn use_after_free_takes_an_optional_offset_like_in_bounds() {
        let uaf = |s: &str| {
            let (c, lines) = parse(Some(s), None, None, None);
            assert!(lines.is_empty(), "{s}: {lines:?}");
            match c.scenario {
                Some(Scenario::UseAfterFree { label, offset }) => (label, offset),
                other => panic!("{s}: {other:?}"),
            }
        };
        let at = |label: &str, offset: Option<u64>| (Some(label.to_string()), offset);
        assert_eq!(uaf("use-after-free:victim@20"), at("victim", Some(20)));
        assert_eq!(uaf("use-after-free:victim@0x1C"), at("victim", Some(0x1c)));
        assert_eq!(uaf("use-after-free:victim"), at("victim", None));
        assert_eq!(uaf("use-after-free"), (None, None));
        assert_eq!(
            uaf("use-after-free:frame@uniforms@0x40"),
            at("frame@uniforms", Some(0x40))
        );
        for bad in ["user@host", "keep@", "keep@-4", "@4", "a@1@b"] {
            assert_eq!(
                uaf(&format!("use-after-free:{bad}")),
                at(bad, None),
                "{bad}"
            );
        }
        let display = |s: &str| {
            parse(Some(s), None, None, None)
                .0
                .scenario
                .unwrap()
                .display()
        };
        assert_eq!(display("use-after-free:a@b@0x10"), "use-after-free:a@b@16");
        assert_eq!(display("use-after-free:a@b"), "use-after-free:a@b");
        assert_eq!(display("use-after-free"), "use-after-free");
    }

    #[test]
    fn the_aim_file_applies_to_memory_scenarios_only() {
        let aim = |scenario: &str| {
            let mut lines = Vec::new();
            let c = parse(Some(scenario), None, None, None)
                .0
                .with_aim_file(Some("/tmp/drill aim"), &mut |l| lines.push(l.to_string()));
            (c.aim_file, lines)
        };
        for memory in ["use-after-free", "out-of-bounds:x", "in-bounds:y@4"] {
            assert_eq!(
                aim(memory),
                (Some(PathBuf::from("/tmp/drill aim")), vec![]),
                "{memory}"
            );
        }
        for other in [
            "hang",
            "stall:100",
            "hang-in-pass:main pass",
            "hang-in-pipeline:sky",
        ] {
            let (file, lines) = aim(other);
            assert_eq!(file, None, "{other}");
            assert!(
                lines.len() == 1
                    && lines[0].contains("GPU_CRASH_DRILL_AIM=/tmp/drill aim only applies to")
                    && lines[0].ends_with("; ignored"),
                "{other}: {lines:?}"
            );
        }
        let (c, _) = parse(Some("hang"), None, None, None);
        assert_eq!(c.with_aim_file(None, &mut |_| panic!()).aim_file, None);
        assert_eq!(parse(None, None, None, None).0.aim_file, None);
    }

    #[test]
    fn an_aim_line_replaces_label_and_offset() {
        let scenario = |s: &str| parse(Some(s), None, None, None).0.scenario.unwrap();
        let aimed = |s: &str, content: &str| match aim_line(&scenario(s), content) {
            AimLine::Aim(a) => a,
            other => panic!("{s} / {content:?}: {other:?}"),
        };
        // The first line only, without surrounding blanks or a CR; the same syntax as the scenario.
        assert_eq!(
            aimed(
                "in-bounds:keep@4",
                "general mesh slab 3 (vertex buffer)@0x1e0\r\nnext\n"
            ),
            scenario("in-bounds:general mesh slab 3 (vertex buffer)@0x1e0")
        );
        assert_eq!(
            aimed("in-bounds:keep@4", " slab "),
            scenario("in-bounds:slab")
        );
        assert_eq!(
            aimed("use-after-free", "a@b@16"),
            scenario("use-after-free:a@b@0x10")
        );
        assert_eq!(
            aimed("use-after-free:x@2", "user@host"),
            scenario("use-after-free:user@host")
        );
        // out-of-bounds takes no offset: '@' and all is the label, as in GPU_CRASH_DRILL.
        assert_eq!(
            aimed("out-of-bounds:x", "keep@4"),
            scenario("out-of-bounds:keep@4")
        );
        for not_yet in ["", "\n", "\r\n", "\nslab@4"] {
            assert_eq!(
                aim_line(&scenario("in-bounds"), not_yet),
                AimLine::NotYet,
                "{not_yet:?}"
            );
        }
        for (content, line) in [("  \n", "  "), ("@0x1e0\n", "@0x1e0"), (" @4", " @4")] {
            assert_eq!(
                aim_line(&scenario("in-bounds"), content),
                AimLine::NoLabel(line.into()),
                "{content:?}"
            );
        }
    }

    #[test]
    fn masked_takes_a_label_and_an_optional_count_and_needs_khr() {
        let masked = |s: &str| {
            let (c, lines) = parse(Some(s), Some("khr"), None, None);
            (c.scenario, lines.len())
        };
        let m = |label: &str, count| {
            (
                Some(Scenario::Masked {
                    label: label.into(),
                    count,
                }),
                0,
            )
        };
        assert_eq!(masked("masked:test_vertex_pool"), m("test_vertex_pool", 1));
        assert_eq!(
            masked("masked:test_vertex_pool x1000"),
            m("test_vertex_pool ", 1000)
        );
        assert_eq!(masked("masked:poolx1000"), m("pool", 1000));
        assert_eq!(masked("MASKED:a:bx3"), m("a:b", 3));
        // Only a last `x` followed by digits separates; otherwise it all is the label.
        assert_eq!(masked("masked:box"), m("box", 1));
        assert_eq!(masked("masked:xenon"), m("xenon", 1));
        assert_eq!(masked("masked:x5"), m("x5", 1));
        assert_eq!(masked("masked:box2x1"), m("box2", 1));
        assert_eq!(masked("masked:a x-1"), m("a x-1", 1));
        // A count of 0 or over the limit, or no label: no fault, one line.
        for bad in [
            "masked:px0",
            "masked:px100001",
            "masked:px99999999999",
            "masked",
            "masked:",
        ] {
            let (scenario, lines) = masked(bad);
            assert_eq!((scenario, lines), (None, 1), "{bad}");
        }
        let display = |s: &str| masked(s).0.unwrap().display();
        assert_eq!(display("masked:poolx1"), "masked:pool");
        assert_eq!(display("masked:poolx1000"), "masked:poolx1000");
        // The EXT API has no masked reports.
        let (c, lines) = parse(Some("masked:pool"), Some("ext"), None, None);
        assert_eq!(c.scenario, None);
        assert!(
            lines.len() == 1 && lines[0].contains("GPU_CRASH_DRILL_API=khr"),
            "{lines:?}"
        );
        let (c, lines) = parse(Some("masked:pool"), None, None, None);
        assert_eq!((c.scenario, lines.len()), (None, 1));
    }

    #[test]
    fn bad_values_log_one_line_each_and_fall_back() {
        let (c, lines) = parse(Some("explode"), Some("vk"), Some("x"), Some("1000"));
        assert_eq!(c.scenario, None);
        assert_eq!(c.api, FaultApi::Ext);
        assert_eq!((c.after, c.precision), (30, 4096));
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].contains("unknown scenario"));
        assert!(lines[0].contains("hang-in-pipeline:<label>"), "{lines:?}");
        assert_eq!(
            hang_target("main_opaque_pass_3d#2"),
            ("main_opaque_pass_3d", 2)
        );
        assert_eq!(hang_target("pass#x"), ("pass#x", 1));
        assert_eq!(hang_target("pass#0"), ("pass#0", 1));
        assert_eq!(hang_target("#3"), ("#3", 1));
        assert_eq!(hang_target("plain"), ("plain", 1));
        let (c, lines) = parse(Some("hang-in-pass"), None, None, None);
        assert_eq!(c.scenario, None);
        assert!(
            lines.len() == 1 && lines[0].contains("debug label"),
            "{lines:?}"
        );
        for bad in ["hang-in-pipeline", "hang-in-pipeline:"] {
            let (c, lines) = parse(Some(bad), None, None, None);
            assert_eq!(c.scenario, None, "{bad}");
            assert!(
                lines.len() == 1 && lines[0].contains("debug name of the pipeline"),
                "{bad}: {lines:?}"
            );
        }
        for bad in ["stall", "stall:", "stall:soon", "stall:-5"] {
            let (c, lines) = parse(Some(bad), None, None, None);
            assert_eq!(c.scenario, None, "{bad}");
            assert_eq!(lines.len(), 1, "{bad}: {lines:?}");
            assert!(lines[0].contains("milliseconds"), "{lines:?}");
        }
    }
}
