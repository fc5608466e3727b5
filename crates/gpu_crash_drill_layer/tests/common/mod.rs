//! Test harness: runs each case in a child process (the drill is configured by process-global
//! environment variables) that loads the layer through the real Vulkan loader, and gives the child a
//! small `ash` toolkit to create buffers, submit work and capture binding reports.

#![allow(dead_code)]

use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use ash::vk::{self, Handle};

#[path = "../../src/manifest.rs"]
mod manifest;

/// Env var naming the case a child process runs.
pub const CHILD_ENV: &str = "GPU_CRASH_DRILL_TEST_CASE";

/// The built layer library.
///
/// Cargo builds the cdylib for `cargo test` into `<target>/<profile>/deps/` next to this test
/// executable, but only copies ("uplifts") it to `<target>/<profile>/` for a top-level `cargo build`;
/// that copy can be stale, so the `deps/` one is preferred.
pub fn layer_library() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a parent folder");
    let name = manifest::library_file_name();
    let candidates = [
        deps.join(&name),
        deps.parent().map(|p| p.join(&name)).unwrap_or_default(),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("layer library not found at {candidates:?}"))
        .clone()
}

/// Writes the manifest (once per test process) next to the build outputs and returns its folder, for
/// `VK_LAYER_PATH`. Concurrent test processes write identical content through a rename, so a reader
/// never sees a partial file.
pub fn manifest_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = layer_library();
        let exe = std::env::current_exe().unwrap();
        let dir = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("drill-test-layer");
        let tmp = dir.join(format!("tmp-{}", std::process::id()));
        let written = manifest::write_manifest(&tmp, &lib).expect("write manifest");
        std::fs::rename(&written, dir.join(manifest::MANIFEST_FILE_NAME)).expect("move manifest");
        let _ = std::fs::remove_dir(&tmp);
        dir
    })
    .clone()
}

/// Output of a child run.
pub struct ChildOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Runs `case` in a child process with the layer enabled and `env` set (all other `GPU_CRASH_DRILL*`
/// variables removed). Panics with the child's output unless it reported success.
pub fn run_child(case: &str, env: &[(&str, &str)]) -> ChildOutput {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_entry",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("GPU_CRASH_DRILL") {
            cmd.env_remove(k);
        }
    }
    cmd.env(CHILD_ENV, case)
        .env("VK_LAYER_PATH", manifest_dir())
        .env("VK_INSTANCE_LAYERS", manifest::LAYER_NAME)
        .env("RUST_BACKTRACE", "1");
    let lvp = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json";
    let on_lavapipe = std::env::var_os("VK_DRIVER_FILES").is_none()
        && std::env::var_os("VK_ICD_FILENAMES").is_none()
        && std::path::Path::new(lvp).is_file();
    if on_lavapipe {
        cmd.env("VK_DRIVER_FILES", lvp);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn child test process");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let ok_line = format!("DRILL-CASE-OK {case}");
    assert!(
        out.status.success() && stdout.lines().any(|l| l.trim_end().ends_with(&ok_line)),
        "child case {case} failed ({})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    assert!(
        !(on_lavapipe && stdout.contains("not applicable")),
        "case {case} skipped itself on lavapipe:\n{stdout}"
    );
    if stdout.contains("not applicable") {
        // libtest has no "skipped" outcome: say it in the test's output, which a reader sees.
        println!(
            "skipped: case {case} does not apply on this driver (it has the extension natively)"
        );
        eprintln!(
            "skipped: case {case} does not apply on this driver (it has the extension natively)"
        );
    }
    ChildOutput { stdout, stderr }
}

extern "C" {
    /// POSIX `_exit`: ends the process without atexit handlers or destructors.
    fn _exit(status: i32) -> !;
}

/// Ends a child process at once. For cases that leave the GPU hung: lavapipe's queue thread spins on
/// the never-set event forever, and an orderly exit could wait for it.
pub fn exit_now(status: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` only ends the process.
    unsafe { _exit(status) }
}

/// Ends the process (status 3) if it is still running after `secs` seconds, so a case that hangs by
/// mistake cannot hang the test run.
pub fn watchdog(secs: u64) {
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(secs));
        eprintln!("watchdog: child case still running after {secs} s");
        exit_now(3);
    });
}

/// One captured binding report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingMsg {
    pub messenger: usize,
    pub severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    pub types: vk::DebugUtilsMessageTypeFlagsEXT,
    pub object_type: vk::ObjectType,
    pub handle: u64,
    pub name: Option<String>,
    pub binding_type: vk::DeviceAddressBindingTypeEXT,
    pub base: u64,
    pub size: u64,
    pub object_count: u32,
}

pub static MESSAGES: Mutex<Vec<BindingMsg>> = Mutex::new(Vec::new());

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer/driver passes valid callback data per the spec.
    let data = unsafe { &*data };
    if types.contains(vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION) && user as usize == 1 {
        // Only seen when a validation layer runs below the drill (a manual check; see the README).
        // SAFETY: a NUL-terminated message per the spec.
        let text = unsafe { CStr::from_ptr(data.p_message) }.to_string_lossy();
        eprintln!("VALIDATION {severity:?}: {text}");
    }
    let mut p = data.p_next.cast::<vk::BaseInStructure<'_>>();
    while !p.is_null() {
        // SAFETY: a valid pNext chain.
        unsafe {
            if (*p).s_type == vk::StructureType::DEVICE_ADDRESS_BINDING_CALLBACK_DATA_EXT {
                let b = &*p.cast::<vk::DeviceAddressBindingCallbackDataEXT<'_>>();
                let obj = &*data.p_objects;
                let name = (!obj.p_object_name.is_null()).then(|| {
                    CStr::from_ptr(obj.p_object_name)
                        .to_string_lossy()
                        .into_owned()
                });
                MESSAGES.lock().unwrap().push(BindingMsg {
                    messenger: user as usize,
                    severity,
                    types,
                    object_type: obj.object_type,
                    handle: obj.object_handle,
                    name,
                    binding_type: b.binding_type,
                    base: b.base_address,
                    size: b.size,
                    object_count: data.object_count,
                });
            }
            p = (*p).p_next;
        }
    }
    vk::FALSE
}

/// Which fault API the child enables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Ext,
    Khr,
    /// Enable none of the drill's extensions.
    None,
}

pub const APP_NAME: &CStr = c"drill-test";
pub const ENGINE_NAME: &CStr = c"drill-engine";
pub const APP_API_VERSION: u32 = vk::API_VERSION_1_3;

/// An instance + device on the first physical device, with two debug messengers: #1 asks for binding
/// reports, #2 only for GENERAL messages (must receive none).
pub struct Gpu {
    pub entry: ash::Entry,
    pub instance: ash::Instance,
    pub debug_utils: ash::ext::debug_utils::Instance,
    pub messengers: Vec<vk::DebugUtilsMessengerEXT>,
    pub physical: vk::PhysicalDevice,
    pub props: vk::PhysicalDeviceProperties,
    pub device: ash::Device,
    pub debug_device: ash::ext::debug_utils::Device,
    pub queue: vk::Queue,
    pub memory_type: u32,
    pub pool: vk::CommandPool,
}

impl Gpu {
    pub fn new(api: Api, vendor_binary: bool) -> Self {
        Self::with_extensions(api, vendor_binary, &[])
    }

    /// Like [`Gpu::new`], also enabling the device extensions in `extra`.
    pub fn with_extensions(api: Api, vendor_binary: bool, extra: &[&CStr]) -> Self {
        // SAFETY: loading the system Vulkan loader.
        let entry = unsafe { ash::Entry::load() }.expect("libvulkan");
        let app = vk::ApplicationInfo::default()
            .application_name(APP_NAME)
            .application_version(7)
            .engine_name(ENGINE_NAME)
            .engine_version(9)
            .api_version(APP_API_VERSION);
        let exts = [ash::ext::debug_utils::NAME.as_ptr()];
        let info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_extension_names(&exts);
        // SAFETY: valid create info.
        let instance = unsafe { entry.create_instance(&info, None) }.expect("create instance");
        let debug_utils = ash::ext::debug_utils::Instance::new(&entry, &instance);
        let mut messengers = Vec::new();
        for (id, types) in [
            (
                1usize,
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::DEVICE_ADDRESS_BINDING,
            ),
            (2usize, vk::DebugUtilsMessageTypeFlagsEXT::GENERAL),
        ] {
            let info = vk::DebugUtilsMessengerCreateInfoEXT {
                message_severity: vk::DebugUtilsMessageSeverityFlagsEXT::INFO
                    | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                message_type: types,
                pfn_user_callback: Some(on_message),
                p_user_data: id as *mut c_void,
                ..Default::default()
            };
            // SAFETY: valid create info.
            messengers
                .push(unsafe { debug_utils.create_debug_utils_messenger(&info, None) }.unwrap());
        }
        // SAFETY: valid instance.
        let physical = unsafe { instance.enumerate_physical_devices() }.unwrap()[0];
        // SAFETY: valid physical device.
        let props = unsafe { instance.get_physical_device_properties(physical) };

        let mut names: Vec<*const i8> = Vec::new();
        match api {
            Api::Ext => names.extend([
                vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME.as_ptr(),
                vk::EXT_DEVICE_FAULT_NAME.as_ptr(),
            ]),
            Api::Khr => names.extend([
                vk::EXT_DEVICE_ADDRESS_BINDING_REPORT_NAME.as_ptr(),
                vulkan_fault_ffi::KHR_DEVICE_FAULT_NAME.as_ptr(),
                vulkan_fault_ffi::KHR_SHADER_ABORT_NAME.as_ptr(),
            ]),
            Api::None => {}
        }
        names.extend(extra.iter().map(|n| n.as_ptr()));
        let vb = if vendor_binary { vk::TRUE } else { vk::FALSE };
        // The drill's feature structs sit in the middle of a chain of driver structs, so the layer
        // must copy the nodes in front of them to unlink them.
        let mut khr_abort = vulkan_fault_ffi::PhysicalDeviceShaderAbortFeaturesKHR {
            shader_abort: vk::TRUE,
            ..Default::default()
        };
        let mut khr_fault = vulkan_fault_ffi::PhysicalDeviceFaultFeaturesKHR {
            p_next: (&mut khr_abort as *mut vulkan_fault_ffi::PhysicalDeviceShaderAbortFeaturesKHR)
                .cast(),
            device_fault: vk::TRUE,
            device_fault_vendor_binary: vb,
            ..Default::default()
        };
        let mut ext_fault = vk::PhysicalDeviceFaultFeaturesEXT {
            device_fault: vk::TRUE,
            device_fault_vendor_binary: vb,
            ..Default::default()
        };
        let fault_head: *mut c_void = match api {
            Api::Ext => (&mut ext_fault as *mut vk::PhysicalDeviceFaultFeaturesEXT<'_>).cast(),
            Api::Khr => {
                (&mut khr_fault as *mut vulkan_fault_ffi::PhysicalDeviceFaultFeaturesKHR).cast()
            }
            Api::None => std::ptr::null_mut(),
        };
        let mut v13 = vk::PhysicalDeviceVulkan13Features {
            synchronization2: vk::TRUE,
            ..Default::default()
        };
        let mut binding = vk::PhysicalDeviceAddressBindingReportFeaturesEXT {
            p_next: (&mut v13 as *mut vk::PhysicalDeviceVulkan13Features<'_>).cast(),
            report_address_binding: vk::TRUE,
            ..Default::default()
        };
        v13.p_next = fault_head;
        let mut v12 = vk::PhysicalDeviceVulkan12Features {
            timeline_semaphore: vk::TRUE,
            p_next: if api == Api::None {
                (&mut v13 as *mut vk::PhysicalDeviceVulkan13Features<'_>).cast()
            } else {
                (&mut binding as *mut vk::PhysicalDeviceAddressBindingReportFeaturesEXT<'_>).cast()
            },
            ..Default::default()
        };
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(0)
            .queue_priorities(&priorities)];
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&names);
        info.p_next = (&mut v12 as *mut vk::PhysicalDeviceVulkan12Features<'_>).cast();
        let chain_before: Vec<vk::StructureType> = chain_types(info.p_next);
        // SAFETY: valid create info; all chained structs live until the call returns.
        let device =
            unsafe { instance.create_device(physical, &info, None) }.expect("create device");
        assert_eq!(
            chain_types(info.p_next),
            chain_before,
            "the layer modified the application's chain"
        );
        // SAFETY: valid device, family 0 exists on lavapipe.
        let queue = unsafe { device.get_device_queue(0, 0) };
        let debug_device = ash::ext::debug_utils::Device::new(&instance, &device);
        // SAFETY: valid physical device.
        let mem = unsafe { instance.get_physical_device_memory_properties(physical) };
        let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let memory_type = (0..mem.memory_type_count)
            .find(|&i| mem.memory_types[i as usize].property_flags.contains(wanted))
            .expect("host visible memory");
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(0)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid device and create info.
        let pool = unsafe { device.create_command_pool(&pool_info, None) }.unwrap();
        Gpu {
            entry,
            instance,
            debug_utils,
            messengers,
            physical,
            props,
            device,
            debug_device,
            queue,
            memory_type,
            pool,
        }
    }

    /// A new primary command buffer, begun (one-time submit).
    pub fn begin(&self) -> vk::CommandBuffer {
        let info = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: valid device and pool.
        let cb = unsafe { self.device.allocate_command_buffers(&info) }.unwrap()[0];
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: a fresh command buffer.
        unsafe { self.device.begin_command_buffer(cb, &begin) }.unwrap();
        cb
    }

    /// Ends recording of `cb`.
    pub fn end(&self, cb: vk::CommandBuffer) {
        // SAFETY: `cb` is recording.
        unsafe { self.device.end_command_buffer(cb) }.unwrap();
    }

    /// Submits one command buffer signalling `fence`.
    pub fn submit_cb(&self, cb: vk::CommandBuffer, fence: vk::Fence) -> vk::Result {
        let cbs = [cb];
        let submit = vk::SubmitInfo::default().command_buffers(&cbs);
        // SAFETY: valid queue, an executable command buffer.
        match unsafe { self.device.queue_submit(self.queue, &[submit], fence) } {
            Ok(()) => vk::Result::SUCCESS,
            Err(e) => e,
        }
    }

    /// Waits for `fence` up to `timeout_ns`.
    pub fn wait(&self, fence: vk::Fence, timeout_ns: u64) -> vk::Result {
        // SAFETY: valid fence of this device.
        match unsafe { self.device.wait_for_fences(&[fence], true, timeout_ns) } {
            Ok(()) => vk::Result::SUCCESS,
            Err(e) => e,
        }
    }

    /// A zeroed host-visible, host-coherent buffer (TRANSFER_DST) of `words` u32s, persistently mapped.
    pub fn mapped_buffer(&self, words: usize) -> MappedBuffer {
        let size = (words * 4) as u64;
        let (buffer, memory) = self.buffer(size, Some("markers"));
        // SAFETY: host-visible memory of this device, not mapped yet.
        let ptr = unsafe {
            self.device
                .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
        }
        .unwrap()
        .cast::<u32>();
        // SAFETY: the mapping covers at least `words` u32s.
        unsafe { std::ptr::write_bytes(ptr, 0, words) };
        MappedBuffer {
            buffer,
            memory,
            ptr,
            words,
        }
    }

    /// A render pass without attachments (one subpass) and a 16x16 framebuffer for it: the cheapest
    /// render pass instance, as wgpu begins them (`vkCmdBeginRenderPass`).
    pub fn empty_render_pass(&self) -> (vk::RenderPass, vk::Framebuffer) {
        let subpasses =
            [vk::SubpassDescription::default()
                .pipeline_bind_point(vk::PipelineBindPoint::GRAPHICS)];
        let info = vk::RenderPassCreateInfo::default().subpasses(&subpasses);
        // SAFETY: valid device and create info.
        let pass = unsafe { self.device.create_render_pass(&info, None) }.unwrap();
        let fb_info = vk::FramebufferCreateInfo::default()
            .render_pass(pass)
            .width(16)
            .height(16)
            .layers(1);
        // SAFETY: valid device and create info.
        let fb = unsafe { self.device.create_framebuffer(&fb_info, None) }.unwrap();
        (pass, fb)
    }

    /// Begins an instance of `pass` in `cb`.
    pub fn begin_pass(&self, cb: vk::CommandBuffer, (pass, fb): (vk::RenderPass, vk::Framebuffer)) {
        let info = vk::RenderPassBeginInfo::default()
            .render_pass(pass)
            .framebuffer(fb)
            .render_area(vk::Rect2D {
                offset: vk::Offset2D::default(),
                extent: vk::Extent2D {
                    width: 16,
                    height: 16,
                },
            });
        // SAFETY: `cb` is recording outside a render pass.
        unsafe {
            self.device
                .cmd_begin_render_pass(cb, &info, vk::SubpassContents::INLINE)
        };
    }

    /// Ends the render pass instance of `cb`.
    pub fn end_pass(&self, cb: vk::CommandBuffer) {
        // SAFETY: `cb` is inside a render pass instance.
        unsafe { self.device.cmd_end_render_pass(cb) };
    }

    /// `vkCmdBeginDebugUtilsLabelEXT`.
    pub fn label_begin(&self, cb: vk::CommandBuffer, name: &str) {
        let name = CString::new(name).unwrap();
        let label = vk::DebugUtilsLabelEXT::default().label_name(&name);
        // SAFETY: `cb` is recording.
        unsafe { self.debug_device.cmd_begin_debug_utils_label(cb, &label) };
    }

    /// `vkCmdEndDebugUtilsLabelEXT`.
    pub fn label_end(&self, cb: vk::CommandBuffer) {
        // SAFETY: `cb` is recording inside a label region.
        unsafe { self.debug_device.cmd_end_debug_utils_label(cb) };
    }

    /// `vkCmdWriteBufferMarkerAMD` through the device's own entry point.
    pub fn marker(
        &self,
        cb: vk::CommandBuffer,
        stage: vk::PipelineStageFlags,
        buffer: vk::Buffer,
        offset: u64,
        value: u32,
    ) {
        let ext = ash::amd::buffer_marker::Device::new(&self.instance, &self.device);
        // SAFETY: `cb` is recording outside a render pass; offset inside the buffer, 4-aligned.
        unsafe { ext.cmd_write_buffer_marker(cb, stage, buffer, offset, value) };
    }

    /// A compute pipeline of [`compute_spirv`] (no descriptor sets), named `name` if given.
    pub fn compute_pipeline(&self, name: Option<&str>) -> vk::Pipeline {
        let module = self.shader_module(&compute_spirv());
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.empty_pipeline_layout());
        // SAFETY: valid device, module and layout.
        let pipeline = unsafe {
            self.device
                .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
        }
        .map_err(|(_, e)| e)
        .expect("create compute pipeline")[0];
        // SAFETY: the pipeline holds what it needs of the module.
        unsafe { self.device.destroy_shader_module(module, None) };
        if let Some(n) = name {
            self.name(pipeline, n);
        }
        pipeline
    }

    /// A graphics pipeline for subpass 0 of `pass` (from [`Gpu::empty_render_pass`]): the vertex
    /// shader of [`vertex_spirv`] alone, rasterizer discard on (no fragment stage, viewport or
    /// attachment state needed), named `name` if given.
    pub fn graphics_pipeline(&self, pass: vk::RenderPass, name: Option<&str>) -> vk::Pipeline {
        let module = self.shader_module(&vertex_spirv());
        let stages = [vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::VERTEX)
            .module(module)
            .name(c"main")];
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default();
        let input_assembly = vk::PipelineInputAssemblyStateCreateInfo::default()
            .topology(vk::PrimitiveTopology::POINT_LIST);
        let rasterization = vk::PipelineRasterizationStateCreateInfo::default()
            .rasterizer_discard_enable(true)
            .polygon_mode(vk::PolygonMode::FILL)
            .line_width(1.0);
        let info = vk::GraphicsPipelineCreateInfo::default()
            .stages(&stages)
            .vertex_input_state(&vertex_input)
            .input_assembly_state(&input_assembly)
            .rasterization_state(&rasterization)
            .layout(self.empty_pipeline_layout())
            .render_pass(pass)
            .subpass(0);
        // SAFETY: valid device, module, layout and render pass; every state the spec requires with
        // rasterizer discard is given.
        let pipeline = unsafe {
            self.device
                .create_graphics_pipelines(vk::PipelineCache::null(), &[info], None)
        }
        .map_err(|(_, e)| e)
        .expect("create graphics pipeline")[0];
        // SAFETY: the pipeline holds what it needs of the module.
        unsafe { self.device.destroy_shader_module(module, None) };
        if let Some(n) = name {
            self.name(pipeline, n);
        }
        pipeline
    }

    fn shader_module(&self, code: &[u32]) -> vk::ShaderModule {
        let info = vk::ShaderModuleCreateInfo::default().code(code);
        // SAFETY: valid device; `code` is a valid SPIR-V module.
        unsafe { self.device.create_shader_module(&info, None) }.expect("create shader module")
    }

    /// A pipeline layout without sets or push constants (left alive: pipelines bound later use it).
    fn empty_pipeline_layout(&self) -> vk::PipelineLayout {
        let info = vk::PipelineLayoutCreateInfo::default();
        // SAFETY: valid device and create info.
        unsafe { self.device.create_pipeline_layout(&info, None) }.unwrap()
    }

    /// `vkCmdBindPipeline`.
    pub fn bind_pipeline(
        &self,
        cb: vk::CommandBuffer,
        bind_point: vk::PipelineBindPoint,
        pipeline: vk::Pipeline,
    ) {
        // SAFETY: `cb` is recording; the pipeline matches the bind point (and the render pass
        // instance, for a graphics pipeline bound inside one).
        unsafe { self.device.cmd_bind_pipeline(cb, bind_point, pipeline) };
    }

    /// One workgroup of the bound compute pipeline.
    pub fn dispatch(&self, cb: vk::CommandBuffer) {
        // SAFETY: `cb` is recording outside a render pass with a compute pipeline bound.
        unsafe { self.device.cmd_dispatch(cb, 1, 1, 1) };
    }

    /// Three vertices (points) with the bound graphics pipeline.
    pub fn draw(&self, cb: vk::CommandBuffer) {
        // SAFETY: `cb` is inside a render pass instance with a compatible graphics pipeline bound.
        unsafe { self.device.cmd_draw(cb, 3, 1, 0, 0) };
    }

    pub fn name<H: Handle>(&self, handle: H, name: &str) {
        let name = CString::new(name).unwrap();
        let info = vk::DebugUtilsObjectNameInfoEXT::default()
            .object_handle(handle)
            .object_name(&name);
        // SAFETY: valid device and handle.
        unsafe { self.debug_device.set_debug_utils_object_name(&info) }.unwrap();
    }

    pub fn allocate(&self, size: u64) -> vk::DeviceMemory {
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(self.memory_type);
        // SAFETY: valid device and info.
        unsafe { self.device.allocate_memory(&info, None) }.unwrap()
    }

    /// A buffer named `name` (before binding), bound to `memory` at `offset`. Returns it and its
    /// memory requirement size.
    pub fn buffer_in(
        &self,
        size: u64,
        name: Option<&str>,
        memory: vk::DeviceMemory,
        offset: u64,
    ) -> (vk::Buffer, u64) {
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST);
        // SAFETY: valid device and info.
        let buffer = unsafe { self.device.create_buffer(&info, None) }.unwrap();
        if let Some(n) = name {
            self.name(buffer, n);
        }
        // SAFETY: valid buffer.
        let req = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        // SAFETY: memory is large enough by construction in the tests.
        unsafe { self.device.bind_buffer_memory(buffer, memory, offset) }.unwrap();
        (buffer, req.size)
    }

    /// A buffer with its own memory.
    pub fn buffer(&self, size: u64, name: Option<&str>) -> (vk::Buffer, vk::DeviceMemory) {
        let memory = self.allocate(size.max(4096) * 2);
        let (buffer, _) = self.buffer_in(size, name, memory, 0);
        (buffer, memory)
    }

    pub fn destroy(&self, buffer: vk::Buffer, memory: vk::DeviceMemory) {
        // SAFETY: unused objects of this device.
        unsafe {
            self.device.destroy_buffer(buffer, None);
            self.device.free_memory(memory, None);
        }
    }

    pub fn fence(&self) -> vk::Fence {
        // SAFETY: valid device.
        unsafe {
            self.device
                .create_fence(&vk::FenceCreateInfo::default(), None)
        }
        .unwrap()
    }

    /// An empty submission signalling `fence`.
    pub fn submit(&self, fence: vk::Fence) -> vk::Result {
        let submit = vk::SubmitInfo::default();
        // SAFETY: valid queue; an empty submission.
        match unsafe { self.device.queue_submit(self.queue, &[submit], fence) } {
            Ok(()) => vk::Result::SUCCESS,
            Err(e) => e,
        }
    }

    /// `n` submissions that must succeed and complete.
    pub fn submit_ok(&self, n: usize) {
        for _ in 0..n {
            let f = self.fence();
            assert_eq!(self.submit(f), vk::Result::SUCCESS);
            // SAFETY: valid fence.
            unsafe {
                self.device
                    .wait_for_fences(&[f], true, 5_000_000_000)
                    .unwrap();
                self.device.destroy_fence(f, None);
            }
        }
    }

    pub fn binding_messages(&self) -> Vec<BindingMsg> {
        MESSAGES.lock().unwrap().clone()
    }

    /// The last BIND or UNBIND range reported for `handle`.
    pub fn reported_range(&self, handle: u64) -> (u64, u64) {
        let m = self.binding_messages();
        let msg = m
            .iter()
            .rev()
            .find(|m| m.handle == handle && m.object_type == vk::ObjectType::BUFFER)
            .unwrap_or_else(|| panic!("no binding report for 0x{handle:x}"));
        (msg.base, msg.size)
    }
}

/// Appends one SPIR-V instruction: its word count and opcode, then its operands.
fn spirv_op(words: &mut Vec<u32>, opcode: u32, operands: &[u32]) {
    words.push(((operands.len() as u32 + 1) << 16) | opcode);
    words.extend_from_slice(operands);
}

/// A SPIR-V 1.0 module with `bound` ids, declaring `Shader` and `Logical GLSL450`, up to (without)
/// its entry point.
fn spirv_header(bound: u32) -> Vec<u32> {
    let mut w = vec![0x0723_0203, 0x0001_0000, 0, bound, 0];
    spirv_op(&mut w, 17, &[1]); // OpCapability Shader
    spirv_op(&mut w, 14, &[0, 1]); // OpMemoryModel Logical GLSL450
    w
}

/// `"main"` as SPIR-V string operand words (NUL-terminated, padded to a word).
const SPIRV_MAIN: [u32; 2] = [u32::from_le_bytes(*b"main"), 0];

/// A compute shader that does nothing (workgroup size 1x1x1), entry point `main`. Assembled here so
/// the tests need no shader compiler; `naga` reads it back as `@compute @workgroup_size(1, 1, 1) fn
/// main() {}`.
pub fn compute_spirv() -> Vec<u32> {
    let mut w = spirv_header(5);
    // %1 main, %2 void, %3 fn() -> void, %4 its label.
    spirv_op(&mut w, 15, &[5, 1, SPIRV_MAIN[0], SPIRV_MAIN[1]]); // OpEntryPoint GLCompute %1 "main"
    spirv_op(&mut w, 16, &[1, 17, 1, 1, 1]); // OpExecutionMode %1 LocalSize 1 1 1
    spirv_op(&mut w, 19, &[2]); // %2 = OpTypeVoid
    spirv_op(&mut w, 33, &[3, 2]); // %3 = OpTypeFunction %2
    spirv_op(&mut w, 54, &[2, 1, 0, 3]); // %1 = OpFunction %2 None %3
    spirv_op(&mut w, 248, &[4]); // %4 = OpLabel
    spirv_op(&mut w, 253, &[]); // OpReturn
    spirv_op(&mut w, 56, &[]); // OpFunctionEnd
    w
}

/// A vertex shader that writes `Position = vec4(0.0)`, entry point `main` (`naga` reads it back as a
/// `@vertex` function returning `@builtin(position)`).
pub fn vertex_spirv() -> Vec<u32> {
    let mut w = spirv_header(11);
    // %1 main, %2 void, %3 fn() -> void, %4 its label, %5 f32, %6 vec4, %7 *Output vec4,
    // %8 the Position output, %9 0.0, %10 vec4(0.0).
    spirv_op(&mut w, 15, &[0, 1, SPIRV_MAIN[0], SPIRV_MAIN[1], 8]); // OpEntryPoint Vertex %1 "main" %8
    spirv_op(&mut w, 71, &[8, 11, 0]); // OpDecorate %8 BuiltIn Position
    spirv_op(&mut w, 19, &[2]); // %2 = OpTypeVoid
    spirv_op(&mut w, 33, &[3, 2]); // %3 = OpTypeFunction %2
    spirv_op(&mut w, 22, &[5, 32]); // %5 = OpTypeFloat 32
    spirv_op(&mut w, 23, &[6, 5, 4]); // %6 = OpTypeVector %5 4
    spirv_op(&mut w, 32, &[7, 3, 6]); // %7 = OpTypePointer Output %6
    spirv_op(&mut w, 59, &[7, 8, 3]); // %8 = OpVariable %7 Output
    spirv_op(&mut w, 43, &[5, 9, 0]); // %9 = OpConstant %5 0.0
    spirv_op(&mut w, 44, &[6, 10, 9, 9, 9, 9]); // %10 = OpConstantComposite %6 %9 %9 %9 %9
    spirv_op(&mut w, 54, &[2, 1, 0, 3]); // %1 = OpFunction %2 None %3
    spirv_op(&mut w, 248, &[4]); // %4 = OpLabel
    spirv_op(&mut w, 62, &[8, 10]); // OpStore %8 %10
    spirv_op(&mut w, 253, &[]); // OpReturn
    spirv_op(&mut w, 56, &[]); // OpFunctionEnd
    w
}

/// A persistently mapped host-coherent buffer.
pub struct MappedBuffer {
    pub buffer: vk::Buffer,
    pub memory: vk::DeviceMemory,
    ptr: *mut u32,
    words: usize,
}

impl MappedBuffer {
    /// The u32 at word index `i`, read volatile (the GPU writes it).
    pub fn read(&self, i: usize) -> u32 {
        assert!(i < self.words);
        // SAFETY: in bounds of a live mapping.
        unsafe { self.ptr.add(i).read_volatile() }
    }
}

/// sTypes of a chain, in order.
pub fn chain_types(mut p: *const c_void) -> Vec<vk::StructureType> {
    let mut out = Vec::new();
    while !p.is_null() {
        // SAFETY: a valid chain of test-owned structs.
        unsafe {
            let b = &*p.cast::<vk::BaseInStructure<'_>>();
            out.push(b.s_type);
            p = b.p_next.cast();
        }
    }
    out
}

/// Checks the VersionOne vendor binary header and the strings behind it.
pub fn check_vendor_binary(gpu: &Gpu, bin: &[u8]) {
    let h = 56usize;
    assert!(bin.len() > h, "binary of {} bytes", bin.len());
    let u = |o: usize| u32::from_ne_bytes(bin[o..o + 4].try_into().unwrap());
    assert_eq!(u(0), 56, "headerSize");
    assert_eq!(u(4), 1, "headerVersion ONE");
    assert_eq!(u(8), gpu.props.vendor_id);
    assert_eq!(u(12), gpu.props.device_id);
    assert_eq!(u(16), gpu.props.driver_version);
    assert_eq!(&bin[20..36], &gpu.props.pipeline_cache_uuid);
    let s = |o: u32| {
        CStr::from_bytes_until_nul(&bin[o as usize..])
            .unwrap()
            .to_owned()
    };
    assert!(u(36) as usize >= h);
    assert_eq!(s(u(36)).as_c_str(), APP_NAME);
    assert_eq!(u(40), 7, "applicationVersion");
    assert_eq!(s(u(44)).as_c_str(), ENGINE_NAME);
    assert_eq!(u(48), 9, "engineVersion");
    assert_eq!(u(52), APP_API_VERSION, "apiVersion");
}
