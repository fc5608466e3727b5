//! Real GPU faults on a real driver, raw Vulkan (no layer, no wgpu): one (case, config) per process.
//!
//! ```text
//! nv_fault_matrix --case <case> --config <config> [--wait-cap-s 45] [--observe-s 3]
//!                 [--keepalive-ms 100] [--busy-ms 1500] [--canary-s 50] [--nudge-ms 0]
//! ```
//!
//! Cases (issue 47):
//! - `uaf-descriptor` (a): a compute dispatch writes through a storage-buffer descriptor into a
//!   256 MiB buffer; the buffer is destroyed and its memory freed right after the submit, while a
//!   busy dispatch recorded before it still runs.
//! - `bda-freed` (b): the same through a buffer device address passed in a push constant.
//! - `bda-past-end` (c): writes through a buffer device address 256 MiB past the end of a live,
//!   named 64 MiB buffer. Nothing is freed.
//! - `image-freed` (d): `texelFetch` from a sampled 256 MiB image whose `VkDeviceMemory` is freed
//!   right after the submit (image and view stay).
//! - `endless` (e): a shader loop that never ends. Run it last: it keeps the GPU busy for minutes.
//! - `healthy`: case (a) without the free (a control; checks the tool on any driver).
//! - `canary`: no fault; submits a short dispatch every 0.5 s for `--canary-s` seconds and records
//!   each one's latency (run beside a faulting process to see whether the fault disturbs others).
//!
//! Configs: `off`; `dbg`, `rt`, `ac`, `ser`: `VK_NV_device_diagnostics_config` with SHADER_DEBUG_INFO
//! (0x1), RESOURCE_TRACKING (0x2), AUTOMATIC_CHECKPOINTS (0x4) or SHADER_ERROR_REPORTING (0x8) alone
//! (`ac` also enables `VK_NV_device_diagnostic_checkpoints`, sets no checkpoint of its own and reads
//! what the driver recorded); `ckpt`: `VK_NV_device_diagnostic_checkpoints` with checkpoints 1
//! (before the busy dispatch), 2 (between it and the faulting dispatch) and 3 (after that);
//! `all`: the four flags together and our checkpoints.
//!
//! `--nudge-ms N` (N > 0), any case: the nudge. If the faulting submit's fence has not signalled N ms
//! after the submit, a thread creates a second `VkDevice` on the same physical device (no extensions,
//! no features, one queue of the same compute family: a GPU context of its own) and submits a small
//! dispatch on it, then another every 250 ms, each waited on, until the wait cap + 5 s. The
//! hypothesis under test (issue 47): work from another context makes the driver switch out the
//! faulted, hung context, time it out and report the loss, with the fault address, to the first
//! device. The JSON's `nudge` holds each step and each dispatch's result; `fault_info_before_nudge`
//! is `vkGetDeviceFaultInfoEXT` on the first device just before the nudge.
//!
//! Every device gets `VK_EXT_device_fault`, `bufferDeviceAddress`, `VK_EXT_memory_budget` and
//! `VK_EXT_device_address_binding_report` where offered; every buffer, image and memory object is
//! named with `vkSetDebugUtilsObjectNameEXT` before it is bound, and a messenger records each
//! binding event (name, GPU VA range) so a fault address can be matched to an object.
//!
//! Output: stdout gets one JSON line per phase (the last line is the result; earlier lines are
//! snapshots, so a process killed in a driver call still leaves what it knew); stderr gets progress.
//! The process ends with `_exit` so that no driver teardown runs on a lost or hung device.

use std::ffi::{c_char, c_void, CStr, CString};
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use ash::vk;
use serde_json::{json, Map, Value};

const BUSY_SPV: &[u8] = include_bytes!("../shaders/busy.spv");
const WRITE_STORAGE_SPV: &[u8] = include_bytes!("../shaders/write_storage.spv");
const WRITE_BDA_SPV: &[u8] = include_bytes!("../shaders/write_bda.spv");
const FETCH_IMAGE_SPV: &[u8] = include_bytes!("../shaders/fetch_image.spv");
const ENDLESS_SPV: &[u8] = include_bytes!("../shaders/endless.spv");

const MIB: u64 = 1 << 20;
/// Size of the freed victims of cases (a), (b), (d).
const VICTIM_SIZE: u64 = 256 * MIB;
/// Size of the live buffer of case (c).
const LIVE_SIZE: u64 = 64 * MIB;
/// How far past the live buffer's end case (c) writes.
const PAST_END: u64 = 256 * MIB;
/// Invocations of the faulting dispatch (1,024 workgroups of 64).
const FAULT_GROUPS: u32 = 1024;
const FAULT_INVOCATIONS: u64 = FAULT_GROUPS as u64 * 64;
/// Side of the square R32_UINT image of case (d): 8192 x 8192 x 4 B = 256 MiB.
const IMAGE_SIDE: u32 = 8192;
/// Checkpoint markers (pointer-sized values, never dereferenced).
const CKPT_BEFORE_BUSY: u64 = 1;
const CKPT_BEFORE_FAULT: u64 = 2;
const CKPT_AFTER_FAULT: u64 = 3;

extern "C" {
    fn _exit(status: i32) -> !;
}

static T0: OnceLock<Instant> = OnceLock::new();

fn ms() -> f64 {
    T0.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

fn log(msg: &str) {
    eprintln!("[{:9.1} ms] {msg}", ms());
}

/// One `VkDeviceAddressBindingCallbackDataEXT` as the messenger saw it.
#[derive(Clone)]
struct BindingEvent {
    t_ms: f64,
    object_type: String,
    handle: u64,
    name: Option<String>,
    unbind: bool,
    internal: bool,
    base: u64,
    size: u64,
}

static BINDINGS: Mutex<Vec<BindingEvent>> = Mutex::new(Vec::new());
static MESSAGES: Mutex<Vec<Value>> = Mutex::new(Vec::new());

fn cstr_opt(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: Vulkan hands NUL-terminated strings valid for the duration of the callback or
        // call in which this is used; the pointer was checked for null above.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

fn carray_str(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

unsafe extern "system" fn messenger(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> vk::Bool32 {
    if data.is_null() {
        return vk::FALSE;
    }
    // SAFETY: the loader passes a valid callback-data structure for the duration of the call.
    let d = unsafe { &*data };
    let mut binding: Option<(vk::DeviceAddressBindingFlagsEXT, u64, u64, vk::DeviceAddressBindingTypeEXT)> =
        None;
    let mut p = d.p_next as *const vk::BaseInStructure<'_>;
    while !p.is_null() {
        // SAFETY: every structure in a pNext chain starts with sType/pNext (BaseInStructure); the
        // chain is valid for the duration of the callback.
        let s = unsafe { &*p };
        if s.s_type == vk::StructureType::DEVICE_ADDRESS_BINDING_CALLBACK_DATA_EXT {
            // SAFETY: the sType says this is a VkDeviceAddressBindingCallbackDataEXT.
            let b = unsafe { &*(p as *const vk::DeviceAddressBindingCallbackDataEXT<'_>) };
            binding = Some((b.flags, b.base_address, b.size, b.binding_type));
        }
        p = s.p_next;
    }
    let (object_type, handle, name) = if d.object_count > 0 && !d.p_objects.is_null() {
        // SAFETY: p_objects holds object_count valid entries for the duration of the callback.
        let o = unsafe { &*d.p_objects };
        (format!("{:?}", o.object_type), o.object_handle, cstr_opt(o.p_object_name))
    } else {
        ("none".to_string(), 0, None)
    };
    if let Some((flags, base, size, ty)) = binding {
        let ev = BindingEvent {
            t_ms: ms(),
            object_type,
            handle,
            name,
            unbind: ty == vk::DeviceAddressBindingTypeEXT::UNBIND,
            internal: flags.contains(vk::DeviceAddressBindingFlagsEXT::INTERNAL_OBJECT),
            base,
            size,
        };
        if let Ok(mut v) = BINDINGS.lock() {
            v.push(ev);
        }
    } else if d.p_message_id_name.is_null()
        // SAFETY: checked for null just before; the loader's id name is a static C string.
        || unsafe { CStr::from_ptr(d.p_message_id_name) } != c"Loader Message"
        || severity.intersects(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR)
    {
        let Ok(mut v) = MESSAGES.lock() else { return vk::FALSE };
        if v.len() < 200 {
            v.push(json!({
                "t_ms": ms(),
                "severity": format!("{severity:?}"),
                "types": format!("{types:?}"),
                "id": cstr_opt(d.p_message_id_name),
                "message": cstr_opt(d.p_message),
            }));
        }
    }
    vk::FALSE
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Case {
    UafDescriptor,
    BdaFreed,
    BdaPastEnd,
    ImageFreed,
    Endless,
    Healthy,
    Canary,
}

impl Case {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "uaf-descriptor" | "a" => Case::UafDescriptor,
            "bda-freed" | "b" => Case::BdaFreed,
            "bda-past-end" | "c" => Case::BdaPastEnd,
            "image-freed" | "d" => Case::ImageFreed,
            "endless" | "e" => Case::Endless,
            "healthy" => Case::Healthy,
            "canary" => Case::Canary,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Case::UafDescriptor => "uaf-descriptor",
            Case::BdaFreed => "bda-freed",
            Case::BdaPastEnd => "bda-past-end",
            Case::ImageFreed => "image-freed",
            Case::Endless => "endless",
            Case::Healthy => "healthy",
            Case::Canary => "canary",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Config {
    Off,
    Dbg,
    Rt,
    Ac,
    Ser,
    Ckpt,
    All,
}

impl Config {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "off" => Config::Off,
            "dbg" => Config::Dbg,
            "rt" => Config::Rt,
            "ac" => Config::Ac,
            "ser" => Config::Ser,
            "ckpt" => Config::Ckpt,
            "all" => Config::All,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Config::Off => "off",
            Config::Dbg => "dbg",
            Config::Rt => "rt",
            Config::Ac => "ac",
            Config::Ser => "ser",
            Config::Ckpt => "ckpt",
            Config::All => "all",
        }
    }
    fn diag_flags(self) -> Option<vk::DeviceDiagnosticsConfigFlagsNV> {
        use vk::DeviceDiagnosticsConfigFlagsNV as F;
        match self {
            Config::Off | Config::Ckpt => None,
            Config::Dbg => Some(F::ENABLE_SHADER_DEBUG_INFO),
            Config::Rt => Some(F::ENABLE_RESOURCE_TRACKING),
            Config::Ac => Some(F::ENABLE_AUTOMATIC_CHECKPOINTS),
            Config::Ser => Some(F::ENABLE_SHADER_ERROR_REPORTING),
            Config::All => Some(
                F::ENABLE_SHADER_DEBUG_INFO
                    | F::ENABLE_RESOURCE_TRACKING
                    | F::ENABLE_AUTOMATIC_CHECKPOINTS
                    | F::ENABLE_SHADER_ERROR_REPORTING,
            ),
        }
    }
    fn checkpoint_ext(self) -> bool {
        matches!(self, Config::Ac | Config::Ckpt | Config::All)
    }
    fn records_checkpoints(self) -> bool {
        matches!(self, Config::Ckpt | Config::All)
    }
}

struct Args {
    case: Case,
    config: Config,
    wait_cap_s: f64,
    observe_s: f64,
    keepalive_ms: u64,
    busy_ms: f64,
    canary_s: f64,
    nudge_ms: u64,
}

fn parse_args() -> Args {
    let mut a = Args {
        case: Case::Healthy,
        config: Config::Off,
        wait_cap_s: 45.0,
        observe_s: 3.0,
        keepalive_ms: 100,
        busy_ms: 1500.0,
        canary_s: 50.0,
        nudge_ms: 0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let mut case_seen = false;
    while i < argv.len() {
        let v = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--case" => {
                a.case = Case::parse(&v).unwrap_or_else(|| usage(&format!("unknown case {v}")));
                case_seen = true;
            }
            "--config" => a.config = Config::parse(&v).unwrap_or_else(|| usage(&format!("unknown config {v}"))),
            "--wait-cap-s" => a.wait_cap_s = v.parse().unwrap_or_else(|_| usage("--wait-cap-s")),
            "--observe-s" => a.observe_s = v.parse().unwrap_or_else(|_| usage("--observe-s")),
            "--keepalive-ms" => a.keepalive_ms = v.parse().unwrap_or_else(|_| usage("--keepalive-ms")),
            "--busy-ms" => a.busy_ms = v.parse().unwrap_or_else(|_| usage("--busy-ms")),
            "--canary-s" => a.canary_s = v.parse().unwrap_or_else(|_| usage("--canary-s")),
            "--nudge-ms" => a.nudge_ms = v.parse().unwrap_or_else(|_| usage("--nudge-ms")),
            other => usage(&format!("unknown argument {other}")),
        }
        i += 2;
    }
    if !case_seen {
        usage("--case is required");
    }
    a
}

fn usage(why: &str) -> ! {
    eprintln!("nv_fault_matrix: {why}");
    eprintln!(
        "usage: nv_fault_matrix --case uaf-descriptor|bda-freed|bda-past-end|image-freed|endless|healthy|canary \
         --config off|dbg|rt|ac|ser|ckpt|all [--wait-cap-s 45] [--observe-s 3] [--keepalive-ms 100] \
         [--busy-ms 1500] [--canary-s 50] [--nudge-ms 0]"
    );
    std::process::exit(2);
}

/// The results, printed as one JSON line at each phase.
struct Out {
    map: Map<String, Value>,
    timeline: Vec<Value>,
}

impl Out {
    fn set(&mut self, k: &str, v: Value) {
        self.map.insert(k.to_string(), v);
    }
    fn event(&mut self, what: &str, extra: Value) {
        let t = ms();
        log(&format!("{what} {extra}"));
        self.timeline.push(json!({"t_ms": round1(t), "what": what, "extra": extra}));
    }
    fn emit(&mut self, phase: &str) {
        let mut m = self.map.clone();
        m.insert("phase".into(), json!(phase));
        m.insert("timeline".into(), Value::Array(self.timeline.clone()));
        if let Ok(b) = BINDINGS.lock() {
            m.insert("binding_events".into(), Value::Array(b.iter().map(binding_json).collect()));
        }
        if let Ok(msgs) = MESSAGES.lock() {
            m.insert("messages".into(), Value::Array(msgs.clone()));
        }
        let steps = NUDGE_STEPS.lock().map(|v| v.clone()).unwrap_or_default();
        if !steps.is_empty() {
            let samples = NUDGE_SAMPLES.lock().map(|v| v.clone()).unwrap_or_default();
            m.insert("nudge".into(), json!({"steps": steps, "samples": samples}));
        }
        let line = serde_json::to_string(&Value::Object(m)).unwrap_or_default();
        let mut so = std::io::stdout().lock();
        let _ = writeln!(so, "{line}");
        let _ = so.flush();
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn hex(x: u64) -> String {
    format!("{x:#x}")
}

fn binding_json(b: &BindingEvent) -> Value {
    json!({
        "t_ms": round1(b.t_ms), "type": b.object_type, "handle": hex(b.handle), "name": b.name,
        "unbind": b.unbind, "internal": b.internal, "base": hex(b.base), "size": b.size,
        "end": hex(b.base.wrapping_add(b.size)),
    })
}

/// Every binding event whose range holds any byte of [lo, hi].
fn resolve(lo: u64, hi: u64) -> Value {
    let b = BINDINGS.lock().map(|v| v.clone()).unwrap_or_default();
    let hits: Vec<Value> = b
        .iter()
        .filter(|e| e.size > 0 && e.base <= hi && lo < e.base.wrapping_add(e.size))
        .map(binding_json)
        .collect();
    // The nearest named range below, for an address that falls outside every range.
    let below = b
        .iter()
        .filter(|e| e.name.is_some() && e.base.wrapping_add(e.size) <= lo)
        .max_by_key(|e| e.base.wrapping_add(e.size))
        .map(|e| json!({"name": e.name, "end": hex(e.base.wrapping_add(e.size)), "gap": lo - e.base.wrapping_add(e.size)}));
    json!({"range": [hex(lo), hex(hi)], "matches": hits, "nearest_named_below": below})
}

fn vkres<T>(r: Result<T, vk::Result>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            log(&format!("FATAL: {what}: {e:?}"));
            let mut so = std::io::stdout().lock();
            let _ = writeln!(so, "{}", json!({"phase": "setup-failed", "what": what, "result": format!("{e:?}")}));
            let _ = so.flush();
            // SAFETY: _exit ends the process at once; nothing after it runs.
            unsafe { _exit(3) }
        }
    }
}

struct Gpu {
    instance: ash::Instance,
    pdev: vk::PhysicalDevice,
    device: ash::Device,
    queue: vk::Queue,
    qfi: u32,
    mem_props: vk::PhysicalDeviceMemoryProperties,
    dbg: Option<ash::ext::debug_utils::Device>,
    fault: Option<ash::ext::device_fault::Device>,
    ckpt: Option<ash::nv::device_diagnostic_checkpoints::Device>,
    ckpt2: Option<vk::PFN_vkGetQueueCheckpointData2NV>,
    budget: bool,
    vendor_binary: bool,
    max_storage_range: u64,
}

impl Gpu {
    fn name<H: vk::Handle>(&self, h: H, name: &str) {
        if let Some(d) = &self.dbg {
            let n = CString::new(name).unwrap_or_default();
            let info = vk::DebugUtilsObjectNameInfoEXT::default().object_handle(h).object_name(&n);
            // SAFETY: the handle belongs to self.device and is alive; the name outlives the call.
            let _ = unsafe { d.set_debug_utils_object_name(&info) };
        }
    }

    fn memory_type(&self, bits: u32, want: vk::MemoryPropertyFlags) -> u32 {
        (0..self.mem_props.memory_type_count)
            .find(|&i| bits & (1 << i) != 0 && self.mem_props.memory_types[i as usize].property_flags.contains(want))
            .unwrap_or_else(|| {
                log("FATAL: no memory type");
                // SAFETY: ends the process at once.
                unsafe { _exit(3) }
            })
    }

    /// A buffer in dedicated device-local memory, named (buffer and memory) before binding.
    fn buffer(&self, size: u64, usage: vk::BufferUsageFlags, name: &str) -> (vk::Buffer, vk::DeviceMemory, u64) {
        let usage = usage | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;
        let info = vk::BufferCreateInfo::default().size(size).usage(usage).sharing_mode(vk::SharingMode::EXCLUSIVE);
        // SAFETY: valid create info; the device is alive.
        let buf = vkres(unsafe { self.device.create_buffer(&info, None) }, "vkCreateBuffer");
        self.name(buf, name);
        // SAFETY: buf was just created on this device.
        let req = unsafe { self.device.get_buffer_memory_requirements(buf) };
        let mut flags = vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buf);
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(self.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL))
            .push_next(&mut flags)
            .push_next(&mut dedicated);
        // SAFETY: valid allocate info whose chained structures outlive the call.
        let mem = vkres(unsafe { self.device.allocate_memory(&alloc, None) }, "vkAllocateMemory");
        self.name(mem, &format!("{name} (memory)"));
        // SAFETY: buf and mem are unbound objects of this device; offset 0 of a dedicated allocation.
        vkres(unsafe { self.device.bind_buffer_memory(buf, mem, 0) }, "vkBindBufferMemory");
        let ai = vk::BufferDeviceAddressInfo::default().buffer(buf);
        // SAFETY: buf has SHADER_DEVICE_ADDRESS usage and memory bound with the DEVICE_ADDRESS flag.
        let addr = unsafe { self.device.get_buffer_device_address(&ai) };
        (buf, mem, addr)
    }

    fn pipeline(&self, spv: &[u8], bindings: &[(u32, vk::DescriptorType)], pc_size: u32, name: &str) -> Pipe {
        let words = ash::util::read_spv(&mut std::io::Cursor::new(spv)).unwrap_or_default();
        let smi = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: the SPIR-V was validated by spirv-val when it was built (shaders/build.sh).
        let module = vkres(unsafe { self.device.create_shader_module(&smi, None) }, "vkCreateShaderModule");
        let b: Vec<vk::DescriptorSetLayoutBinding> = bindings
            .iter()
            .map(|&(i, t)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(t)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let dsl_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&b);
        // SAFETY: valid create info.
        let dsl = vkres(unsafe { self.device.create_descriptor_set_layout(&dsl_info, None) }, "vkCreateDescriptorSetLayout");
        let pcr = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).offset(0).size(pc_size)];
        let layouts = [dsl];
        let pl_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts).push_constant_ranges(&pcr);
        // SAFETY: valid create info.
        let layout = vkres(unsafe { self.device.create_pipeline_layout(&pl_info, None) }, "vkCreatePipelineLayout");
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let cpi = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout)];
        // SAFETY: valid create info; module and layout are alive.
        let pipe = unsafe { self.device.create_compute_pipelines(vk::PipelineCache::null(), &cpi, None) }
            .map_err(|(_, e)| e);
        let pipe = vkres(pipe, "vkCreateComputePipelines")[0];
        self.name(pipe, name);
        Pipe { pipe, layout, dsl }
    }

    fn budget_json(&self) -> Value {
        let mut b = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut p = vk::PhysicalDeviceMemoryProperties2::default();
        if self.budget {
            p = p.push_next(&mut b);
        }
        // SAFETY: pdev belongs to this instance; the chained structure outlives the call.
        unsafe { self.instance.get_physical_device_memory_properties2(self.pdev, &mut p) };
        let props = p.memory_properties;
        let heaps: Vec<Value> = (0..props.memory_heap_count as usize)
            .map(|i| {
                let h = props.memory_heaps[i];
                json!({
                    "heap": i, "size": h.size, "device_local": h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL),
                    "usage": if self.budget { Some(b.heap_usage[i]) } else { None },
                    "budget": if self.budget { Some(b.heap_budget[i]) } else { None },
                })
            })
            .collect();
        json!({"t_ms": round1(ms()), "ext": self.budget, "heaps": heaps})
    }

    fn checkpoints_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(c) = &self.ckpt {
            // SAFETY: the queue belongs to a device with VK_NV_device_diagnostic_checkpoints enabled.
            let n = unsafe { c.get_queue_checkpoint_data_len(self.queue) };
            let mut v = vec![vk::CheckpointDataNV::default(); n];
            if n > 0 {
                // SAFETY: v holds exactly n default-initialised elements, as the call requires.
                unsafe { c.get_queue_checkpoint_data(self.queue, &mut v) };
            }
            out.insert(
                "nv".into(),
                Value::Array(
                    v.iter()
                        .map(|d| json!({"stage": format!("{:?}", d.stage), "marker": d.p_checkpoint_marker as u64}))
                        .collect(),
                ),
            );
        }
        if let Some(f) = self.ckpt2 {
            let mut n = 0u32;
            // SAFETY: f is vkGetQueueCheckpointData2NV from this device; a null data pointer asks the count.
            unsafe { f(self.queue, &mut n, std::ptr::null_mut()) };
            let mut v = vec![vk::CheckpointData2NV::default(); n as usize];
            if n > 0 {
                // SAFETY: v holds n default-initialised elements (sType set).
                unsafe { f(self.queue, &mut n, v.as_mut_ptr()) };
            }
            v.truncate(n as usize);
            out.insert(
                "nv2".into(),
                Value::Array(
                    v.iter()
                        .map(|d| json!({"stage": format!("{:?}", d.stage), "marker": d.p_checkpoint_marker as u64}))
                        .collect(),
                ),
            );
        }
        json!({"t_ms": round1(ms()), "data": out})
    }

    fn fault_info_json(&self) -> Value {
        let Some(f) = &self.fault else {
            return json!({"enabled": false});
        };
        let fp = f.fp().get_device_fault_info_ext;
        let mut counts = vk::DeviceFaultCountsEXT::default();
        let t = Instant::now();
        // SAFETY: fp is vkGetDeviceFaultInfoEXT of this device; a null info pointer asks the counts.
        let r1 = unsafe { fp(self.device.handle(), &mut counts, std::ptr::null_mut()) };
        let first_call_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut j = json!({
            "enabled": true, "counts_result": format!("{r1:?}"), "counts_call_ms": round1(first_call_ms),
            "address_info_count": counts.address_info_count, "vendor_info_count": counts.vendor_info_count,
            "vendor_binary_size": counts.vendor_binary_size,
        });
        if r1 != vk::Result::SUCCESS && r1 != vk::Result::INCOMPLETE {
            return j;
        }
        if !self.vendor_binary {
            counts.vendor_binary_size = 0;
        }
        let mut addrs = vec![vk::DeviceFaultAddressInfoEXT::default(); counts.address_info_count as usize];
        let mut vendors = vec![vk::DeviceFaultVendorInfoEXT::default(); counts.vendor_info_count as usize];
        let mut blob = vec![0u8; counts.vendor_binary_size as usize];
        let mut info = vk::DeviceFaultInfoEXT::default();
        info.p_address_infos = if addrs.is_empty() { std::ptr::null_mut() } else { addrs.as_mut_ptr() };
        info.p_vendor_infos = if vendors.is_empty() { std::ptr::null_mut() } else { vendors.as_mut_ptr() };
        info.p_vendor_binary_data = if blob.is_empty() { std::ptr::null_mut() } else { blob.as_mut_ptr() as *mut c_void };
        // SAFETY: the arrays hold the counts the driver returned; they outlive the call.
        let r2 = unsafe { fp(self.device.handle(), &mut counts, &mut info) };
        j["info_result"] = json!(format!("{r2:?}"));
        j["description"] = json!(carray_str(&info.description));
        let mut resolved = Vec::new();
        j["addresses"] = Value::Array(
            addrs
                .iter()
                .take(counts.address_info_count as usize)
                .map(|a| {
                    let p = a.address_precision.max(1);
                    let lo = a.reported_address & !(p.wrapping_sub(1));
                    let hi = a.reported_address | (p.wrapping_sub(1));
                    resolved.push(resolve(lo, hi));
                    json!({"type": format!("{:?}", a.address_type), "address": hex(a.reported_address), "precision": a.address_precision})
                })
                .collect(),
        );
        j["addresses_resolved"] = Value::Array(resolved);
        j["vendor"] = Value::Array(
            vendors
                .iter()
                .take(counts.vendor_info_count as usize)
                .map(|v| json!({"description": carray_str(&v.description), "code": hex(v.vendor_fault_code), "data": hex(v.vendor_fault_data)}))
                .collect(),
        );
        let hdr_size = std::mem::size_of::<vk::DeviceFaultVendorBinaryHeaderVersionOneEXT>();
        if blob.len() >= hdr_size {
            // SAFETY: blob holds at least hdr_size bytes; read_unaligned copies them out whatever
            // their alignment.
            let h: vk::DeviceFaultVendorBinaryHeaderVersionOneEXT =
                unsafe { std::ptr::read_unaligned(blob.as_ptr() as *const _) };
            j["vendor_binary_header"] = json!({
                "header_size": h.header_size, "header_version": format!("{:?}", h.header_version),
                "vendor_id": hex(h.vendor_id as u64), "device_id": hex(h.device_id as u64),
                "driver_version": hex(h.driver_version as u64),
                "pipeline_cache_uuid": h.pipeline_cache_uuid.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                "application_name_offset": h.application_name_offset, "application_version": h.application_version,
                "engine_name_offset": h.engine_name_offset, "engine_version": h.engine_version,
                "api_version": h.api_version,
            });
            j["vendor_binary_first_64"] = json!(blob.iter().take(64).map(|b| format!("{b:02x}")).collect::<String>());
        }
        j
    }
}

struct Pipe {
    pipe: vk::Pipeline,
    layout: vk::PipelineLayout,
    dsl: vk::DescriptorSetLayout,
}

fn push<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is a plain-old-data push-constant struct (repr(C), Copy); viewing its bytes is sound.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
}

#[repr(C)]
#[derive(Clone, Copy)]
struct PcBda {
    base: u64,
    stride_bytes: u32,
    value: u32,
}

fn decode_nv_driver(v: u32) -> String {
    format!("{}.{}.{:02}", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff)
}

fn main() {
    let args = parse_args();
    T0.get_or_init(Instant::now);
    let mut out = Out { map: Map::new(), timeline: Vec::new() };
    out.set("tool", json!("nv_fault_matrix 0.1.0"));
    out.set("case", json!(args.case.name()));
    out.set("config", json!(args.config.name()));
    out.set(
        "params",
        json!({"wait_cap_s": args.wait_cap_s, "observe_s": args.observe_s, "keepalive_ms": args.keepalive_ms,
               "busy_target_ms": args.busy_ms, "canary_s": args.canary_s,
               "nudge_ms": args.nudge_ms}),
    );
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    out.set("start_unix_s", json!(unix));
    // The kernel log names the faulting process by pid (Xid lines): with several runs at once, the
    // pid is how run-matrix.sh gives each run its own Xid lines.
    out.set("pid", json!(std::process::id()));

    // SAFETY: loads the system Vulkan loader (libvulkan.so.1); no other code runs during the load.
    let entry = vkres(unsafe { ash::Entry::load() }.map_err(|_| vk::Result::ERROR_INITIALIZATION_FAILED), "load libvulkan");
    // SAFETY: entry is a loaded loader.
    let inst_exts = vkres(unsafe { entry.enumerate_instance_extension_properties(None) }, "enumerate instance exts");
    let has_debug_utils = inst_exts.iter().any(|e| e.extension_name_as_c_str() == Ok(ash::ext::debug_utils::NAME));
    let mut iexts: Vec<*const c_char> = Vec::new();
    if has_debug_utils {
        iexts.push(ash::ext::debug_utils::NAME.as_ptr());
    }
    let app = vk::ApplicationInfo::default()
        .application_name(c"nv_fault_matrix")
        .api_version(vk::make_api_version(0, 1, 3, 0));
    let ici = vk::InstanceCreateInfo::default().application_info(&app).enabled_extension_names(&iexts);
    // SAFETY: valid create info; names are static C strings.
    let instance = vkres(unsafe { entry.create_instance(&ici, None) }, "vkCreateInstance");
    if has_debug_utils {
        let du = ash::ext::debug_utils::Instance::new(&entry, &instance);
        let mci = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::VERBOSE
                    | vk::DebugUtilsMessageSeverityFlagsEXT::INFO
                    | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE
                    | vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
            )
            .pfn_user_callback(Some(messenger));
        // SAFETY: valid create info; the callback is a plain function living for the whole process.
        let _messenger = unsafe { du.create_debug_utils_messenger(&mci, None) };
        out.set("messenger", json!(_messenger.is_ok()));
    }

    // SAFETY: instance is alive.
    let pdevs = vkres(unsafe { instance.enumerate_physical_devices() }, "enumerate physical devices");
    let pdev = *pdevs
        .iter()
        .find(|&&p| {
            // SAFETY: p comes from this instance.
            unsafe { instance.get_physical_device_properties(p) }.device_type == vk::PhysicalDeviceType::DISCRETE_GPU
        })
        .or(pdevs.first())
        .unwrap_or_else(|| usage("no physical device"));
    let mut driver_props = vk::PhysicalDeviceDriverProperties::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut driver_props);
    // SAFETY: pdev comes from this instance; the chained struct outlives the call.
    unsafe { instance.get_physical_device_properties2(pdev, &mut props2) };
    let props = props2.properties;
    let dev_name = carray_str(&props.device_name);
    out.set(
        "device",
        json!({
            "name": dev_name, "vendor_id": hex(props.vendor_id as u64), "device_id": hex(props.device_id as u64),
            "driver_version_raw": props.driver_version, "driver_version_nv": decode_nv_driver(props.driver_version),
            "driver_name": carray_str(&driver_props.driver_name), "driver_info": carray_str(&driver_props.driver_info),
            "api": format!("{}.{}.{}", vk::api_version_major(props.api_version), vk::api_version_minor(props.api_version), vk::api_version_patch(props.api_version)),
            "max_storage_buffer_range": props.limits.max_storage_buffer_range,
        }),
    );

    // SAFETY: pdev comes from this instance.
    let dexts = vkres(unsafe { instance.enumerate_device_extension_properties(pdev) }, "enumerate device exts");
    let spec = |n: &CStr| -> Option<u32> {
        dexts.iter().find(|e| e.extension_name_as_c_str() == Ok(n)).map(|e| e.spec_version)
    };
    let watched: [&CStr; 8] = [
        ash::ext::device_fault::NAME,
        ash::ext::device_address_binding_report::NAME,
        ash::ext::memory_budget::NAME,
        ash::nv::device_diagnostics_config::NAME,
        ash::nv::device_diagnostic_checkpoints::NAME,
        c"VK_KHR_device_fault",
        ash::ext::device_memory_report::NAME,
        ash::khr::synchronization2::NAME,
    ];
    out.set(
        "extensions_offered",
        Value::Object(watched.iter().map(|n| (n.to_string_lossy().into_owned(), json!(spec(n)))).collect()),
    );

    // Features offered.
    let shader_int64 = {
        // SAFETY: pdev comes from this instance.
        unsafe { instance.get_physical_device_features(pdev) }.shader_int64
    };
    let mut f_fault = vk::PhysicalDeviceFaultFeaturesEXT::default();
    let mut f_bind = vk::PhysicalDeviceAddressBindingReportFeaturesEXT::default();
    let mut f_diag = vk::PhysicalDeviceDiagnosticsConfigFeaturesNV::default();
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
    let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
    {
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f12).push_next(&mut f13);
        if spec(ash::ext::device_fault::NAME).is_some() {
            f2 = f2.push_next(&mut f_fault);
        }
        if spec(ash::ext::device_address_binding_report::NAME).is_some() {
            f2 = f2.push_next(&mut f_bind);
        }
        if spec(ash::nv::device_diagnostics_config::NAME).is_some() {
            f2 = f2.push_next(&mut f_diag);
        }
        // SAFETY: pdev comes from this instance; every chained struct belongs to an offered extension
        // or core 1.2/1.3 and outlives the call.
        unsafe { instance.get_physical_device_features2(pdev, &mut f2) };
    }
    out.set(
        "features_offered",
        json!({
            "deviceFault": f_fault.device_fault, "deviceFaultVendorBinary": f_fault.device_fault_vendor_binary,
            "reportAddressBinding": f_bind.report_address_binding, "diagnosticsConfig": f_diag.diagnostics_config,
            "bufferDeviceAddress": f12.buffer_device_address, "synchronization2": f13.synchronization2,
            "shaderInt64": shader_int64,
        }),
    );

    // Device.
    // SAFETY: pdev comes from this instance.
    let qfams = unsafe { instance.get_physical_device_queue_family_properties(pdev) };
    let qfi = qfams
        .iter()
        .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
        .unwrap_or_else(|| usage("no compute queue")) as u32;
    let mut dext: Vec<*const c_char> = Vec::new();
    let mut enabled: Vec<String> = Vec::new();
    let mut want = |n: &CStr, on: bool| {
        if on && spec(n).is_some() {
            dext.push(n.as_ptr());
            enabled.push(n.to_string_lossy().into_owned());
            true
        } else {
            false
        }
    };
    let has_fault = want(ash::ext::device_fault::NAME, f_fault.device_fault == vk::TRUE);
    let has_bind = want(ash::ext::device_address_binding_report::NAME, f_bind.report_address_binding == vk::TRUE);
    let has_budget = want(ash::ext::memory_budget::NAME, true);
    let diag = args.config.diag_flags();
    let has_diag = want(ash::nv::device_diagnostics_config::NAME, diag.is_some() && f_diag.diagnostics_config == vk::TRUE);
    let has_ckpt = want(ash::nv::device_diagnostic_checkpoints::NAME, args.config.checkpoint_ext());
    out.set("extensions_enabled", json!(enabled));
    if diag.is_some() && !has_diag {
        out.set("config_unavailable", json!("VK_NV_device_diagnostics_config or its feature is not offered"));
    }
    if args.config.checkpoint_ext() && !has_ckpt {
        out.set("checkpoints_unavailable", json!("VK_NV_device_diagnostic_checkpoints is not offered"));
    }
    out.set("diag_flags", json!(diag.map(|f| f.as_raw())));

    let prio = [1.0f32];
    let qci = [vk::DeviceQueueCreateInfo::default().queue_family_index(qfi).queue_priorities(&prio)];
    let feats = vk::PhysicalDeviceFeatures::default().shader_int64(shader_int64 == vk::TRUE);
    let mut e12 = vk::PhysicalDeviceVulkan12Features::default().buffer_device_address(f12.buffer_device_address == vk::TRUE);
    let mut e13 = vk::PhysicalDeviceVulkan13Features::default().synchronization2(f13.synchronization2 == vk::TRUE);
    let mut e_fault = vk::PhysicalDeviceFaultFeaturesEXT::default()
        .device_fault(true)
        .device_fault_vendor_binary(f_fault.device_fault_vendor_binary == vk::TRUE);
    let mut e_bind = vk::PhysicalDeviceAddressBindingReportFeaturesEXT::default().report_address_binding(true);
    let mut e_diag = vk::PhysicalDeviceDiagnosticsConfigFeaturesNV::default().diagnostics_config(true);
    let mut e_diag_ci = vk::DeviceDiagnosticsConfigCreateInfoNV::default().flags(diag.unwrap_or_default());
    let mut dci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&qci)
        .enabled_extension_names(&dext)
        .enabled_features(&feats)
        .push_next(&mut e12)
        .push_next(&mut e13);
    if has_fault {
        dci = dci.push_next(&mut e_fault);
    }
    if has_bind {
        dci = dci.push_next(&mut e_bind);
    }
    if has_diag {
        dci = dci.push_next(&mut e_diag).push_next(&mut e_diag_ci);
    }
    let t = Instant::now();
    // SAFETY: valid create info; every chained struct belongs to an enabled extension or core 1.2/1.3
    // and outlives the call.
    let device = vkres(unsafe { instance.create_device(pdev, &dci, None) }, "vkCreateDevice");
    out.event("device created", json!({"ms": round1(t.elapsed().as_secs_f64() * 1e3)}));
    // SAFETY: family qfi was requested with one queue.
    let queue = unsafe { device.get_device_queue(qfi, 0) };
    // SAFETY: pdev comes from this instance.
    let mem_props = unsafe { instance.get_physical_device_memory_properties(pdev) };
    let ckpt2 = if has_ckpt {
        // SAFETY: looks a device function up by its NUL-terminated name; null when not provided.
        let p = unsafe { instance.get_device_proc_addr(device.handle(), c"vkGetQueueCheckpointData2NV".as_ptr()) };
        // SAFETY: a non-null result of vkGetDeviceProcAddr for this name has this signature.
        p.map(|f| unsafe { std::mem::transmute::<unsafe extern "system" fn(), vk::PFN_vkGetQueueCheckpointData2NV>(f) })
    } else {
        None
    };
    out.set("checkpoint_data2_available", json!(ckpt2.is_some()));
    let gpu = Gpu {
        dbg: has_debug_utils.then(|| ash::ext::debug_utils::Device::new(&instance, &device)),
        fault: has_fault.then(|| ash::ext::device_fault::Device::new(&instance, &device)),
        ckpt: has_ckpt.then(|| ash::nv::device_diagnostic_checkpoints::Device::new(&instance, &device)),
        ckpt2,
        budget: has_budget,
        vendor_binary: f_fault.device_fault_vendor_binary == vk::TRUE,
        max_storage_range: props.limits.max_storage_buffer_range as u64,
        instance,
        pdev,
        device,
        queue,
        qfi,
        mem_props,
    };
    out.emit("device");
    run(&gpu, &args, &mut out);
}

fn run(gpu: &Gpu, args: &Args, out: &mut Out) {
    let d = &gpu.device;
    let storage = vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST;
    let (sink, _sink_mem, sink_addr) = gpu.buffer(64 * 1024, storage, "nvfm sink (64 KiB)");
    let (keep, _keep_mem, _) = gpu.buffer(4096, storage, "nvfm keepalive (4 KiB)");
    out.set("sink", json!({"address": hex(sink_addr)}));

    let pool_info = vk::CommandPoolCreateInfo::default()
        .queue_family_index(gpu.qfi)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    // SAFETY: valid create info.
    let pool = vkres(unsafe { d.create_command_pool(&pool_info, None) }, "vkCreateCommandPool");
    let cbai = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(4);
    // SAFETY: valid allocate info.
    let cbs = vkres(unsafe { d.allocate_command_buffers(&cbai) }, "vkAllocateCommandBuffers");
    let (cb_probe, cb_fault, cb_keep, cb_setup) = (cbs[0], cbs[1], cbs[2], cbs[3]);
    let dpsizes = [
        vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(8),
        vk::DescriptorPoolSize::default().ty(vk::DescriptorType::SAMPLED_IMAGE).descriptor_count(2),
    ];
    let dpi = vk::DescriptorPoolCreateInfo::default().max_sets(8).pool_sizes(&dpsizes);
    // SAFETY: valid create info.
    let dpool = vkres(unsafe { d.create_descriptor_pool(&dpi, None) }, "vkCreateDescriptorPool");
    let alloc_set = |dsl: vk::DescriptorSetLayout| -> vk::DescriptorSet {
        let l = [dsl];
        let ai = vk::DescriptorSetAllocateInfo::default().descriptor_pool(dpool).set_layouts(&l);
        // SAFETY: valid allocate info; the pool has room for the few sets this tool makes.
        vkres(unsafe { d.allocate_descriptor_sets(&ai) }, "vkAllocateDescriptorSets")[0]
    };
    let write_buffer = |set: vk::DescriptorSet, binding: u32, buf: vk::Buffer, range: u64| {
        let bi = [vk::DescriptorBufferInfo::default().buffer(buf).offset(0).range(range)];
        let w = [vk::WriteDescriptorSet::default()
            .dst_set(set)
            .dst_binding(binding)
            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
            .buffer_info(&bi)];
        // SAFETY: set, buffer and range are valid; the set is not in use.
        unsafe { d.update_descriptor_sets(&w, &[]) };
    };
    let fence_info = vk::FenceCreateInfo::default();
    // SAFETY: valid create info.
    let fence = vkres(unsafe { d.create_fence(&fence_info, None) }, "vkCreateFence");

    let busy = gpu.pipeline(BUSY_SPV, &[(0, vk::DescriptorType::STORAGE_BUFFER)], 4, "nvfm busy");
    let busy_set = alloc_set(busy.dsl);
    write_buffer(busy_set, 0, sink, vk::WHOLE_SIZE);

    let record_busy = |cb: vk::CommandBuffer, iters: u32| {
        // SAFETY: cb is in the recording state; pipeline, layout and set are alive and compatible.
        unsafe {
            d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, busy.pipe);
            d.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, busy.layout, 0, &[busy_set], &[]);
            d.cmd_push_constants(cb, busy.layout, vk::ShaderStageFlags::COMPUTE, 0, push(&iters));
            d.cmd_dispatch(cb, 1, 1, 1);
        }
    };
    let begin = |cb: vk::CommandBuffer, flags: vk::CommandBufferUsageFlags| {
        let bi = vk::CommandBufferBeginInfo::default().flags(flags);
        // SAFETY: cb is not pending (its fence was waited or it was never submitted).
        vkres(unsafe { d.begin_command_buffer(cb, &bi) }, "vkBeginCommandBuffer");
    };
    let end = |cb: vk::CommandBuffer| {
        // SAFETY: cb is recording.
        vkres(unsafe { d.end_command_buffer(cb) }, "vkEndCommandBuffer");
    };
    // Submits one command buffer with the fence and waits up to `cap`; returns (result, ms).
    let submit_wait = |cb: vk::CommandBuffer, cap: Duration| -> (vk::Result, f64) {
        let cbl = [cb];
        let si = [vk::SubmitInfo::default().command_buffers(&cbl)];
        let t = Instant::now();
        // SAFETY: cb is executable; the fence is unsignalled and not in use.
        if let Err(e) = unsafe { d.queue_submit(gpu.queue, &si, fence) } {
            return (e, 0.0);
        }
        // SAFETY: the fence belongs to this device.
        let r = unsafe { d.wait_for_fences(&[fence], true, cap.as_nanos() as u64) };
        let el = t.elapsed().as_secs_f64() * 1e3;
        let r = r.err().unwrap_or(vk::Result::SUCCESS);
        if r == vk::Result::SUCCESS {
            // SAFETY: the fence is signalled and no longer in use.
            let _ = unsafe { d.reset_fences(&[fence]) };
        }
        (r, el)
    };

    // Calibration: the busy dispatch with 2^20 iterations, timed through its fence (twice; the
    // second is used, the first includes first-use costs).
    let probe_iters: u32 = 1 << 20;
    let mut probe = Vec::new();
    for _ in 0..2 {
        // SAFETY: cb_probe is not pending (its last submission's fence was waited on).
        let _ = unsafe { d.reset_command_buffer(cb_probe, vk::CommandBufferResetFlags::empty()) };
        begin(cb_probe, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        record_busy(cb_probe, probe_iters);
        end(cb_probe);
        let (r, el) = submit_wait(cb_probe, Duration::from_secs(20));
        probe.push(json!({"result": format!("{r:?}"), "ms": round1(el * 10.0) / 10.0}));
        if r != vk::Result::SUCCESS {
            out.set("calibration", json!({"probe_iters": probe_iters, "probes": probe, "error": "probe did not finish"}));
            out.emit("probe-failed");
            // SAFETY: ends the process at once, without driver teardown.
            unsafe { _exit(4) }
        }
    }
    let probe_ms = probe[1]["ms"].as_f64().unwrap_or(1.0).max(0.01);
    let busy_iters = ((probe_iters as f64) * args.busy_ms / probe_ms).clamp(1.0, u32::MAX as f64 / 2.0) as u32;
    out.set(
        "calibration",
        json!({"probe_iters": probe_iters, "probes": probe, "busy_iters": busy_iters,
               "predicted_busy_ms": round1(busy_iters as f64 / probe_iters as f64 * probe_ms)}),
    );

    if args.case == Case::Canary {
        canary(gpu, args, out, cb_probe, &record_busy, &begin, &end, &submit_wait, probe_iters);
    }

    // Keepalive command buffer: a 4 KiB fill, submitted every keepalive_ms while we wait (what a
    // game's next frames do).
    begin(cb_keep, vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
    // SAFETY: cb_keep is recording; keep is a live TRANSFER_DST buffer of 4 KiB.
    unsafe { d.cmd_fill_buffer(cb_keep, keep, 0, 4096, 0x6b65_6570) };
    end(cb_keep);

    // Case setup: what the faulting dispatch touches, and how to free it.
    enum Free {
        None,
        Buffer(vk::Buffer, vk::DeviceMemory),
        Memory(vk::DeviceMemory),
    }
    let mut free = Free::None;
    let fault_pipe: Pipe;
    let fault_set: Option<vk::DescriptorSet>;
    let fault_pc: Vec<u8>;
    let fault_groups: u32;
    let mut targets = Map::new();
    match args.case {
        Case::UafDescriptor | Case::Healthy => {
            let name = "nvfm victim storage (256 MiB)";
            let (buf, mem, addr) = gpu.buffer(VICTIM_SIZE, storage, name);
            let range = VICTIM_SIZE.min(gpu.max_storage_range & !3);
            let stride_words = (range / FAULT_INVOCATIONS / 4) as u32;
            fault_pipe = gpu.pipeline(WRITE_STORAGE_SPV, &[(0, vk::DescriptorType::STORAGE_BUFFER)], 8, "nvfm write_storage");
            let set = alloc_set(fault_pipe.dsl);
            write_buffer(set, 0, buf, range);
            fault_set = Some(set);
            let pc: [u32; 2] = [stride_words, 0xdead_0000];
            fault_pc = push(&pc).to_vec();
            fault_groups = FAULT_GROUPS;
            targets.insert("victim".into(), json!({"name": name, "base": hex(addr), "size": VICTIM_SIZE, "descriptor_range": range,
                "writes": {"first": hex(addr), "last": hex(addr + (FAULT_INVOCATIONS - 1) * stride_words as u64 * 4), "count": FAULT_INVOCATIONS}}));
            if args.case == Case::UafDescriptor {
                free = Free::Buffer(buf, mem);
            }
        }
        Case::BdaFreed => {
            let name = "nvfm victim bda (256 MiB)";
            let (buf, mem, addr) = gpu.buffer(VICTIM_SIZE, storage, name);
            fault_pipe = gpu.pipeline(WRITE_BDA_SPV, &[], 16, "nvfm write_bda");
            fault_set = None;
            let stride = (VICTIM_SIZE / FAULT_INVOCATIONS) as u32;
            let pc = PcBda { base: addr, stride_bytes: stride, value: 0xbda0_0000 };
            fault_pc = push(&pc).to_vec();
            fault_groups = FAULT_GROUPS;
            targets.insert("victim".into(), json!({"name": name, "base": hex(addr), "size": VICTIM_SIZE,
                "writes": {"first": hex(addr), "last": hex(addr + (FAULT_INVOCATIONS - 1) * stride as u64), "count": FAULT_INVOCATIONS}}));
            free = Free::Buffer(buf, mem);
        }
        Case::BdaPastEnd => {
            let name = "nvfm live target (64 MiB)";
            let (_buf, _mem, addr) = gpu.buffer(LIVE_SIZE, storage, name);
            fault_pipe = gpu.pipeline(WRITE_BDA_SPV, &[], 16, "nvfm write_bda");
            fault_set = None;
            let base = addr + LIVE_SIZE + PAST_END;
            let stride = 1024u32;
            let pc = PcBda { base, stride_bytes: stride, value: 0xbeef_0000 };
            fault_pc = push(&pc).to_vec();
            fault_groups = FAULT_GROUPS;
            targets.insert("live".into(), json!({"name": name, "base": hex(addr), "size": LIVE_SIZE, "end": hex(addr + LIVE_SIZE)}));
            targets.insert("writes".into(), json!({"first": hex(base), "last": hex(base + (FAULT_INVOCATIONS - 1) * stride as u64),
                "count": FAULT_INVOCATIONS, "past_end": PAST_END}));
        }
        Case::ImageFreed => {
            let name = "nvfm victim image (8192x8192 R32_UINT, 256 MiB)";
            let fmt = vk::Format::R32_UINT;
            // SAFETY: pdev belongs to this instance.
            let fp = unsafe { gpu.instance.get_physical_device_format_properties(gpu.pdev, fmt) };
            targets.insert("format_sampled".into(), json!(fp.optimal_tiling_features.contains(vk::FormatFeatureFlags::SAMPLED_IMAGE)));
            let ici = vk::ImageCreateInfo::default()
                .image_type(vk::ImageType::TYPE_2D)
                .format(fmt)
                .extent(vk::Extent3D { width: IMAGE_SIDE, height: IMAGE_SIDE, depth: 1 })
                .mip_levels(1)
                .array_layers(1)
                .samples(vk::SampleCountFlags::TYPE_1)
                .tiling(vk::ImageTiling::OPTIMAL)
                .usage(vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_DST)
                .initial_layout(vk::ImageLayout::UNDEFINED);
            // SAFETY: valid create info.
            let img = vkres(unsafe { d.create_image(&ici, None) }, "vkCreateImage");
            gpu.name(img, name);
            // SAFETY: img was just created on this device.
            let req = unsafe { d.get_image_memory_requirements(img) };
            let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().image(img);
            let ai = vk::MemoryAllocateInfo::default()
                .allocation_size(req.size)
                .memory_type_index(gpu.memory_type(req.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL))
                .push_next(&mut dedicated);
            // SAFETY: valid allocate info.
            let mem = vkres(unsafe { d.allocate_memory(&ai, None) }, "vkAllocateMemory (image)");
            gpu.name(mem, &format!("{name} (memory)"));
            // SAFETY: unbound image, dedicated memory, offset 0.
            vkres(unsafe { d.bind_image_memory(img, mem, 0) }, "vkBindImageMemory");
            let range = vk::ImageSubresourceRange::default()
                .aspect_mask(vk::ImageAspectFlags::COLOR)
                .level_count(1)
                .layer_count(1);
            let vci = vk::ImageViewCreateInfo::default()
                .image(img)
                .view_type(vk::ImageViewType::TYPE_2D)
                .format(fmt)
                .subresource_range(range);
            // SAFETY: valid create info for a live image.
            let view = vkres(unsafe { d.create_image_view(&vci, None) }, "vkCreateImageView");
            gpu.name(view, &format!("{name} (view)"));
            // Setup: clear the image and move it to SHADER_READ_ONLY_OPTIMAL.
            begin(cb_setup, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            let to_dst = [vk::ImageMemoryBarrier::default()
                .image(img)
                .subresource_range(range)
                .old_layout(vk::ImageLayout::UNDEFINED)
                .new_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
                .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE)];
            let to_read = [vk::ImageMemoryBarrier::default()
                .image(img)
                .subresource_range(range)
                .old_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
                .new_layout(vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL)
                .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                .dst_access_mask(vk::AccessFlags::SHADER_READ)];
            // SAFETY: cb_setup is recording; the barriers and the clear name a live image.
            unsafe {
                d.cmd_pipeline_barrier(cb_setup, vk::PipelineStageFlags::TOP_OF_PIPE, vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(), &[], &[], &to_dst);
                d.cmd_clear_color_image(cb_setup, img, vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                    &vk::ClearColorValue { uint32: [7, 0, 0, 0] }, &[range]);
                d.cmd_pipeline_barrier(cb_setup, vk::PipelineStageFlags::TRANSFER, vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::DependencyFlags::empty(), &[], &[], &to_read);
            }
            end(cb_setup);
            let (r, el) = submit_wait(cb_setup, Duration::from_secs(20));
            out.event("image setup", json!({"result": format!("{r:?}"), "ms": round1(el)}));
            fault_pipe = gpu.pipeline(
                FETCH_IMAGE_SPV,
                &[(0, vk::DescriptorType::SAMPLED_IMAGE), (1, vk::DescriptorType::STORAGE_BUFFER)],
                8,
                "nvfm fetch_image",
            );
            let set = alloc_set(fault_pipe.dsl);
            let ii = [vk::DescriptorImageInfo::default().image_view(view).image_layout(vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL)];
            let w = [vk::WriteDescriptorSet::default()
                .dst_set(set)
                .dst_binding(0)
                .descriptor_type(vk::DescriptorType::SAMPLED_IMAGE)
                .image_info(&ii)];
            // SAFETY: the set, view and layout are valid; the set is not in use.
            unsafe { d.update_descriptor_sets(&w, &[]) };
            write_buffer(set, 1, sink, vk::WHOLE_SIZE);
            fault_set = Some(set);
            let step = (IMAGE_SIDE as u64 * IMAGE_SIDE as u64 / FAULT_INVOCATIONS) as u32;
            let pc: [u32; 2] = [IMAGE_SIDE, step];
            fault_pc = push(&pc).to_vec();
            fault_groups = FAULT_GROUPS;
            targets.insert("victim".into(), json!({"name": name, "handle_image": hex(vk::Handle::as_raw(img)),
                "memory_size": req.size, "texels_read": FAULT_INVOCATIONS, "step": step}));
            free = Free::Memory(mem);
        }
        Case::Endless => {
            fault_pipe = gpu.pipeline(ENDLESS_SPV, &[(0, vk::DescriptorType::STORAGE_BUFFER)], 8, "nvfm endless");
            let set = alloc_set(fault_pipe.dsl);
            write_buffer(set, 0, sink, vk::WHOLE_SIZE);
            fault_set = Some(set);
            let pc: [u32; 2] = [1_000_000, u32::MAX];
            fault_pc = pc.iter().flat_map(|w| w.to_ne_bytes()).collect();
            fault_groups = 1;
        }
        Case::Canary => unreachable!("handled above"),
    }
    out.set("targets", Value::Object(targets));

    // The faulting command buffer: [ckpt 1] busy, barrier, [ckpt 2] fault dispatch, [ckpt 3].
    begin(cb_fault, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
    let ckpt = |cb: vk::CommandBuffer, m: u64| {
        if args.config.records_checkpoints() {
            if let Some(c) = &gpu.ckpt {
                // SAFETY: cb is recording on a device with the checkpoint extension; the marker is an
                // opaque value the driver never dereferences.
                unsafe { c.cmd_set_checkpoint(cb, m as *const c_void) };
            }
        }
    };
    ckpt(cb_fault, CKPT_BEFORE_BUSY);
    record_busy(cb_fault, busy_iters);
    let mb = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
        .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
    // SAFETY: cb_fault is recording; a global memory barrier between two compute dispatches.
    unsafe {
        d.cmd_pipeline_barrier(cb_fault, vk::PipelineStageFlags::COMPUTE_SHADER, vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::DependencyFlags::empty(), &mb, &[], &[]);
    }
    ckpt(cb_fault, CKPT_BEFORE_FAULT);
    // SAFETY: cb_fault is recording; the pipeline, layout and set are alive and compatible, and the
    // push-constant bytes match the layout's range.
    unsafe {
        d.cmd_bind_pipeline(cb_fault, vk::PipelineBindPoint::COMPUTE, fault_pipe.pipe);
        if let Some(set) = fault_set {
            d.cmd_bind_descriptor_sets(cb_fault, vk::PipelineBindPoint::COMPUTE, fault_pipe.layout, 0, &[set], &[]);
        }
        d.cmd_push_constants(cb_fault, fault_pipe.layout, vk::ShaderStageFlags::COMPUTE, 0, &fault_pc);
        d.cmd_dispatch(cb_fault, fault_groups, 1, 1);
    }
    ckpt(cb_fault, CKPT_AFTER_FAULT);
    end(cb_fault);

    out.set("budget_before", gpu.budget_json());
    out.emit("ready");

    // Submit, then free at once.
    let cbl = [cb_fault];
    let si = [vk::SubmitInfo::default().command_buffers(&cbl)];
    let t_submit = Instant::now();
    let since = |t: Instant| t.duration_since(t_submit).as_secs_f64() * 1e3;
    // SAFETY: cb_fault is executable; the fence is unsignalled and not in use.
    let r = unsafe { d.queue_submit(gpu.queue, &si, fence) };
    let submit_ms = t_submit.elapsed().as_secs_f64() * 1e3;
    out.event("submitted", json!({"result": format!("{:?}", r.err().unwrap_or(vk::Result::SUCCESS)), "call_ms": submit_ms}));
    match free {
        Free::None => {}
        Free::Buffer(buf, mem) => {
            let t = Instant::now();
            // SAFETY: deliberately invalid use (the point of the case): the pending command buffer
            // still references this buffer and memory. The handles are valid and destroyed once.
            unsafe {
                d.destroy_buffer(buf, None);
                d.free_memory(mem, None);
            }
            out.event("freed buffer+memory", json!({"after_submit_ms": since(t), "call_ms": t.elapsed().as_secs_f64() * 1e3}));
        }
        Free::Memory(mem) => {
            let t = Instant::now();
            // SAFETY: deliberately invalid use (the point of the case): the pending dispatch reads
            // the image bound to this memory. The handle is valid and freed once.
            unsafe { d.free_memory(mem, None) };
            out.event("freed image memory", json!({"after_submit_ms": since(t), "call_ms": t.elapsed().as_secs_f64() * 1e3}));
        }
    }
    out.set("budget_after_free", gpu.budget_json());
    out.emit("submitted");

    // Wait: 100 ms fence slices, a keepalive submit each keepalive_ms, until signal, loss or cap.
    let cap = Duration::from_secs_f64(args.wait_cap_s);
    let slice = Duration::from_millis(100);
    let mut outcome = Map::new();
    let mut keep_submits = 0u64;
    let mut last_keep = Instant::now();
    let mut lost: Option<(f64, &str)> = None;
    let mut signalled: Option<f64> = None;
    let mut during_done = false;
    let mut nudged = args.nudge_ms == 0;
    let mut other_errors: Vec<Value> = Vec::new();
    loop {
        // SAFETY: the fence belongs to this device.
        let r = unsafe { d.wait_for_fences(&[fence], true, slice.as_nanos() as u64) };
        match r {
            Ok(()) => {
                signalled = Some(since(Instant::now()));
                break;
            }
            Err(vk::Result::TIMEOUT) => {}
            Err(vk::Result::ERROR_DEVICE_LOST) => {
                lost = Some((since(Instant::now()), "vkWaitForFences"));
                break;
            }
            Err(e) => {
                if other_errors.len() < 20 {
                    other_errors.push(json!({"t_ms": since(Instant::now()), "call": "vkWaitForFences", "result": format!("{e:?}")}));
                }
            }
        }
        if args.keepalive_ms > 0 && last_keep.elapsed() >= Duration::from_millis(args.keepalive_ms) {
            last_keep = Instant::now();
            let kl = [cb_keep];
            let ks = [vk::SubmitInfo::default().command_buffers(&kl)];
            // SAFETY: cb_keep was recorded with SIMULTANEOUS_USE, so it may be pending many times.
            match unsafe { d.queue_submit(gpu.queue, &ks, vk::Fence::null()) } {
                Ok(()) => keep_submits += 1,
                Err(vk::Result::ERROR_DEVICE_LOST) => {
                    lost = Some((since(Instant::now()), "vkQueueSubmit (keepalive)"));
                    break;
                }
                Err(e) => {
                    if other_errors.len() < 20 {
                        other_errors.push(json!({"t_ms": since(Instant::now()), "call": "vkQueueSubmit", "result": format!("{e:?}")}));
                    }
                }
            }
        }
        if !nudged && t_submit.elapsed() >= Duration::from_millis(args.nudge_ms) {
            nudged = true;
            out.set("fault_info_before_nudge", gpu.fault_info_json());
            let target = NudgeTarget { instance: gpu.instance.clone(), pdev: gpu.pdev, qfi: gpu.qfi, mem_props: gpu.mem_props };
            let until = t_submit + cap + Duration::from_secs(5);
            out.event("nudge: starting the second device", json!({"after_submit_ms": since(Instant::now())}));
            std::thread::spawn(move || nudge(target, t_submit, until));
            out.emit("nudging");
        }
        if !during_done && t_submit.elapsed() >= Duration::from_secs(3) {
            during_done = true;
            out.event("still pending at 3 s: reading checkpoints and fault info", json!({}));
            out.set("checkpoints_during", gpu.checkpoints_json());
            out.set("fault_info_during", gpu.fault_info_json());
            out.emit("pending");
        }
        if t_submit.elapsed() >= cap {
            break;
        }
    }
    outcome.insert("keepalive_submits".into(), json!(keep_submits));
    outcome.insert("other_errors".into(), Value::Array(other_errors));
    if let Some(t) = signalled {
        outcome.insert("fence".into(), json!("signalled"));
        outcome.insert("signalled_ms".into(), json!(round1(t)));
        out.event("fence signalled", json!({"after_submit_ms": t}));
        // Observe a while longer: does a loss come later? A keepalive with a fence each 100 ms.
        // SAFETY: the fence is signalled and no longer in use.
        let _ = unsafe { d.reset_fences(&[fence]) };
        let obs_end = Instant::now() + Duration::from_secs_f64(args.observe_s);
        let mut obs = 0u32;
        while Instant::now() < obs_end {
            let (r, _) = submit_wait(cb_keep, Duration::from_secs(2));
            obs += 1;
            if r == vk::Result::ERROR_DEVICE_LOST {
                lost = Some((since(Instant::now()), "observe (keepalive submit/wait)"));
                break;
            }
            if r != vk::Result::SUCCESS {
                outcome.insert("observe_error".into(), json!(format!("{r:?}")));
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        outcome.insert("observe_submits".into(), json!(obs));
    } else if lost.is_none() {
        outcome.insert("fence".into(), json!("not signalled at cap"));
        out.event("cap reached without signal or loss", json!({"after_submit_ms": since(Instant::now())}));
    }
    if let Some((t, by)) = lost {
        outcome.insert("device_lost_ms".into(), json!(round1(t)));
        outcome.insert("device_lost_seen_by".into(), json!(by));
        out.event("device lost", json!({"after_submit_ms": t, "seen_by": by}));
        if args.nudge_ms > 0 {
            // Does the nudge's device still work after the first one's loss? Wait (up to 3 s) for a
            // nudge dispatch submitted after the loss to come back.
            let t_wait = Instant::now();
            while t_wait.elapsed() < Duration::from_secs(3) && !nudge_sample_after(t) {
                std::thread::sleep(Duration::from_millis(50));
            }
            out.event("nudge: after the loss", json!({"waited_ms": t_wait.elapsed().as_secs_f64() * 1e3,
                "dispatch_after_loss_back": nudge_sample_after(t)}));
        }
    } else {
        outcome.insert("device_lost_ms".into(), Value::Null);
    }
    // SAFETY: the fence belongs to this device; status only.
    let fs = unsafe { d.get_fence_status(fence) };
    outcome.insert("fence_status_at_end".into(), json!(format!("{fs:?}")));
    out.set("outcome", Value::Object(outcome));
    out.emit("outcome");

    out.set("budget_at_end", gpu.budget_json());
    out.set("checkpoints_after", gpu.checkpoints_json());
    out.emit("checkpoints");
    out.event("reading vkGetDeviceFaultInfoEXT", json!({}));
    out.set("fault_info", gpu.fault_info_json());
    // What the binding report knew about the case's own addresses (ground truth, not a driver answer).
    let mut known = Map::new();
    if let Some(t) = out.map.get("targets").cloned() {
        for (k, v) in t.as_object().into_iter().flatten() {
            let first = v.get("writes").and_then(|w| w.get("first")).or_else(|| v.get("first")).and_then(|s| s.as_str());
            let base = v.get("base").and_then(|s| s.as_str()).or(first);
            if let Some(b) = base.and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()) {
                known.insert(k.clone(), resolve(b, b));
            }
            if let Some(f) = first.and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()) {
                known.insert(format!("{k}.first_write"), resolve(f, f));
            }
        }
    }
    out.set("binding_lookup_of_known_targets", Value::Object(known));
    out.event("done", json!({}));
    out.emit("done");
    // SAFETY: ends the process at once; no driver teardown on a lost or hung device.
    unsafe { _exit(0) }
}

/// The nudge's steps and its dispatches ([ms after the faulting submit at its submit, its wait in
/// ms, the result]); written by the nudge thread, read by `Out::emit`.
static NUDGE_STEPS: Mutex<Vec<Value>> = Mutex::new(Vec::new());
static NUDGE_SAMPLES: Mutex<Vec<Value>> = Mutex::new(Vec::new());

/// What the nudge needs of the first device's instance to make a device of its own.
struct NudgeTarget {
    instance: ash::Instance,
    pdev: vk::PhysicalDevice,
    qfi: u32,
    mem_props: vk::PhysicalDeviceMemoryProperties,
}

fn nudge_step(t_submit: Instant, what: &str, extra: Value) {
    let t = t_submit.elapsed().as_secs_f64() * 1e3;
    log(&format!("nudge: {what} {extra}"));
    if let Ok(mut v) = NUDGE_STEPS.lock() {
        v.push(json!({"after_submit_ms": round1(t), "what": what, "extra": extra}));
    }
}

/// Whether a nudge dispatch submitted after `lost_ms` (ms after the faulting submit) has come back.
fn nudge_sample_after(lost_ms: f64) -> bool {
    NUDGE_SAMPLES
        .lock()
        .map(|v| v.iter().any(|s| s[0].as_f64().unwrap_or(0.0) > lost_ms))
        .unwrap_or(false)
}

/// The nudge thread (see the file's header). Every failure is recorded, never fatal: the process
/// must go on to record the first device's loss and fault info.
fn nudge(n: NudgeTarget, t_submit: Instant, until: Instant) {
    if let Err((call, r)) = nudge_run(&n, t_submit, until) {
        nudge_step(t_submit, "failed", json!({"call": call, "result": format!("{r:?}")}));
    }
}

fn nudge_run(n: &NudgeTarget, t_submit: Instant, until: Instant) -> Result<(), (&'static str, vk::Result)> {
    let since = |t: Instant| round1(t.duration_since(t_submit).as_secs_f64() * 1e3);
    let prio = [1.0f32];
    let qci = [vk::DeviceQueueCreateInfo::default().queue_family_index(n.qfi).queue_priorities(&prio)];
    let dci = vk::DeviceCreateInfo::default().queue_create_infos(&qci);
    nudge_step(t_submit, "vkCreateDevice", json!({}));
    let t = Instant::now();
    // SAFETY: valid create info (one queue, no extensions, no features); pdev comes from this instance.
    let d = unsafe { n.instance.create_device(n.pdev, &dci, None) }.map_err(|e| ("vkCreateDevice", e))?;
    nudge_step(t_submit, "device created", json!({"call_ms": round1(t.elapsed().as_secs_f64() * 1e3)}));
    // SAFETY: family qfi was requested with one queue.
    let queue = unsafe { d.get_device_queue(n.qfi, 0) };
    let bci = vk::BufferCreateInfo::default()
        .size(4096)
        .usage(vk::BufferUsageFlags::STORAGE_BUFFER)
        .sharing_mode(vk::SharingMode::EXCLUSIVE);
    // SAFETY: valid create info.
    let buf = unsafe { d.create_buffer(&bci, None) }.map_err(|e| ("vkCreateBuffer", e))?;
    // SAFETY: buf was just created on this device.
    let req = unsafe { d.get_buffer_memory_requirements(buf) };
    let mt = (0..n.mem_props.memory_type_count)
        .find(|&i| {
            req.memory_type_bits & (1 << i) != 0
                && n.mem_props.memory_types[i as usize].property_flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        })
        .ok_or(("no device-local memory type", vk::Result::ERROR_UNKNOWN))?;
    let mai = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(mt);
    // SAFETY: valid allocate info.
    let mem = unsafe { d.allocate_memory(&mai, None) }.map_err(|e| ("vkAllocateMemory", e))?;
    // SAFETY: buf and mem are unbound objects of this device; offset 0 fits the requirements.
    unsafe { d.bind_buffer_memory(buf, mem, 0) }.map_err(|e| ("vkBindBufferMemory", e))?;
    let words = ash::util::read_spv(&mut std::io::Cursor::new(BUSY_SPV)).unwrap_or_default();
    // SAFETY: the SPIR-V was validated when it was built (shaders/build.sh).
    let module = unsafe { d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None) }
        .map_err(|e| ("vkCreateShaderModule", e))?;
    let b = [vk::DescriptorSetLayoutBinding::default()
        .binding(0)
        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
        .descriptor_count(1)
        .stage_flags(vk::ShaderStageFlags::COMPUTE)];
    // SAFETY: valid create info.
    let dsl = unsafe { d.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&b), None) }
        .map_err(|e| ("vkCreateDescriptorSetLayout", e))?;
    let pcr = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).size(4)];
    let layouts = [dsl];
    let pli = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts).push_constant_ranges(&pcr);
    // SAFETY: valid create info.
    let layout = unsafe { d.create_pipeline_layout(&pli, None) }.map_err(|e| ("vkCreatePipelineLayout", e))?;
    let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(c"main");
    let cpi = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout)];
    // SAFETY: valid create info; module and layout are alive.
    let pipe = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &cpi, None) }
        .map_err(|(_, e)| ("vkCreateComputePipelines", e))?[0];
    let sizes = [vk::DescriptorPoolSize::default().ty(vk::DescriptorType::STORAGE_BUFFER).descriptor_count(1)];
    // SAFETY: valid create info.
    let dpool = unsafe { d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None) }
        .map_err(|e| ("vkCreateDescriptorPool", e))?;
    // SAFETY: valid allocate info; the pool has room for this one set.
    let set = unsafe { d.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(dpool).set_layouts(&layouts)) }
        .map_err(|e| ("vkAllocateDescriptorSets", e))?[0];
    let bi = [vk::DescriptorBufferInfo::default().buffer(buf).range(vk::WHOLE_SIZE)];
    let w = [vk::WriteDescriptorSet::default()
        .dst_set(set)
        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
        .buffer_info(&bi)];
    // SAFETY: set and buffer are valid; the set is not in use.
    unsafe { d.update_descriptor_sets(&w, &[]) };
    let cpool_info = vk::CommandPoolCreateInfo::default().queue_family_index(n.qfi);
    // SAFETY: valid create info.
    let cpool = unsafe { d.create_command_pool(&cpool_info, None) }.map_err(|e| ("vkCreateCommandPool", e))?;
    let cbai = vk::CommandBufferAllocateInfo::default().command_pool(cpool).command_buffer_count(1);
    // SAFETY: valid allocate info.
    let cb = unsafe { d.allocate_command_buffers(&cbai) }.map_err(|e| ("vkAllocateCommandBuffers", e))?[0];
    // 2^16 iterations of the busy loop: about 0.25 ms (2^20 took 3.6-3.9 ms on the H100).
    let iters: u32 = 1 << 16;
    let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE);
    // SAFETY: cb is new (initial state); pipeline, layout and set are alive and compatible, and the
    // push-constant bytes match the layout's range.
    unsafe {
        d.begin_command_buffer(cb, &begin).map_err(|e| ("vkBeginCommandBuffer", e))?;
        d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipe);
        d.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
        d.cmd_push_constants(cb, layout, vk::ShaderStageFlags::COMPUTE, 0, push(&iters));
        d.cmd_dispatch(cb, 1, 1, 1);
        d.end_command_buffer(cb).map_err(|e| ("vkEndCommandBuffer", e))?;
    }
    // SAFETY: valid create info.
    let fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }.map_err(|e| ("vkCreateFence", e))?;
    nudge_step(t_submit, "ready", json!({"setup_ms": round1(t.elapsed().as_secs_f64() * 1e3)}));
    let cbl = [cb];
    let si = [vk::SubmitInfo::default().command_buffers(&cbl)];
    loop {
        let t = Instant::now();
        if t >= until {
            nudge_step(t_submit, "end (wait cap + 5 s)", json!({}));
            return Ok(());
        }
        // SAFETY: cb is executable and not pending (the last submit's fence was waited on); the
        // fence is unsignalled.
        let r = unsafe { d.queue_submit(queue, &si, fence) }
            .and_then(|()| {
                // SAFETY: the fence belongs to this device.
                unsafe { d.wait_for_fences(&[fence], true, until.saturating_duration_since(t).as_nanos() as u64) }
            })
            .err()
            .unwrap_or(vk::Result::SUCCESS);
        let first = NUDGE_SAMPLES.lock().map(|v| v.is_empty()).unwrap_or(false);
        if let Ok(mut v) = NUDGE_SAMPLES.lock() {
            if v.len() < 200 {
                v.push(json!([since(t), round1(t.elapsed().as_secs_f64() * 1e3), format!("{r:?}")]));
            }
        }
        if first || r != vk::Result::SUCCESS {
            nudge_step(t_submit, "dispatch back", json!({"submitted_ms": since(t), "result": format!("{r:?}"),
                "wait_ms": round1(t.elapsed().as_secs_f64() * 1e3)}));
        }
        if r != vk::Result::SUCCESS {
            return Ok(());
        }
        // SAFETY: the fence is signalled and no longer in use.
        unsafe { d.reset_fences(&[fence]) }.map_err(|e| ("vkResetFences", e))?;
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[allow(clippy::too_many_arguments)]
fn canary(
    gpu: &Gpu,
    args: &Args,
    out: &mut Out,
    cb: vk::CommandBuffer,
    record_busy: &dyn Fn(vk::CommandBuffer, u32),
    begin: &dyn Fn(vk::CommandBuffer, vk::CommandBufferUsageFlags),
    end: &dyn Fn(vk::CommandBuffer),
    submit_wait: &dyn Fn(vk::CommandBuffer, Duration) -> (vk::Result, f64),
    iters: u32,
) -> ! {
    let d = &gpu.device;
    let t0 = Instant::now();
    let mut samples: Vec<Value> = Vec::new();
    let mut worst = 0.0f64;
    let mut errors = 0u32;
    while t0.elapsed().as_secs_f64() < args.canary_s {
        // SAFETY: cb is not pending (its fence was waited on, or the wait failed and we stop below).
        let _ = unsafe { d.reset_command_buffer(cb, vk::CommandBufferResetFlags::empty()) };
        begin(cb, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        record_busy(cb, iters);
        end(cb);
        let t = t0.elapsed().as_secs_f64();
        let (r, el) = submit_wait(cb, Duration::from_secs(10));
        worst = worst.max(el);
        samples.push(json!([round1(t * 1e3), round1(el), format!("{r:?}")]));
        if r != vk::Result::SUCCESS {
            errors += 1;
            out.set("canary", json!({"samples": samples, "worst_ms": worst, "errors": errors, "stopped": format!("{r:?}")}));
            out.emit("done");
            // SAFETY: ends the process at once.
            unsafe { _exit(0) }
        }
        if samples.len() % 20 == 0 {
            out.set("canary", json!({"samples": samples, "worst_ms": worst, "errors": errors}));
            out.emit("progress");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    out.set("canary", json!({"samples": samples, "worst_ms": worst, "errors": errors}));
    out.emit("done");
    // SAFETY: ends the process at once.
    unsafe { _exit(0) }
}
