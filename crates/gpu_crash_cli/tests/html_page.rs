//! `gpu-crash show --html`, rendered by a real headless Chromium: the checks read the rendered page
//! (the PDF Chromium prints, as text with word boxes from `pdftotext` and as pixels from
//! `pdftoppm`), not the HTML source. Reports are the drill's, from tests/fixtures.
//!
//! Without `chromium` or poppler's `pdftotext`/`pdftoppm` the tests say "skipped", except in CI
//! (`CI` set), where they fail: `.ci/run` installs both.
//!
//! `GPU_CRASH_PAGE_SCREENSHOTS=<dir>` also writes `<dir>/report-page-<case>.png` (docs/ holds them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fixture, gpu_crash, temp_dir, text};

/// Pixels per inch of the rendered pages (1 CSS px of the printed page is about 0.6 px here).
const DPI: f64 = 96.0;

/// Colours the page draws with (page.rs's style).
const FREED_BAR: [u8; 3] = [0xcb, 0xd5, 0xe1];
const LIVE_BAR: [u8; 3] = [0x25, 0x63, 0xeb];
const FAULT_LINE: [u8; 3] = [0xe1, 0x1d, 0x48];
const HUNG_STAGE: [u8; 3] = [0xff, 0x4d, 0x00];

/// A word of the rendered page and its box, in pixels of its page image.
#[derive(Debug)]
struct Word {
    page: usize,
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
    text: String,
}

/// One page as pixels.
struct Image {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Image {
    fn is(&self, x: usize, y: usize, colour: [u8; 3]) -> bool {
        let i = (y * self.width + x) * 3;
        self.rgb[i..i + 3]
            .iter()
            .zip(colour)
            .all(|(&a, b)| a.abs_diff(b) <= 8)
    }

    /// Pixels of `colour` in the box `[x0, x1) x [y0, y1)` (clipped to the image).
    fn count(&self, colour: [u8; 3], (x0, y0, x1, y1): (f64, f64, f64, f64)) -> usize {
        let clip = |v: f64, max: usize| (v.max(0.0) as usize).min(max);
        let (x0, x1) = (clip(x0, self.width), clip(x1, self.width));
        let (y0, y1) = (clip(y0, self.height), clip(y1, self.height));
        (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .filter(|&(x, y)| self.is(x, y, colour))
            .count()
    }

    /// The most pixels of `colour` in any one column: a vertical line's length.
    fn longest_column(&self, colour: [u8; 3]) -> usize {
        (0..self.width)
            .map(|x| (0..self.height).filter(|&y| self.is(x, y, colour)).count())
            .max()
            .unwrap_or(0)
    }
}

/// The page as Chromium rendered it.
struct Rendered {
    text: String,
    words: Vec<Word>,
    pages: Vec<Image>,
    dir: PathBuf,
}

impl Rendered {
    fn words(&self, text: &str) -> Vec<&Word> {
        self.words.iter().filter(|w| w.text == text).collect()
    }

    fn assert_text(&self, wanted: &str) {
        assert!(
            self.text.contains(wanted),
            "the rendered page does not show {wanted:?} (see {}):\n{}",
            self.dir.display(),
            self.text
        );
    }
}

/// `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium, pdftotext and pdftoppm; `None` (after saying "skipped") when one is missing outside
/// CI; a failure when one is missing in CI.
fn tools() -> Option<(PathBuf, PathBuf, PathBuf)> {
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| on_path("chromium"))
        .or_else(|| on_path("chromium-browser"));
    let found = (chromium, on_path("pdftotext"), on_path("pdftoppm"));
    match found {
        (Some(c), Some(t), Some(p)) => Some((c, t, p)),
        missing => {
            let why = format!(
                "needs chromium and poppler-utils (apt-get install chromium poppler-utils); found \
                 {missing:?}"
            );
            assert!(std::env::var_os("CI").is_none(), "in CI: {why}");
            println!("skipped: {why}");
            None
        }
    }
}

fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "{command:?}: {}\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

/// `gpu-crash show --html` of fixture `case` (copied to a fresh folder, so the page lands beside
/// it), checked to print the page's path.
fn write_page(case: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(&format!("html-{case}"));
    let report = dir.join(format!("{case}.json"));
    std::fs::copy(fixture(case), &report).unwrap();
    let stdout = run(gpu_crash().args(["show", "--html"]).arg(&report));
    let page = dir.join(format!("{case}.html"));
    assert_eq!(stdout.trim(), page.display().to_string());
    assert!(page.is_file());
    (dir, page)
}

/// The page printed by headless Chromium, then read back as text, word boxes and pixels.
fn render(case: &str) -> Option<Rendered> {
    let (chromium, pdftotext, pdftoppm) = tools()?;
    let (dir, page) = write_page(case);
    let pdf = dir.join("page.pdf");
    let url = format!("file://{}", page.display());
    let chrome = |extra: &[String]| {
        let mut c = Command::new("timeout");
        c.arg("120")
            .arg(&chromium)
            .args([
                "--headless=new",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .args(extra)
            .arg(&url);
        c
    };
    run(&mut chrome(&[
        "--no-pdf-header-footer".to_owned(),
        format!("--print-to-pdf={}", pdf.display()),
    ]));
    if let Some(shots) = std::env::var_os("GPU_CRASH_PAGE_SCREENSHOTS") {
        let height = if case.starts_with("hang") { 1100 } else { 1560 };
        let png = Path::new(&shots).join(format!("report-page-{case}.png"));
        run(&mut chrome(&[
            format!("--window-size=1140,{height}"),
            format!("--screenshot={}", png.display()),
        ]));
    }
    let text = run(Command::new(&pdftotext).arg("-layout").arg(&pdf).arg("-"));
    let scale = DPI / 72.0;
    let bbox = run(Command::new(&pdftotext).arg("-bbox").arg(&pdf).arg("-"));
    let mut words = Vec::new();
    for (page, body) in bbox.split("<page ").skip(1).enumerate() {
        for w in body.split("<word ").skip(1) {
            let attr = |name: &str| -> f64 {
                let from = w.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                w[from..from + w[from..].find('"').unwrap()]
                    .parse()
                    .unwrap()
            };
            let text = &w[w.find('>').unwrap() + 1..w.find("</word>").unwrap()];
            words.push(Word {
                page,
                x0: attr("xMin") * scale,
                y0: attr("yMin") * scale,
                x1: attr("xMax") * scale,
                y1: attr("yMax") * scale,
                text: text.replace("&quot;", "\"").replace("&amp;", "&"),
            });
        }
    }
    run(Command::new(&pdftoppm)
        .args(["-r", &DPI.to_string()])
        .arg(&pdf)
        .arg(dir.join("page")));
    let mut ppms: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ppm"))
        .collect();
    ppms.sort();
    let pages = ppms.iter().map(|p| read_ppm(p)).collect();
    Some(Rendered {
        text,
        words,
        pages,
        dir,
    })
}

/// A binary PPM (P6, 8 bits) as pdftoppm writes it.
fn read_ppm(path: &Path) -> Image {
    let bytes = std::fs::read(path).unwrap();
    // "P6\n<w> <h>\n255\n": four whitespace-separated fields, then the pixels.
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 {
        while bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while !bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        fields.push(String::from_utf8_lossy(&bytes[start..at]).into_owned());
    }
    assert_eq!(fields[0], "P6", "{}", path.display());
    let (width, height) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    Image {
        width,
        height,
        rgb: bytes[at + 1..].to_vec(),
    }
}

/// The culprit's row on the map: its label and a bar of `bar` colour right of it, in that row.
fn assert_culprit_row(page: &Rendered, label: &str, bar: [u8; 3]) {
    page.assert_text(&format!("{label} (culprit)"));
    let marks = page.words("(culprit)");
    assert_eq!(marks.len(), 1, "one culprit on the map: {marks:?}");
    let w = marks[0];
    let image = &page.pages[w.page];
    let row = (w.x1, w.y0 - 6.0, image.width as f64, w.y1 + 14.0);
    let pixels = image.count(bar, row);
    assert!(
        pixels > 100,
        "the culprit's row has {pixels} pixels of its bar colour {bar:02x?} (see {})",
        page.dir.display()
    );
}

/// The fault address drawn as a labelled line across the map.
fn assert_fault_line(page: &Rendered, label: &str) {
    page.assert_text(label);
    let longest = page
        .pages
        .iter()
        .map(|p| p.longest_column(FAULT_LINE))
        .max()
        .unwrap_or(0);
    assert!(
        longest >= 40,
        "no fault line: the longest column of the fault colour is {longest} px (see {})",
        page.dir.display()
    );
}

#[test]
fn use_after_free_page_maps_the_freed_culprit_under_the_fault() {
    let Some(page) = render("use-after-free") else {
        return;
    };
    page.assert_text("Use after free: buffer \"terrain_chunk\"");
    page.assert_text("130 MiB · freed 3 ms, 0 frames before");
    assert_culprit_row(&page, "buffer \"terrain_chunk\"", FREED_BAR);
    assert_fault_line(&page, "fault 0x159670000 (write)");
    page.assert_text("Vulkan 1.3.230");
}

#[test]
fn out_of_bounds_page_maps_the_live_culprit_before_the_fault() {
    let Some(page) = render("out-of-bounds") else {
        return;
    };
    page.assert_text("Out of bounds: buffer \"terrain_chunk\"");
    page.assert_text("130 MiB · live");
    page.assert_text("fault 0 B past its end");
    assert_culprit_row(&page, "buffer \"terrain_chunk\"", LIVE_BAR);
    assert_fault_line(&page, "fault 0x165990004 (write)");
}

#[test]
fn hang_page_highlights_the_stage_the_gpu_hung_in() {
    let Some(page) = render("hang-in-pass") else {
        return;
    };
    page.assert_text("GPU hang in Core3d MainPass of camera \"main\"");
    page.assert_text("GPU hung here");
    // Each stage word of the timeline, and how much of its box is the hung stage's colour.
    let share = |word: &str| -> Vec<f64> {
        page.words(word)
            .iter()
            .map(|w| {
                let image = &page.pages[w.page];
                let area = (w.x1 - w.x0 + 8.0) * (w.y1 - w.y0 + 8.0);
                image.count(HUNG_STAGE, (w.x0 - 4.0, w.y0 - 4.0, w.x1 + 4.0, w.y1 + 4.0)) as f64
                    / area
            })
            .collect()
    };
    let main_pass = share("MainPass");
    assert_eq!(
        main_pass.iter().filter(|&&s| s > 0.3).count(),
        1,
        "one MainPass on the hung stage's colour: {main_pass:?} (see {})",
        page.dir.display()
    );
    for other in ["Prepass", "PostProcess"] {
        let shares = share(other);
        assert!(!shares.is_empty(), "{other} is not on the timeline");
        assert!(
            shares.iter().all(|&s| s < 0.05),
            "{other} is highlighted too: {shares:?}"
        );
    }
}

#[test]
fn out_writes_the_page_where_asked() {
    let dir = temp_dir("html-out");
    let out = dir.join("elsewhere.html");
    let stdout = run(gpu_crash()
        .args(["show", "--html", "--out"])
        .arg(&out)
        .arg(fixture("hang")));
    assert_eq!(stdout.trim(), out.display().to_string());
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // --out without --html is a usage error.
    let output = gpu_crash()
        .args(["show", "--out"])
        .arg(&out)
        .arg(fixture("hang"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}
