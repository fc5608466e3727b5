//! Layout test: the hand-written `#[repr(C)]` structs (and the EXT structs ash already has) against the
//! C definitions in `reference/vulkan_device_fault_headers.h`, compiled with gcc on this machine.
//!
//! The header is an excerpt that does not compile on its own, so the needed `typedef struct`/`typedef
//! enum` blocks are cut out by text and prefixed with minimal base typedefs. The C program prints the
//! size and alignment of every struct and the offset and size of every field; the test compares each
//! against Rust's `size_of`/`align_of`/`offset_of!`, and also checks that the Rust field list names
//! every C field in order (so a forgotten field cannot hide behind padding).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use ash::vk;
use vulkan_fault_ffi::*;

const HEADER: &str = include_str!("../reference/vulkan_device_fault_headers.h");

/// One field: C name, Rust offset, Rust size.
struct Field {
    c_name: &'static str,
    offset: usize,
    size: usize,
}

/// One struct to compare.
struct Layout {
    c_name: &'static str,
    size: usize,
    align: usize,
    fields: Vec<Field>,
}

/// Size of a field's type, from a projection closure (no value needed).
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! layout {
    ($t:ty => $c:literal { $($f:ident : $cf:literal),* $(,)? }) => {
        Layout {
            c_name: $c,
            size: size_of::<$t>(),
            align: align_of::<$t>(),
            fields: vec![$(Field {
                c_name: $cf,
                offset: offset_of!($t, $f),
                size: field_size::<$t, _>(|s: &$t| &s.$f),
            }),*],
        }
    };
}

fn layouts() -> Vec<Layout> {
    vec![
        layout!(PhysicalDeviceFaultFeaturesKHR => "VkPhysicalDeviceFaultFeaturesKHR" {
            s_type: "sType", p_next: "pNext", device_fault: "deviceFault",
            device_fault_vendor_binary: "deviceFaultVendorBinary",
            device_fault_report_masked: "deviceFaultReportMasked",
            device_fault_device_lost_on_masked: "deviceFaultDeviceLostOnMasked",
        }),
        layout!(PhysicalDeviceFaultPropertiesKHR => "VkPhysicalDeviceFaultPropertiesKHR" {
            s_type: "sType", p_next: "pNext", max_device_fault_count: "maxDeviceFaultCount",
        }),
        layout!(DeviceFaultAddressInfoKHR => "VkDeviceFaultAddressInfoKHR" {
            address_type: "addressType", reported_address: "reportedAddress",
            address_precision: "addressPrecision",
        }),
        layout!(DeviceFaultVendorInfoKHR => "VkDeviceFaultVendorInfoKHR" {
            description: "description", vendor_fault_code: "vendorFaultCode",
            vendor_fault_data: "vendorFaultData",
        }),
        layout!(DeviceFaultInfoKHR => "VkDeviceFaultInfoKHR" {
            s_type: "sType", p_next: "pNext", flags: "flags", group_id: "groupId",
            description: "description", fault_address_info: "faultAddressInfo",
            instruction_address_info: "instructionAddressInfo", vendor_info: "vendorInfo",
        }),
        layout!(DeviceFaultDebugInfoKHR => "VkDeviceFaultDebugInfoKHR" {
            s_type: "sType", p_next: "pNext", vendor_binary_size: "vendorBinarySize",
            p_vendor_binary_data: "pVendorBinaryData",
        }),
        layout!(DeviceFaultVendorBinaryHeaderVersionOneKHR => "VkDeviceFaultVendorBinaryHeaderVersionOneKHR" {
            header_size: "headerSize", header_version: "headerVersion", vendor_id: "vendorID",
            device_id: "deviceID", driver_version: "driverVersion",
            pipeline_cache_uuid: "pipelineCacheUUID",
            application_name_offset: "applicationNameOffset",
            application_version: "applicationVersion", engine_name_offset: "engineNameOffset",
            engine_version: "engineVersion", api_version: "apiVersion",
        }),
        layout!(PhysicalDeviceShaderAbortFeaturesKHR => "VkPhysicalDeviceShaderAbortFeaturesKHR" {
            s_type: "sType", p_next: "pNext", shader_abort: "shaderAbort",
        }),
        layout!(DeviceFaultShaderAbortMessageInfoKHR => "VkDeviceFaultShaderAbortMessageInfoKHR" {
            s_type: "sType", p_next: "pNext", message_data_size: "messageDataSize",
            p_message_data: "pMessageData",
        }),
        layout!(PhysicalDeviceShaderAbortPropertiesKHR => "VkPhysicalDeviceShaderAbortPropertiesKHR" {
            s_type: "sType", p_next: "pNext",
            max_shader_abort_message_size: "maxShaderAbortMessageSize",
        }),
        // ash's EXT structs, checked against the same header (they share the KHR sub-structs).
        layout!(vk::PhysicalDeviceFaultFeaturesEXT<'static> => "VkPhysicalDeviceFaultFeaturesEXT" {
            s_type: "sType", p_next: "pNext", device_fault: "deviceFault",
            device_fault_vendor_binary: "deviceFaultVendorBinary",
        }),
        layout!(vk::DeviceFaultCountsEXT<'static> => "VkDeviceFaultCountsEXT" {
            s_type: "sType", p_next: "pNext", address_info_count: "addressInfoCount",
            vendor_info_count: "vendorInfoCount", vendor_binary_size: "vendorBinarySize",
        }),
        layout!(vk::DeviceFaultInfoEXT<'static> => "VkDeviceFaultInfoEXT" {
            s_type: "sType", p_next: "pNext", description: "description",
            p_address_infos: "pAddressInfos", p_vendor_infos: "pVendorInfos",
            p_vendor_binary_data: "pVendorBinaryData",
        }),
        layout!(vk::DeviceFaultAddressInfoEXT => "VkDeviceFaultAddressInfoKHR" {
            address_type: "addressType", reported_address: "reportedAddress",
            address_precision: "addressPrecision",
        }),
        layout!(vk::DeviceFaultVendorInfoEXT => "VkDeviceFaultVendorInfoKHR" {
            description: "description", vendor_fault_code: "vendorFaultCode",
            vendor_fault_data: "vendorFaultData",
        }),
        layout!(vk::DeviceFaultVendorBinaryHeaderVersionOneEXT => "VkDeviceFaultVendorBinaryHeaderVersionOneKHR" {
            header_size: "headerSize", header_version: "headerVersion", vendor_id: "vendorID",
            device_id: "deviceID", driver_version: "driverVersion",
            pipeline_cache_uuid: "pipelineCacheUUID",
            application_name_offset: "applicationNameOffset",
            application_version: "applicationVersion", engine_name_offset: "engineNameOffset",
            engine_version: "engineVersion", api_version: "apiVersion",
        }),
    ]
}

/// Enum constants whose values the Rust side relies on: (C name, Rust value).
fn enum_values() -> Vec<(&'static str, i64)> {
    vec![
        (
            "VK_DEVICE_FAULT_ADDRESS_TYPE_NONE_KHR",
            vk::DeviceFaultAddressTypeEXT::NONE.as_raw().into(),
        ),
        (
            "VK_DEVICE_FAULT_ADDRESS_TYPE_READ_INVALID_KHR",
            vk::DeviceFaultAddressTypeEXT::READ_INVALID.as_raw().into(),
        ),
        (
            "VK_DEVICE_FAULT_ADDRESS_TYPE_WRITE_INVALID_KHR",
            vk::DeviceFaultAddressTypeEXT::WRITE_INVALID.as_raw().into(),
        ),
        (
            "VK_DEVICE_FAULT_ADDRESS_TYPE_EXECUTE_INVALID_KHR",
            vk::DeviceFaultAddressTypeEXT::EXECUTE_INVALID
                .as_raw()
                .into(),
        ),
        (
            "VK_DEVICE_FAULT_ADDRESS_TYPE_INSTRUCTION_POINTER_UNKNOWN_KHR",
            vk::DeviceFaultAddressTypeEXT::INSTRUCTION_POINTER_UNKNOWN
                .as_raw()
                .into(),
        ),
        (
            "VK_DEVICE_FAULT_ADDRESS_TYPE_INSTRUCTION_POINTER_INVALID_KHR",
            vk::DeviceFaultAddressTypeEXT::INSTRUCTION_POINTER_INVALID
                .as_raw()
                .into(),
        ),
        (
            "VK_DEVICE_FAULT_ADDRESS_TYPE_INSTRUCTION_POINTER_FAULT_KHR",
            vk::DeviceFaultAddressTypeEXT::INSTRUCTION_POINTER_FAULT
                .as_raw()
                .into(),
        ),
        (
            "VK_DEVICE_FAULT_VENDOR_BINARY_HEADER_VERSION_ONE_KHR",
            vk::DeviceFaultVendorBinaryHeaderVersionEXT::ONE
                .as_raw()
                .into(),
        ),
        (
            "VK_DEVICE_FAULT_FLAG_DEVICE_LOST_KHR",
            DeviceFaultFlagsKHR::DEVICE_LOST.0.into(),
        ),
        (
            "VK_DEVICE_FAULT_FLAG_MEMORY_ADDRESS_KHR",
            DeviceFaultFlagsKHR::MEMORY_ADDRESS.0.into(),
        ),
        (
            "VK_DEVICE_FAULT_FLAG_INSTRUCTION_ADDRESS_KHR",
            DeviceFaultFlagsKHR::INSTRUCTION_ADDRESS.0.into(),
        ),
        (
            "VK_DEVICE_FAULT_FLAG_VENDOR_KHR",
            DeviceFaultFlagsKHR::VENDOR.0.into(),
        ),
        (
            "VK_DEVICE_FAULT_FLAG_WATCHDOG_TIMEOUT_KHR",
            DeviceFaultFlagsKHR::WATCHDOG_TIMEOUT.0.into(),
        ),
        (
            "VK_DEVICE_FAULT_FLAG_OVERFLOW_KHR",
            DeviceFaultFlagsKHR::OVERFLOW.0.into(),
        ),
    ]
}

/// The text of `typedef <kind> Name { ... } Name;` from the header.
fn extract_block(kind: &str, name: &str) -> String {
    let start_pat = format!("typedef {kind} {name} {{");
    let end_pat = format!("}} {name};");
    let start = HEADER
        .find(&start_pat)
        .unwrap_or_else(|| panic!("`{start_pat}` not in the reference header"));
    let len = HEADER[start..]
        .find(&end_pat)
        .unwrap_or_else(|| panic!("`{end_pat}` not in the reference header"));
    HEADER[start..start + len + end_pat.len()].to_string()
}

/// Field names of a C struct block, in declaration order.
fn c_field_names(block: &str) -> Vec<String> {
    let body = &block[block.find('{').unwrap() + 1..block.rfind('}').unwrap()];
    body.split(';')
        .map(str::trim)
        .filter(|decl| !decl.is_empty())
        .map(|decl| {
            let last = decl.split_whitespace().last().unwrap();
            let last = last.split('[').next().unwrap();
            last.trim_start_matches('*').to_string()
        })
        .collect()
}

/// The structure type values in the `VkStructureType` lines appended to the header excerpt.
fn header_structure_type(name: &str) -> i32 {
    let line = HEADER
        .lines()
        .find(|l| l.contains(&format!("{name} =")))
        .unwrap_or_else(|| panic!("{name} not in header"));
    line.split('=')
        .nth(1)
        .unwrap()
        .trim()
        .trim_end_matches(',')
        .parse()
        .unwrap()
}

fn build_c_program(layouts: &[Layout]) -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stdint.h>\n#include <stddef.h>\n\
         typedef enum VkStructureType { VK_STRUCTURE_TYPE_MAX_ENUM = 0x7FFFFFFF } VkStructureType;\n\
         typedef uint32_t VkBool32;\ntypedef uint32_t VkFlags;\n\
         typedef uint64_t VkDeviceAddress;\ntypedef uint64_t VkDeviceSize;\n\
         typedef struct VkDevice_T* VkDevice;\n\
         #define VK_MAX_DESCRIPTION_SIZE 256U\n#define VK_UUID_SIZE 16U\n",
    );
    for e in [
        "VkDeviceFaultAddressTypeKHR",
        "VkDeviceFaultVendorBinaryHeaderVersionKHR",
        "VkDeviceFaultFlagBitsKHR",
    ] {
        c.push_str(&extract_block("enum", e));
        c.push('\n');
    }
    c.push_str("typedef VkFlags VkDeviceFaultFlagsKHR;\n");
    let mut seen = std::collections::BTreeSet::new();
    for l in layouts {
        if seen.insert(l.c_name) {
            c.push_str(&extract_block("struct", l.c_name));
            c.push('\n');
        }
    }
    c.push_str("int main(void) {\n");
    for l in layouts {
        let n = l.c_name;
        writeln!(c, "  printf(\"{n} size %zu\\n\", sizeof({n}));").unwrap();
        writeln!(c, "  printf(\"{n} align %zu\\n\", _Alignof({n}));").unwrap();
        for f in &l.fields {
            let fname = f.c_name;
            writeln!(
                c,
                "  printf(\"{n}.{fname} offset %zu\\n\", offsetof({n}, {fname}));"
            )
            .unwrap();
            writeln!(
                c,
                "  printf(\"{n}.{fname} size %zu\\n\", sizeof((({n}*)0)->{fname}));"
            )
            .unwrap();
        }
    }
    for (e, _) in enum_values() {
        writeln!(c, "  printf(\"{e} value %lld\\n\", (long long){e});").unwrap();
    }
    c.push_str("  return 0;\n}\n");
    c
}

fn work_dir() -> PathBuf {
    // The test executable lives in <target>/<profile>/deps; keep the scratch files in the target dir.
    let exe = std::env::current_exe().unwrap();
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("vulkan_fault_ffi_layout"))
        .unwrap_or_else(|| std::env::temp_dir().join("vulkan_fault_ffi_layout"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn layouts_match_the_c_header() {
    let layouts = layouts();
    let program = build_c_program(&layouts);
    let dir = work_dir();
    let src = dir.join(format!("layout_{}.c", std::process::id()));
    let bin = dir.join(format!("layout_{}", std::process::id()));
    std::fs::write(&src, &program).unwrap();
    let out = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Werror", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("gcc must be installed to run the layout test");
    assert!(
        out.status.success(),
        "gcc failed:\n{}\n--- program ---\n{program}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&bin).output().unwrap();
    assert!(run.status.success());
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&bin);

    let c: BTreeMap<String, i64> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let get = |k: &str| *c.get(k).unwrap_or_else(|| panic!("C did not print `{k}`"));

    let mut mismatches = Vec::new();
    let mut compared_fields = 0;
    for l in &layouts {
        let n = l.c_name;
        let c_fields = c_field_names(&extract_block("struct", n));
        let rust_fields: Vec<&str> = l.fields.iter().map(|f| f.c_name).collect();
        if c_fields != rust_fields {
            mismatches.push(format!(
                "{n}: C fields {c_fields:?}, Rust lists {rust_fields:?}"
            ));
        }
        for (what, rust) in [("size", l.size), ("align", l.align)] {
            let cv = get(&format!("{n} {what}"));
            if cv != rust as i64 {
                mismatches.push(format!("{n} {what}: C {cv}, Rust {rust}"));
            }
        }
        for f in &l.fields {
            for (what, rust) in [("offset", f.offset), ("size", f.size)] {
                let cv = get(&format!("{n}.{} {what}", f.c_name));
                if cv != rust as i64 {
                    mismatches.push(format!("{n}.{} {what}: C {cv}, Rust {rust}", f.c_name));
                }
            }
            compared_fields += 1;
        }
    }
    for (e, rust) in enum_values() {
        let cv = get(&format!("{e} value"));
        if cv != rust {
            mismatches.push(format!("{e}: C {cv}, Rust {rust}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches.join("\n")
    );
    // 10 hand-written structs (48 fields) + 6 ash EXT structs (32 fields): if a struct or field
    // silently dropped out of the comparison this count changes.
    assert_eq!(layouts.len(), 16);
    assert_eq!(compared_fields, 48 + 32);
}

#[test]
fn structure_types_match_the_header() {
    let pairs = [
        (
            "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_KHR",
            structure_type::PHYSICAL_DEVICE_FAULT_FEATURES_KHR,
        ),
        (
            "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_PROPERTIES_KHR",
            structure_type::PHYSICAL_DEVICE_FAULT_PROPERTIES_KHR,
        ),
        (
            "VK_STRUCTURE_TYPE_DEVICE_FAULT_INFO_KHR",
            structure_type::DEVICE_FAULT_INFO_KHR,
        ),
        (
            "VK_STRUCTURE_TYPE_DEVICE_FAULT_DEBUG_INFO_KHR",
            structure_type::DEVICE_FAULT_DEBUG_INFO_KHR,
        ),
        (
            "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR",
            structure_type::PHYSICAL_DEVICE_SHADER_ABORT_FEATURES_KHR,
        ),
        (
            "VK_STRUCTURE_TYPE_DEVICE_FAULT_SHADER_ABORT_MESSAGE_INFO_KHR",
            structure_type::DEVICE_FAULT_SHADER_ABORT_MESSAGE_INFO_KHR,
        ),
        (
            "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ABORT_PROPERTIES_KHR",
            structure_type::PHYSICAL_DEVICE_SHADER_ABORT_PROPERTIES_KHR,
        ),
        (
            "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_EXT",
            vk::StructureType::PHYSICAL_DEVICE_FAULT_FEATURES_EXT,
        ),
        (
            "VK_STRUCTURE_TYPE_DEVICE_FAULT_COUNTS_EXT",
            vk::StructureType::DEVICE_FAULT_COUNTS_EXT,
        ),
        (
            "VK_STRUCTURE_TYPE_DEVICE_FAULT_INFO_EXT",
            vk::StructureType::DEVICE_FAULT_INFO_EXT,
        ),
    ];
    for (name, rust) in pairs {
        assert_eq!(header_structure_type(name), rust.as_raw(), "{name}");
    }
    assert_eq!(
        KHR_DEVICE_FAULT_NAME.to_str().unwrap(),
        "VK_KHR_device_fault"
    );
    assert!(HEADER.contains("#define VK_KHR_DEVICE_FAULT_EXTENSION_NAME \"VK_KHR_device_fault\""));
    assert!(HEADER.contains("#define VK_KHR_SHADER_ABORT_EXTENSION_NAME \"VK_KHR_shader_abort\""));
    assert_eq!(
        KHR_SHADER_ABORT_NAME.to_str().unwrap(),
        "VK_KHR_shader_abort"
    );
}
