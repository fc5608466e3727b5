//! Drivers on which the binding report stays off although offered
//! ([`crate::ReporterSettings::binding_report_off_on`]).
//!
//! `VK_EXT_device_address_binding_report` costs the driver work on every bind and unbind, and
//! what that costs over hours is each driver's own. On NVIDIA's Linux driver 580.159.04 it did
//! not grow: 11 minutes of 1,000 buffers made and dropped a frame moved the frame time by less
//! than 0.7% (BENCHMARKS.md, long session). On AMD's Windows driver another project measured the
//! frame time growing from 17 to 140 ms over 78 minutes with the extension on, and now turns it
//! off there (its release notes, "test-amd-340", github.com/Hexveil404/PokeZ-ARecomp); we have no
//! such machine to measure on. A studio that sees such a driver among its players turns the
//! report off there with a rule, without turning it off for everyone.

use super::capabilities::GpuCrashCapabilities;

/// `VkDriverId` of AMD's proprietary driver (Windows, and AMD's closed Linux driver).
pub const DRIVER_ID_AMD_PROPRIETARY: i32 = 1;

/// A driver to leave the binding report off on: every condition given must hold (a rule with none
/// matches every driver).
///
/// ```
/// use gpu_crash_core::{DriverRule, ReporterSettings};
///
/// // Keep the defaults (AMD's proprietary driver) and add Intel's Windows driver.
/// let mut settings = ReporterSettings::default();
/// settings.binding_report_off_on.push(DriverRule {
///     vendor_id: Some(0x8086),
///     driver_name_contains: Some("Intel Corporation".into()),
///     why: "frame time grew in our QA's 2-hour runs".into(),
///     ..DriverRule::default()
/// });
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverRule {
    /// PCI vendor ID (0x1002 AMD, 0x10de NVIDIA, 0x8086 Intel).
    pub vendor_id: Option<u32>,
    /// `VkDriverId` as a number (1 AMD proprietary, 3 RADV, 4 NVIDIA proprietary, 5 Intel's Windows
    /// driver, 6 ANV; Vulkan's `VkDriverId` lists them all). Drivers before Vulkan 1.2 have none
    /// and match no rule that asks for one.
    pub driver_id: Option<i32>,
    /// Text the driver's name contains (`VkPhysicalDeviceDriverProperties::driverName`, e.g.
    /// "AMD proprietary driver"), compared without regard to case.
    pub driver_name_contains: Option<String>,
    /// Text the driver's version information contains (`driverInfo`, e.g. "24.10.1"), compared
    /// without regard to case: a rule for one release.
    pub driver_info_contains: Option<String>,
    /// Why, in a few words: shown in the capabilities line and in each report of such a device.
    pub why: String,
}

impl DriverRule {
    /// The rules [`crate::ReporterSettings::default`] holds: AMD's proprietary driver (see the
    /// module documentation for the evidence, which is another project's, not ours).
    pub fn defaults() -> Vec<DriverRule> {
        vec![DriverRule {
            driver_id: Some(DRIVER_ID_AMD_PROPRIETARY),
            why:
                "AMD's proprietary driver: frame time grew from 17 to 140 ms over 78 minutes with \
                  the binding report on (measured by another project; the reporter's default rule)"
                    .into(),
            ..DriverRule::default()
        }]
    }

    /// Whether the rule names a driver at all: a vendor, a driver ID or a non-empty text. A rule
    /// without one would hold for every driver (a typo that turns capture off for every player), so
    /// [`crate::ReporterSettings::validated`] drops it.
    pub fn names_a_driver(&self) -> bool {
        let text = |t: &Option<String>| t.as_deref().is_some_and(|t| !t.trim().is_empty());
        self.vendor_id.is_some()
            || self.driver_id.is_some_and(|d| d != 0)
            || text(&self.driver_name_contains)
            || text(&self.driver_info_contains)
    }

    /// Whether this rule holds for the driver `gpu` names (`driver_id` as the driver gave it, 0
    /// when it gave none).
    pub(crate) fn matches(&self, gpu: &GpuCrashCapabilities) -> bool {
        let contains = |text: &str, part: &Option<String>| {
            part.as_ref()
                .is_none_or(|p| text.to_lowercase().contains(&p.to_lowercase()))
        };
        self.vendor_id.is_none_or(|v| v == gpu.vendor_id)
            && self.driver_id.is_none_or(|d| d == gpu.driver_id && d != 0)
            && contains(&gpu.driver_name, &self.driver_name_contains)
            && contains(&gpu.driver_info, &self.driver_info_contains)
    }
}

/// The first of `rules` that holds for `gpu`'s driver.
pub(crate) fn first_match<'a>(
    rules: &'a [DriverRule],
    gpu: &GpuCrashCapabilities,
) -> Option<&'a DriverRule> {
    rules.iter().find(|rule| rule.matches(gpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(vendor_id: u32, driver_id: i32, name: &str, info: &str) -> GpuCrashCapabilities {
        GpuCrashCapabilities {
            vendor_id,
            driver_id,
            driver_name: name.into(),
            driver_info: info.into(),
            ..GpuCrashCapabilities::default()
        }
    }

    #[test]
    fn the_default_rule_takes_amds_proprietary_driver_and_nothing_else() {
        let rules = DriverRule::defaults();
        let amd_windows = gpu(0x1002, 1, "AMD proprietary driver", "24.10.1");
        assert!(first_match(&rules, &amd_windows).is_some());
        for other in [
            gpu(0x1002, 3, "radv", "Mesa 24.2.8"),
            gpu(0x1002, 2, "AMD open-source driver", "2024.Q4.1"),
            gpu(0x10de, 4, "NVIDIA", "580.159.04"),
            gpu(0x10005, 13, "llvmpipe", "Mesa 22.3.6"),
            // Before Vulkan 1.2: no driver ID.
            gpu(0x1002, 0, "", ""),
        ] {
            assert!(first_match(&rules, &other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn a_rule_that_names_no_driver_is_left_out_at_start_with_an_error() {
        let mut settings = crate::ReporterSettings::default();
        settings.binding_report_off_on.push(DriverRule {
            driver_name_contains: Some("  ".into()),
            why: "typo".into(),
            ..DriverRule::default()
        });
        settings.binding_report_off_on.push(DriverRule::default());
        let (used, errors) = settings.validated();
        assert_eq!(used.binding_report_off_on, DriverRule::defaults());
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors.iter().all(|e| e.setting == "binding_report_off_on"));
    }

    #[test]
    fn every_condition_given_must_hold_and_text_ignores_case() {
        let rule = DriverRule {
            vendor_id: Some(0x8086),
            driver_info_contains: Some("mesa 23".into()),
            why: "test".into(),
            ..DriverRule::default()
        };
        assert!(rule.matches(&gpu(
            0x8086,
            6,
            "Intel open-source Mesa driver",
            "Mesa 23.1.2"
        )));
        assert!(!rule.matches(&gpu(
            0x8086,
            6,
            "Intel open-source Mesa driver",
            "Mesa 24.0.1"
        )));
        assert!(!rule.matches(&gpu(0x1002, 3, "radv", "Mesa 23.1.2")));
        let any = DriverRule::default();
        assert!(any.matches(&gpu(0x10de, 4, "NVIDIA", "580.159.04")));
    }
}
