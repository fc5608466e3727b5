//! A fault names the Bevy asset: the mesh inside Bevy's shared slab buffers, the image asset.
//!
//! The child is a small game level on lavapipe: a 3D camera and a minimap camera, a shadowed
//! directional light and two shadowed point lights, meshes loaded from asset paths through a custom
//! loader (`tests/assets/models/*.mesh`: three of one vertex layout sharing a general slab, one of
//! another layout, one large enough for a slab of its own), one procedural mesh added with
//! `Assets::add` (no path), and a textured material whose image is loaded from a path.
//!
//! The crash drill layer aims the fault: once the child's render world sees the target mesh placed
//! in Bevy's `MeshAllocator`, it writes `<slab buffer label>@<byte offset>` (vertex or index 5 of
//! that mesh) to the layer's aim file (`GPU_CRASH_DRILL_AIM`) and prints the truth it computed from
//! Bevy's own allocator API; the parent checks the report against that truth.

mod common;
mod deliver_support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use bevy::app::ScheduleRunnerPlugin;
use bevy::asset::io::Reader;
use bevy::asset::{AssetLoader, AsyncReadExt, LoadContext, RenderAssetUsages};
use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::mesh::{Indices, PrimitiveTopology};
use bevy::prelude::*;
use bevy::render::mesh::allocator::{
    ElementClass, MeshAllocationKey, MeshAllocator, MeshAllocatorSettings,
};
use bevy::render::render_resource::{Extent3d, TextureDimension, TextureFormat};
use bevy::render::slab_allocator::{Slab, SlabItemLayout};
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy_gpu_crash_reporter::report::{AssetKind, CrashReport, FaultVerdict, ObjectState};
use bevy_gpu_crash_reporter::GpuCrashReporterPlugin;
use bevy_gpu_crash_reporter::ReporterSettings;

/// Which case the child runs.
const CASE_VAR: &str = "ASSET_NAMING_CASE";
/// Set: the tree lands in a general slab of another number than without it. General slabs cannot
/// grow past their first size, and meshes of the tree's own layout and size, added before the level,
/// fill the slab the tree would share: the tree goes to the slab they spilled into, made after
/// every slab of the first frame.
///
/// (A position-only mesh placed first used to shift every slab id by one. It was placed first only
/// by luck: Bevy's own meshes are extracted in the same first frame, in the order of a hash set of
/// their ids, and an `AssetId<Mesh>` hashes `TypeId::of::<Mesh>()`, which changes with the build:
/// with `bevy_winit` in the tests' Bevy it came last and both runs numbered the tree's slab alike.)
const SHIFT_VAR: &str = "ASSET_NAMING_SHIFT_SLABS";
/// With [`SHIFT_VAR`]: meshes of the tree's size added before the level, more than a 240 KiB slab
/// holds (each 3,200 bytes of vertex data).
const FILLERS: usize = 80;
/// The drill's aim file.
const AIM_VAR: &str = "GPU_CRASH_DRILL_AIM";
/// The element the mesh cases aim at.
const ELEMENT: u64 = 5;

/// What the child computed from Bevy's allocator for the fault it aimed.
#[derive(Debug, PartialEq, Eq)]
struct Truth {
    label: String,
    start: u64,
    len: u64,
    element_size: u64,
    offset: u64,
}

fn truth(stdout: &str) -> Truth {
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("TRUTH ").map(|(_, truth)| truth))
        .unwrap_or_else(|| panic!("the child printed no TRUTH line:\n{stdout}"));
    let field = |key: &str| {
        line.split(" | ")
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} missing in {line}"))
            .to_owned()
    };
    Truth {
        label: field("label"),
        start: field("start").parse().unwrap(),
        len: field("len").parse().unwrap(),
        element_size: field("element_size").parse().unwrap(),
        offset: field("offset").parse().unwrap(),
    }
}

/// Another field of the TRUTH line.
fn field_of(stdout: &str, key: &str) -> String {
    let line = stdout.split_once("TRUTH ").expect("TRUTH line").1;
    line.lines()
        .next()
        .unwrap()
        .split(" | ")
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} missing in {line}"))
        .to_owned()
}

struct Run {
    output: Output,
    reports: Vec<CrashReport>,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    fn report(&self) -> &CrashReport {
        assert_eq!(self.reports.len(), 1, "{}", self.stderr());
        &self.reports[0]
    }
}

fn run(name: &str, case: &str, scenario: &str, env: &[(&str, &str)]) -> Run {
    let dir = common::scratch_dir(&format!("asset-naming-{name}"));
    let reports_dir = dir.join("reports");
    let mut command = common::child_command(&reports_dir, Some(scenario));
    command.env(CASE_VAR, case);
    if case != "image" {
        command.env(AIM_VAR, dir.join("aim"));
    }
    command
        .env("GPU_CRASH_DRILL_AFTER", "1")
        // A 4-byte fault range: the report must find the element, not a 4 KiB neighbourhood.
        .env("GPU_CRASH_DRILL_PRECISION", "4");
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().expect("spawn child");
    let reports = common::read_reports(&reports_dir);
    Run { output, reports }
}

/// Runs a mesh case and checks what every mesh case must show; returns the run and the truth.
fn mesh_case(name: &str, case: &str, scenario: &str, env: &[(&str, &str)]) -> (Run, Truth) {
    let run = run(name, case, scenario, env);
    let stderr = run.stderr();
    assert!(
        stderr.contains("[gpu_crash_drill] injected"),
        "the drill fired: {stderr}"
    );
    let truth = truth(&run.stdout());
    let fault = &run.report().faults[0];
    let culprit = fault.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.name.as_deref(), Some(truth.label.as_str()));
    assert_eq!(culprit.offset, truth.offset as i64, "{:#?}", fault);
    (run, truth)
}

fn asset_of(report: &CrashReport) -> &bevy_gpu_crash_reporter::report::GpuAsset {
    let fault = &report.faults[0];
    fault
        .culprit
        .as_ref()
        .and_then(|c| c.asset.as_ref())
        .unwrap_or_else(|| panic!("no asset named: {fault:#?}"))
}

#[test]
fn a_fault_in_vertex_5_of_a_mesh_in_a_shared_slab_names_the_mesh_path_the_vertex_and_its_bytes() {
    let (run, truth) = mesh_case("tree-vertex", "tree-vertex", "in-bounds", &[]);
    let report = run.report();
    let fault = &report.faults[0];
    assert_eq!(fault.verdict, FaultVerdict::InsideLiveObject);
    let asset = asset_of(report);
    assert_eq!(asset.kind, AssetKind::MeshVertexData);
    assert_eq!(asset.path.as_deref(), Some("models/tree.mesh"));
    assert_eq!(asset.element, Some(ELEMENT));
    assert_eq!(asset.element_size, Some(truth.element_size));
    assert_eq!(asset.byte_range, [truth.start, truth.start + truth.len]);
    assert_eq!(asset.state, ObjectState::Live);
    assert!(truth.label.starts_with("general mesh slab "), "{truth:?}");
    // Rock, tree and bush share the slab.
    let slab_of = |what: &str| {
        truth.label.replace(
            &truth.label[..truth.label.find(" (").unwrap()],
            &format!("general mesh slab {}", field_of(&run.stdout(), what)),
        )
    };
    assert_eq!(slab_of("rock_slab"), truth.label);
    assert_eq!(slab_of("bush_slab"), truth.label);
    // The entities drawing it, with their names.
    let mut names: Vec<_> = asset
        .entities
        .iter()
        .filter_map(|e| e.name.as_deref())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["birch", "oak"]);
    assert_eq!(asset.entity_count, 2);
    let slab = truth.label.trim_end_matches(" (vertex buffer)");
    assert_eq!(
        fault.summary,
        format!(
            "GPU fault: read at {:#x} is in vertex 5 of mesh \"models/tree.mesh\" ({slab}) -> \
             inside_live_object",
            fault.address
        )
    );
    assert_eq!(report.summary, fault.summary);
}

#[test]
fn a_fault_in_index_5_names_the_mesh_index_data() {
    let (run, truth) = mesh_case("tree-index", "tree-index", "in-bounds", &[]);
    let asset = asset_of(run.report());
    assert_eq!(asset.kind, AssetKind::MeshIndexData);
    assert_eq!(asset.path.as_deref(), Some("models/tree.mesh"));
    assert_eq!(asset.element, Some(ELEMENT));
    assert_eq!(asset.element_size, Some(4), "u32 indices");
    assert_eq!(asset.byte_range, [truth.start, truth.start + truth.len]);
    assert!(truth.label.ends_with("(index buffer)"), "{truth:?}");
    assert!(
        run.report().summary.contains("is in index 5 of mesh"),
        "{}",
        run.report().summary
    );
}

#[test]
fn a_mesh_added_with_assets_add_is_named_by_its_id_and_says_it_has_no_path() {
    let (run, _truth) = mesh_case("procedural", "procedural-vertex", "in-bounds", &[]);
    let asset = asset_of(run.report());
    assert_eq!(asset.path, None);
    assert!(asset.asset_id.starts_with("AssetId<Mesh>"), "{asset:#?}");
    assert!(
        asset.no_path.as_deref().unwrap().contains("Assets::add"),
        "{asset:#?}"
    );
    assert!(
        run.report().summary.contains("(no asset path)"),
        "{}",
        run.report().summary
    );
}

#[test]
fn meshes_of_another_layout_and_in_a_large_slab_are_named_too() {
    let (run, truth) = mesh_case("flag", "flag-vertex", "in-bounds", &[]);
    assert_eq!(
        asset_of(run.report()).path.as_deref(),
        Some("models/flag.mesh")
    );
    assert_eq!(truth.element_size, 48, "position, normal, uv and colour");
    let (run, truth) = mesh_case("terrain", "terrain-vertex", "in-bounds", &[]);
    let asset = asset_of(run.report());
    assert_eq!(asset.path.as_deref(), Some("models/terrain.mesh"));
    assert!(truth.label.starts_with("large mesh slab "), "{truth:?}");
    assert_eq!((truth.start, asset.element), (0, Some(ELEMENT)));
}

#[test]
fn a_fault_in_the_bytes_of_a_removed_mesh_is_a_use_after_free_naming_the_last_tenant() {
    let (run, _truth) = mesh_case("tree-removed", "tree-removed", "in-bounds", &[]);
    let report = run.report();
    let fault = &report.faults[0];
    assert_eq!(fault.verdict, FaultVerdict::UseAfterFree, "{fault:#?}");
    let culprit = fault.culprit.as_ref().unwrap();
    assert_eq!(culprit.state, ObjectState::Live, "the slab buffer lives on");
    let asset = asset_of(report);
    assert_eq!(asset.path.as_deref(), Some("models/tree.mesh"));
    assert_eq!(asset.state, ObjectState::Freed);
    assert_eq!(asset.element, Some(ELEMENT));
    assert!(asset.freed_frames_ago.is_some());
    assert!(
        fault
            .summary
            .contains("of mesh \"models/tree.mesh\" (mesh freed")
            && fault.summary.ends_with("-> use_after_free"),
        "{}",
        fault.summary
    );
}

#[test]
fn a_fault_in_the_old_buffer_of_a_grown_slab_names_the_same_mesh() {
    let (run, truth) = mesh_case("slab-grown", "slab-grown", "use-after-free", &[]);
    let report = run.report();
    let fault = &report.faults[0];
    assert_eq!(fault.verdict, FaultVerdict::UseAfterFree, "{fault:#?}");
    let culprit = fault.culprit.as_ref().unwrap();
    assert_eq!(culprit.state, ObjectState::Freed, "the old slab buffer");
    let asset = asset_of(report);
    assert_eq!(asset.path.as_deref(), Some("models/tree.mesh"));
    assert_eq!(
        asset.state,
        ObjectState::Live,
        "the mesh lives on in the new buffer"
    );
    assert_eq!(asset.byte_range, [truth.start, truth.start + truth.len]);
    assert!(
        fault.summary.contains(&format!(
            "of mesh \"models/tree.mesh\" ({}, freed",
            truth.label.trim_end_matches(" (vertex buffer)")
        )),
        "{}",
        fault.summary
    );
}

#[test]
fn a_fault_in_an_image_names_the_image_asset() {
    let run = run("image", "image", "in-bounds:terrain_grass@4096", &[]);
    let report = run.report();
    let fault = &report.faults[0];
    assert_eq!(fault.verdict, FaultVerdict::InsideLiveObject, "{fault:#?}");
    let culprit = fault.culprit.as_ref().unwrap();
    assert_eq!(culprit.object_type, "IMAGE");
    let asset = asset_of(report);
    assert_eq!(asset.kind, AssetKind::Image);
    assert_eq!(asset.path.as_deref(), Some("textures/grass.img"));
    assert_eq!(asset.byte_offset, 4096);
    assert!(
        fault
            .summary
            .contains("is in byte 4096 of image \"textures/grass.img\" (image \"terrain_grass\")"),
        "{}",
        fault.summary
    );
}

#[test]
fn a_game_that_panics_on_the_lost_device_before_bevys_error_handler_still_gets_its_report() {
    let (run, _truth) = mesh_case("panic-after-loss", "panic-after-loss", "in-bounds", &[]);
    let stderr = run.stderr();
    assert!(
        stderr.contains("the game's own panic on the lost device"),
        "the child panicked as planned: {stderr}"
    );
    assert_ne!(run.output.status.code(), Some(0), "the game died: {stderr}");
    let report = run.report();
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.starts_with("reported from a panic on the lost device")),
        "{:#?}",
        report.notes
    );
    assert_eq!(
        asset_of(report).path.as_deref(),
        Some("models/tree.mesh"),
        "the report is whole"
    );
}

/// Waits until Bugsink has stored the event (it digests in the background).
fn stored_event(server: &deliver_support::Bugsink, id: &str) -> serde_json::Value {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(e) = server.event(id) {
            return e;
        }
        assert!(Instant::now() < until, "event {id} never reached Bugsink");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn in_bugsink_the_asset_is_the_title_and_tag_and_other_slab_numbering_groups_into_one_issue() {
    let server = deliver_support::bugsink("asset_naming");
    let dsn = [("SENTRY_DSN", server.dsn.as_str())];
    let (first, a) = mesh_case("bugsink-a", "tree-vertex", "in-bounds", &dsn);
    let shifted = [("SENTRY_DSN", server.dsn.as_str()), (SHIFT_VAR, "1")];
    let (second, b) = mesh_case("bugsink-b", "tree-vertex", "in-bounds", &shifted);
    assert_ne!(
        a.label, b.label,
        "the two runs number their slabs differently"
    );
    let ea = stored_event(server, &first.report().id);
    let eb = stored_event(server, &second.report().id);
    let data = &ea["data"];
    assert_eq!(data["tags"]["gpu.asset"], "models/tree.mesh");
    assert_eq!(data["tags"]["gpu.asset_kind"], "mesh_vertex_data");
    assert!(
        data["exception"]["values"][0]["value"]
            .as_str()
            .unwrap()
            .contains("of mesh \"models/tree.mesh\""),
        "{data:#}"
    );
    assert_eq!(
        data["fingerprint"][3],
        "mesh_vertex_data \"models/tree.mesh\""
    );
    assert_eq!(ea["issue"], eb["issue"], "one bug, one issue");
    let issue = server
        .issues()
        .into_iter()
        .find(|i| i["id"] == ea["issue"])
        .expect("issue listed");
    assert!(
        issue["calculated_value"]
            .as_str()
            .unwrap_or_default()
            .contains("models/tree.mesh"),
        "the title names the asset: {issue:#}"
    );
}

// ------------------------------------------------------------------------------------ the child

#[test]
#[ignore = "child process entry point: the tests above start it"]
fn child() {
    common::use_runtime_dir();
    common::trace_segfaults_if_asked();
    let case = std::env::var(CASE_VAR).unwrap_or_default();
    // `ASSET_NAMING_ASSETS`: where the level's files are when the binary runs elsewhere (the GPU
    // host of scripts/gpu-validation.sh batch 22).
    let assets = std::env::var_os("ASSET_NAMING_ASSETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/assets"));
    let mut app = App::new();
    app.add_plugins(GpuCrashReporterPlugin {
        settings: ReporterSettings {
            application_name: Some("asset_naming".into()),
            ..default()
        },
        ..default()
    })
    .add_plugins(common::headless_default_plugins().set(AssetPlugin {
        file_path: assets.display().to_string(),
        ..default()
    }))
    .add_plugins(ScheduleRunnerPlugin::run_loop(Duration::ZERO))
    .init_asset_loader::<GridMeshLoader>()
    .init_asset_loader::<FillImageLoader>()
    .add_systems(
        Update,
        (
            add_fillers,
            load_level,
            change_the_level,
            stop_after_a_while,
        )
            .chain(),
    );
    common::small_shadow_maps(&mut app);
    let early = EarlyMeshes::add(&mut app);
    let (target, class) = match case.as_str() {
        "tree-index" => (Target::Path("models/tree.mesh"), ElementClass::Index),
        "procedural-vertex" => (Target::Id(early.procedural.id()), ElementClass::Vertex),
        "flag-vertex" => (Target::Path("models/flag.mesh"), ElementClass::Vertex),
        "terrain-vertex" => (Target::Path("models/terrain.mesh"), ElementClass::Vertex),
        _ => (Target::Path("models/tree.mesh"), ElementClass::Vertex),
    };
    let server = app.world().resource::<AssetServer>().clone();
    app.insert_resource(early);
    let render = app.sub_app_mut(RenderApp);
    // Slabs as a game with many small meshes might tune them: the terrain gets a slab of its own,
    // and a burst of added meshes grows the general slab.
    // Slabs as a game with many small meshes might tune them: the terrain gets a slab of its own.
    // `slab-grown`: a general slab larger than wgpu's 64 MiB memory blocks on lavapipe, so it gets
    // memory of its own, whose addresses nothing takes again once the slab grows (in a shared
    // block, the growth frame's own upload buffers take the old slab's bytes at once, and a fault
    // there is rightly theirs).
    let (min_slab_size, large_threshold) = if case == "slab-grown" {
        (65 << 20, 2 << 20)
    } else {
        (240 << 10, 256 << 10)
    };
    let defaults = bevy::render::slab_allocator::SlabAllocatorSettings::default();
    // `SHIFT_VAR`: general slabs stay at their first size (see there).
    let max_slab_size = match std::env::var_os(SHIFT_VAR) {
        Some(_) => min_slab_size,
        None => defaults.max_slab_size,
    };
    render.insert_resource(MeshAllocatorSettings {
        slab_allocator_settings: bevy::render::slab_allocator::SlabAllocatorSettings {
            min_slab_size,
            max_slab_size,
            large_threshold,
            ..defaults
        },
        ..default()
    });
    render
        .insert_resource(Aim {
            target,
            server,
            class,
            // The image case aims by the texture's label alone.
            file: std::env::var_os(AIM_VAR)
                .filter(|_| case != "image")
                .map(PathBuf::from),
            case,
        })
        .add_systems(
            Render,
            (aim, panic_after_the_loss)
                .chain()
                .in_set(RenderSystems::Cleanup),
        );
    let exit = app.run();
    common::exit_process(exit);
}

/// The whole file as text: both loaders read a one-line description.
async fn read_text(reader: &mut dyn Reader) -> std::io::Result<String> {
    let mut text = String::new();
    reader.read_to_string(&mut text).await?;
    Ok(text)
}

fn invalid(text: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, text.to_owned())
}

/// `grid <n> <pnu|pnuc>`: an n x n vertex grid (position, normal, uv, optionally colour), u32 indices.
#[derive(Default, TypePath)]
struct GridMeshLoader;

impl AssetLoader for GridMeshLoader {
    type Asset = Mesh;
    type Settings = ();
    type Error = std::io::Error;

    async fn load(
        &self,
        reader: &mut dyn Reader,
        _: &(),
        _: &mut LoadContext<'_>,
    ) -> Result<Mesh, Self::Error> {
        let text = read_text(reader).await?;
        let bad = || invalid(&text);
        let words: Vec<&str> = text.split_whitespace().collect();
        let (["grid", n, layout] | [n, layout]) = words.as_slice() else {
            return Err(bad());
        };
        let n: u32 = n.parse().map_err(|_| bad())?;
        Ok(grid(n, *layout == "pnuc"))
    }

    fn extensions(&self) -> &[&str] {
        &["mesh"]
    }
}

fn grid(n: u32, colour: bool) -> Mesh {
    let step = 1.0 / (n - 1) as f32;
    let mut positions = Vec::new();
    let mut uvs = Vec::new();
    for z in 0..n {
        for x in 0..n {
            let (u, v) = (x as f32 * step, z as f32 * step);
            positions.push([u - 0.5, 0.0, v - 0.5]);
            uvs.push([u, v]);
        }
    }
    let mut indices = Vec::new();
    for z in 0..n - 1 {
        for x in 0..n - 1 {
            let i = z * n + x;
            indices.extend([i, i + n, i + 1, i + 1, i + n, i + n + 1]);
        }
    }
    let count = positions.len();
    let mut mesh = Mesh::new(
        PrimitiveTopology::TriangleList,
        RenderAssetUsages::default(),
    )
    .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
    .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, vec![[0.0, 1.0, 0.0]; count])
    .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
    .with_inserted_indices(Indices::U32(indices));
    if colour {
        mesh.insert_attribute(Mesh::ATTRIBUTE_COLOR, vec![[1.0, 0.8, 0.2, 1.0]; count]);
    }
    mesh
}

/// `checker <w> <h> <label>`: an sRGB image filled with one colour, with that texture label.
#[derive(Default, TypePath)]
struct FillImageLoader;

impl AssetLoader for FillImageLoader {
    type Asset = Image;
    type Settings = ();
    type Error = std::io::Error;

    async fn load(
        &self,
        reader: &mut dyn Reader,
        _: &(),
        _: &mut LoadContext<'_>,
    ) -> Result<Image, Self::Error> {
        let text = read_text(reader).await?;
        let bad = || invalid(&text);
        let words: Vec<&str> = text.split_whitespace().collect();
        let ["checker", w, h, label] = words.as_slice() else {
            return Err(bad());
        };
        let mut image = Image::new_fill(
            Extent3d {
                width: w.parse().map_err(|_| bad())?,
                height: h.parse().map_err(|_| bad())?,
                depth_or_array_layers: 1,
            },
            TextureDimension::D2,
            &[90, 160, 60, 255],
            TextureFormat::Rgba8UnormSrgb,
            RenderAssetUsages::default(),
        );
        // One leaked string per loaded image: the label is what the drill aims at.
        image.texture_descriptor.label = Some(Box::leak(label.to_string().into_boxed_str()));
        Ok(image)
    }

    fn extensions(&self) -> &[&str] {
        &["img"]
    }
}

/// Meshes the game adds itself before the level: a procedural one (no path), before the first
/// frame, and, when the slabs are to be numbered differently, [`FILLERS`] meshes of the tree's
/// layout and size at frame 3 (once Bevy's own meshes of the first frame are placed).
#[derive(Resource)]
struct EarlyMeshes {
    procedural: Handle<Mesh>,
    fillers: Vec<Handle<Mesh>>,
}

impl EarlyMeshes {
    fn add(app: &mut App) -> EarlyMeshes {
        let mut meshes = app.world_mut().resource_mut::<Assets<Mesh>>();
        EarlyMeshes {
            procedural: meshes.add(Cuboid::new(0.5, 1.0, 0.5)),
            fillers: Vec::new(),
        }
    }
}

/// With [`SHIFT_VAR`], at frame 3: the fillers, as `models/tree.mesh` is made (`grid 10 pnu`).
fn add_fillers(
    mut early: ResMut<EarlyMeshes>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut frame: Local<u32>,
) {
    *frame += 1;
    if *frame == 3 && std::env::var_os(SHIFT_VAR).is_some() {
        early.fillers = (0..FILLERS).map(|_| meshes.add(grid(10, false))).collect();
    }
}

/// The level's assets, loaded from their paths.
#[derive(Resource)]
struct Level {
    tree: Handle<Mesh>,
    _others: Vec<Handle<Mesh>>,
}

#[derive(Component)]
struct Tree;

/// Loads the level on the first frame, or on the tenth when the slabs are to be numbered
/// differently (the fillers are placed by then).
fn load_level(
    mut commands: Commands,
    server: Res<AssetServer>,
    early: Res<EarlyMeshes>,
    mut images: ResMut<Assets<Image>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut frame: Local<u32>,
) {
    *frame += 1;
    let at = if std::env::var_os(SHIFT_VAR).is_some() {
        10
    } else {
        1
    };
    if *frame != at {
        return;
    }
    let rock: Handle<Mesh> = server.load("models/rock.mesh");
    let tree: Handle<Mesh> = server.load("models/tree.mesh");
    let bush: Handle<Mesh> = server.load("models/bush.mesh");
    let flag: Handle<Mesh> = server.load("models/flag.mesh");
    let terrain: Handle<Mesh> = server.load("models/terrain.mesh");
    let grass: Handle<Image> = server.load("textures/grass.img");
    commands.spawn((
        common::main_camera(&mut images, 160, 96),
        Tonemapping::AcesFitted,
    ));
    // A minimap.
    commands.spawn((
        Name::new("minimap"),
        Camera3d::default(),
        Camera {
            order: 1,
            ..default()
        },
        Tonemapping::AcesFitted,
        common::offscreen_target(&mut images, 64, 64),
        Transform::from_xyz(0.0, 12.0, 0.1).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let grass = materials.add(StandardMaterial {
        base_color_texture: Some(grass),
        ..default()
    });
    let painted = materials.add(StandardMaterial {
        base_color: Color::srgb(0.7, 0.3, 0.2),
        ..default()
    });
    commands.spawn((
        Name::new("terrain"),
        Mesh3d(terrain.clone()),
        MeshMaterial3d(grass.clone()),
        Transform::from_scale(Vec3::splat(20.0)),
    ));
    for (name, x) in [("oak", -2.0), ("birch", 2.0)] {
        commands.spawn((
            Name::new(name),
            Tree,
            Mesh3d(tree.clone()),
            MeshMaterial3d(painted.clone()),
            Transform::from_xyz(x, 1.0, 0.0).with_scale(Vec3::splat(2.0)),
        ));
    }
    for (mesh, x) in [
        (&rock, -4.0),
        (&bush, 4.0),
        (&flag, 0.0),
        (&early.procedural, 1.0),
    ] {
        commands.spawn((
            Mesh3d(mesh.clone()),
            MeshMaterial3d(painted.clone()),
            Transform::from_xyz(x, 0.5, -2.0),
        ));
    }
    commands.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(3.0, 8.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    for x in [-3.0, 3.0] {
        commands.spawn((
            PointLight {
                intensity: 200_000.0,
                shadow_maps_enabled: true,
                ..default()
            },
            Transform::from_xyz(x, 3.0, 2.0),
        ));
    }
    commands.insert_resource(Level {
        tree,
        _others: vec![rock, bush, flag, terrain],
    });
}

/// `tree-removed`: the trees are cut down (entities despawned, the last handle dropped) once the
/// level has rendered a while; `slab-grown`: forty more meshes of the tree's layout arrive.
fn change_the_level(
    mut commands: Commands,
    level: Option<ResMut<Level>>,
    server: Res<AssetServer>,
    trees: Query<Entity, With<Tree>>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut frames_loaded: Local<u32>,
) {
    let Some(mut level) = level else {
        return;
    };
    if !server.is_loaded_with_dependencies(&level.tree) {
        return;
    }
    *frames_loaded += 1;
    if *frames_loaded != 20 {
        return;
    }
    match std::env::var(CASE_VAR).as_deref() {
        Ok("tree-removed") => {
            for tree in &trees {
                commands.entity(tree).despawn();
            }
            level.tree = Handle::default();
        }
        Ok("slab-grown") => {
            // A streamed-in district: more than the slab's 65 MiB of new vertex data in one
            // frame (70 x 1 MiB; no index data). Kept alive, not yet drawn.
            level._others.extend((0..70).map(|_| {
                let mut mesh = grid(180, false);
                mesh.remove_indices();
                meshes.add(mesh)
            }));
        }
        _ => {}
    }
}

/// Render world: what the drill should hit, and whether the aim is written.
#[derive(Resource)]
struct Aim {
    target: Target,
    /// To find loaded meshes by path.
    server: AssetServer,
    class: ElementClass,
    case: String,
    file: Option<PathBuf>,
}

/// The mesh aimed at.
enum Target {
    Path(&'static str),
    Id(AssetId<Mesh>),
}

impl Aim {
    fn id_of(&self, path: &'static str) -> Option<AssetId<Mesh>> {
        self.server
            .get_path_id(path)
            .and_then(|id| id.try_typed::<Mesh>().ok())
    }

    fn mesh(&self) -> Option<AssetId<Mesh>> {
        match self.target {
            Target::Path(path) => self.id_of(path),
            Target::Id(id) => Some(id),
        }
    }
}

/// Where the target mesh's data was first seen.
#[derive(Clone, Copy)]
struct Seen {
    slab: u32,
    large: bool,
    start: u64,
    len: u64,
    element_size: u64,
    buffer_size: u64,
    frames: u32,
}

/// Writes the aim once the case's moment has come, and prints the truth it computed.
fn aim(
    allocator: Res<MeshAllocator>,
    aim: Res<Aim>,
    mut seen: Local<Option<Seen>>,
    mut written: Local<bool>,
    // Found by path once; kept, as the path is gone once the mesh is unloaded.
    mut target: Local<Option<AssetId<Mesh>>>,
) {
    let (Some(file), false) = (&aim.file, *written) else {
        return;
    };
    if target.is_none() {
        *target = aim.mesh();
    }
    let Some(mesh) = *target else {
        return;
    };
    let key = MeshAllocationKey::new(mesh, aim.class);
    let now = allocator.key_to_slab.get(&key).and_then(|&slab| {
        let slice = allocator.slab_allocation_slice(&key, slab)?;
        let data = allocator.slabs.get(&slab)?;
        let element_size = data.element_layout().size();
        Some(Seen {
            slab: slab.id.get(),
            large: matches!(data, Slab::LargeObject(_)),
            start: u64::from(slice.range.start) * element_size,
            len: u64::from(slice.range.end - slice.range.start) * element_size,
            element_size,
            buffer_size: data.buffer_size(),
            frames: 0,
        })
    });
    match (&mut *seen, now) {
        (None, Some(now)) => *seen = Some(now),
        (Some(s), Some(now)) => {
            s.frames += 1;
            // `slab-grown` aims once the slab has grown (its old buffer is being freed): the next
            // frame's submission faults in the old buffer.
            let fire = match aim.case.as_str() {
                "slab-grown" => now.buffer_size > s.buffer_size,
                "tree-removed" => false,
                _ => s.frames >= 3,
            };
            if fire {
                *written = write_aim(file, s, aim.class, &slabs_of(&allocator, &aim));
            }
        }
        (Some(s), None) if aim.case == "tree-removed" => {
            *written = write_aim(file, s, aim.class, &slabs_of(&allocator, &aim));
        }
        _ => {}
    }
}

/// ` | rock_slab=N | bush_slab=M`: the vertex slabs of the target's neighbours.
fn slabs_of(allocator: &MeshAllocator, aim: &Aim) -> String {
    let slab = |path: &'static str| {
        aim.id_of(path)
            .and_then(|mesh| {
                allocator
                    .key_to_slab
                    .get(&MeshAllocationKey::new(mesh, ElementClass::Vertex))
            })
            .map_or("none".to_owned(), |s| s.id.get().to_string())
    };
    let mut all: Vec<u32> = allocator.key_to_slab.values().map(|s| s.id.get()).collect();
    all.sort_unstable();
    all.dedup();
    format!(
        " | rock_slab={} | bush_slab={} | slabs={all:?}",
        slab("models/rock.mesh"),
        slab("models/bush.mesh")
    )
}

fn write_aim(file: &Path, seen: &Seen, class: ElementClass, extra: &str) -> bool {
    let label = format!(
        "{} mesh slab {} ({} buffer)",
        if seen.large { "large" } else { "general" },
        seen.slab,
        match class {
            ElementClass::Index => "index",
            _ => "vertex",
        }
    );
    let offset = seen.start + ELEMENT * seen.element_size;
    println!(
        "TRUTH label={label} | start={} | len={} | element_size={} | offset={offset}{extra}",
        seen.start, seen.len, seen.element_size
    );
    // Whole or not at all: the layer reads the file at any submission.
    let partial = file.with_extension("partial");
    std::fs::write(&partial, format!("{label}@{offset}\n")).unwrap();
    std::fs::rename(&partial, file).unwrap();
    true
}

/// `panic-after-loss`: a game whose render code panics on the lost device in the frame of the loss
/// (as Bevy's own buffer mapping does), before Bevy's render error handler runs at the next extract:
/// the frame after the aim is written, the drill loses the device at its submission, and this
/// panics in the same frame's cleanup.
fn panic_after_the_loss(aim: Res<Aim>, mut frames_aimed: Local<u32>) {
    if aim.case != "panic-after-loss" || !aim.file.as_ref().is_some_and(|f| f.exists()) {
        return;
    }
    *frames_aimed += 1;
    if *frames_aimed == 2 {
        panic!("the game's own panic on the lost device");
    }
}

/// The drill loses the device long before this; a run that gets here had no fault.
fn stop_after_a_while(mut frames: Local<u32>, mut exit: MessageWriter<AppExit>) {
    *frames += 1;
    if *frames == 900 {
        eprintln!("asset_naming child: no device loss after 900 frames");
        exit.write(AppExit::Success);
    }
}
