//! The flame graph export in a real browser: headless Chromium (Debian's
//! `chromium`, installed by `cargo xtask test`) renders the SVG of a sampled
//! workload with a known hot function. The screenshot must be a real PNG of
//! the window's size, not blank, and in its pixels the hot function's frame
//! must be as wide, relative to the root frame, as its share of the samples
//! (Total Samples of `asys stats --report cpu_sample_sum`); the DOM after the SVG's
//! scripts ran must name it with that sample count.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use asys_tests::*;

const WIDTH: usize = 1200;
const HEIGHT: usize = 600;

/// Headless Chromium on `url` with `args`; its stdout.
fn chromium(args: &[&str], url: &str) -> Vec<u8> {
    let o = Command::new("chromium")
        // Root has no user namespace sandbox here; the page is our own file.
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--window-size={WIDTH},{HEIGHT}"))
        .args(args)
        .arg(url)
        .finish();
    assert!(
        o.status.success(),
        "chromium failed (cargo xtask test installs it): {}",
        stderr(&o)
    );
    o.stdout
}

/// An 8-bit RGB or RGBA PNG, decoded: (width, height, RGB pixels).
fn decode_png(png: &[u8]) -> (usize, usize, Vec<[u8; 3]>) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let (mut at, mut idat) = (8, Vec::new());
    let (mut width, mut height, mut channels) = (0, 0, 0);
    while at + 8 <= png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = &png[at + 4..at + 8];
        let data = &png[at + 8..at + 8 + len];
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                height = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                assert_eq!(data[8], 8, "bit depth");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    t => panic!("PNG color type {t}"),
                };
                assert_eq!(data[12], 0, "interlaced PNG");
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + len;
    }
    let raw = miniz_oxide::inflate::decompress_to_vec_zlib(&idat).expect("inflate IDAT");
    let stride = width * channels;
    assert_eq!(raw.len(), height * (stride + 1), "IDAT size");
    // Undo the per-row filters (PNG spec, section 9).
    let mut img = vec![0u8; height * stride];
    for y in 0..height {
        let filter = raw[y * (stride + 1)];
        let line = &raw[y * (stride + 1) + 1..(y + 1) * (stride + 1)];
        for x in 0..stride {
            let a = if x >= channels {
                img[y * stride + x - channels]
            } else {
                0
            };
            let b = if y > 0 { img[(y - 1) * stride + x] } else { 0 };
            let c = if x >= channels && y > 0 {
                img[(y - 1) * stride + x - channels]
            } else {
                0
            };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("PNG filter {f}"),
            };
            img[y * stride + x] = line[x].wrapping_add(pred);
        }
    }
    let pixels = img.chunks(channels).map(|p| [p[0], p[1], p[2]]).collect();
    (width, height, pixels)
}

/// The fill colour and sample count of the frame titled `name (...)` in
/// the DOM (`<title>name (N samples, P%)</title><rect ... fill="rgb(r,g,b)"`).
fn frame(dom: &str, name: &str) -> ([u8; 3], u64) {
    let title = format!("<title>{name} (");
    let at = dom
        .find(&title)
        .unwrap_or_else(|| panic!("no frame of {name} in the DOM"));
    let rest = &dom[at + title.len()..];
    let samples: u64 = rest
        .split(' ')
        .next()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap();
    let fill = rest.split("fill=\"rgb(").nth(1).unwrap();
    let rgb: Vec<u8> = fill
        .split(')')
        .next()
        .unwrap()
        .split(',')
        .map(|v| v.trim().parse().unwrap())
        .collect();
    ([rgb[0], rgb[1], rgb[2]], samples)
}

/// The most pixels of colour `rgb` in any one row: the frame's drawn width
/// (a row above its label, where no glyph covers it).
fn widest_row(width: usize, pixels: &[[u8; 3]], rgb: [u8; 3]) -> usize {
    pixels
        .chunks(width)
        .map(|row| row.iter().filter(|p| **p == rgb).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn chromium_draws_the_flame_graph_with_the_hot_functions_share() {
    let s = Scratch::new("flame-browser");
    // Burns CPU in `burn_hot` (about 80 %) and `burn_cold`, under `main`.
    let bin = c_workload("burner.c", &[]);
    let report = s.path("burner");
    let o = run(&[
        "profile",
        "-s",
        "process-tree",
        "-o",
        report.to_str().unwrap(),
        bin.to_str().unwrap(),
        "400",
        "100",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report = report.with_extension("asysrep");
    let o = run(&["export", "--type", "flamegraph", report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg: PathBuf = s.path("burner.svg");
    assert!(svg.is_file());

    // The report's own account: the samples with burn_hot on the stack
    // (its frame's width: itself and what it called, the vDSO clock) of
    // all samples.
    let mut in_stack: BTreeMap<String, u64> = BTreeMap::new();
    for r in stats_json(&report, "cpu_sample_sum") {
        *in_stack
            .entry(r["Function"].as_str().unwrap().into())
            .or_default() += r["Total Samples"].as_u64().unwrap();
    }
    let total = metadata(&report)["tables"]["cpu_samples"].as_u64().unwrap();
    let hot = in_stack["burn_hot"];
    assert!(total >= 200, "{total} samples for 500 ms of CPU");
    let share = hot as f64 / total as f64;
    assert!((0.6..0.95).contains(&share), "burn_hot's share {share}");

    // The DOM after the SVG's scripts ran names the frames with the counts.
    let url = format!("file://{}", svg.display());
    let dom = String::from_utf8(chromium(&["--dump-dom"], &url)).unwrap();
    let (hot_rgb, hot_n) = frame(&dom, "burn_hot");
    let (all_rgb, all_n) = frame(&dom, "all");
    assert_eq!((hot_n, all_n), (hot, total), "the DOM's sample counts");
    assert_ne!(hot_rgb, all_rgb, "the test tells frames apart by colour");

    // The screenshot: a real PNG of the window's size, with the frames drawn.
    let png_path = s.path("flamegraph.png");
    chromium(&[&format!("--screenshot={}", png_path.display())], &url);
    let png = std::fs::read(&png_path).unwrap();
    let (w, h, pixels) = decode_png(&png);
    assert_eq!((w, h), (WIDTH, HEIGHT), "screenshot size");
    let background = pixels[pixels.len() - 1];
    let drawn = pixels.iter().filter(|p| **p != background).count();
    assert!(
        drawn * 20 > pixels.len(),
        "only {drawn} of {} pixels drawn: a blank page",
        pixels.len()
    );
    let all_px = widest_row(w, &pixels, all_rgb);
    let hot_px = widest_row(w, &pixels, hot_rgb);
    assert!(all_px > w / 2, "the root frame spans {all_px} px of {w}");
    let drawn_share = hot_px as f64 / all_px as f64;
    println!(
        "burn_hot: {hot} of {total} samples ({:.1}%); drawn {hot_px} of {all_px} px ({:.1}%); \
         {} byte screenshot",
        share * 100.0,
        drawn_share * 100.0,
        png.len()
    );
    assert!(
        (drawn_share - share).abs() < 0.03,
        "burn_hot drawn at {drawn_share:.3} of the root's width, its share of samples is {share:.3}"
    );
    if let Some(dir) = std::env::var_os("ASYS_FLAMEGRAPH_SCREENSHOT") {
        // How docs/images/flamegraph.png is made.
        std::fs::copy(&png_path, Path::new(&dir).join("flamegraph.png")).unwrap();
    }
}
