//! Replays the fuzz corpora through the same property checks the fuzz targets run
//! (reliability.md §9 and T07/T09/T10/T11): for each target, the generated seeds and every file
//! in `fuzz/corpus/<target>/` (the `*_corpus` tests), and every file in `fuzz/artifacts/<target>/`
//! (minimised crash inputs kept as regressions: the `*_artifacts` tests). The property code lives
//! in `fuzz/props/` and is compiled into both this test and the cargo-fuzz targets
//! (`fuzz/fuzz_targets/`), so a corpus file means the same thing in both places. See
//! fuzz/README.md.
//!
//! `cargo test --test it fuzz_corpus::write_seeds -- --ignored` rewrites the `seed-*` files of
//! every corpus (and `fuzz/request_decode.dict`).

#[path = "../../fuzz/props/alloc.rs"]
mod alloc;
#[path = "../../fuzz/props/compaction.rs"]
mod compaction;
#[path = "../../fuzz/props/frame.rs"]
mod frame;
#[path = "../../fuzz/props/image.rs"]
mod image_props;
#[path = "../../fuzz/props/request.rs"]
mod request;
#[path = "../../fuzz/props/seeds.rs"]
mod seeds;

use std::path::{Path, PathBuf};
use std::time::Instant;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Files of `fuzz/<kind>/<target>/`, sorted, hidden files and READMEs skipped.
fn files(kind: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = fuzz_dir().join(kind).join(target);
    let Ok(rd) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut out: Vec<(String, Vec<u8>)> = rd
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !n.ends_with(".md"))
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).expect("read a corpus file");
            (format!("{kind}/{target}/{n}"), bytes)
        })
        .collect();
    out.sort();
    out
}

/// Run `check` on every input; the failures, each naming its input and the broken property.
fn failures(target: &str, inputs: &[(String, Vec<u8>)], check: fn(&[u8])) -> Vec<String> {
    let mut out = Vec::new();
    for (name, data) in inputs {
        if let Err(p) = std::panic::catch_unwind(|| check(data)) {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            out.push(format!("{target}: property failed on {name} ({} bytes): {msg}", data.len()));
        }
    }
    out
}

fn run_all(target: &str, inputs: &[(String, Vec<u8>)], check: fn(&[u8])) -> usize {
    let failed = failures(target, inputs, check);
    assert!(failed.is_empty(), "{} of {} inputs failed:\n{}", failed.len(), inputs.len(), failed.join("\n"));
    inputs.iter().map(|(_, d)| d.len()).sum()
}

/// Run `check` on the generated seeds and on every file of `fuzz/corpus/<target>/`; a failure
/// names the input.
fn replay(target: &str, seeds: seeds::Seeds, check: fn(&[u8])) {
    let started = Instant::now();
    let mut inputs: Vec<(String, Vec<u8>)> =
        seeds.into_iter().map(|(n, b)| (format!("generated seed {n}"), b)).collect();
    let n_seeds = inputs.len();
    inputs.extend(files("corpus", target));
    let bytes = run_all(target, &inputs, check);
    eprintln!(
        "{target}: {n_seeds} seeds + {} corpus files ({bytes} bytes) in {:.2} s",
        inputs.len() - n_seeds,
        started.elapsed().as_secs_f64()
    );
}

/// Run `check` on every committed crash input of `fuzz/artifacts/<target>/` (minimised inputs
/// that once broke a property, kept as regressions).
fn replay_artifacts(target: &str, check: fn(&[u8])) {
    let inputs = files("artifacts", target);
    let bytes = run_all(target, &inputs, check);
    eprintln!("{target}: {} artifacts ({bytes} bytes)", inputs.len());
}

#[test]
fn frame_decode_corpus() {
    replay("frame_decode", seeds::frame_seeds(), frame::check);
}

#[test]
fn frame_decode_artifacts() {
    replay_artifacts("frame_decode", frame::check);
}

#[test]
fn request_decode_corpus_and_artifacts() {
    // one test: the store is per process and this keeps its use sequential
    replay("request_decode", seeds::request_seeds(), request::check);
    replay_artifacts("request_decode", request::check);
    request::finish();
}

#[test]
fn image_decode_corpus() {
    replay("image_decode", seeds::image_seeds(), image_props::check);
}

#[test]
fn image_decode_artifacts() {
    replay_artifacts("image_decode", image_props::check);
}

fn fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/request_build");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/request_build")
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path()).expect("read a fixture"))
        })
        .filter(|(n, _)| n.ends_with(".json"))
        .collect();
    out.sort();
    out
}

#[test]
fn compaction_corpus() {
    replay("compaction", seeds::compaction_seeds(&fixtures()), compaction::check);
}

/// Findings of the compaction fuzz target, kept as regressions (markdownChunks: a split line lost
/// its trailing space, a table lost its header, a two-row table went over the size, an empty
/// chunk after a wide character; fixed in `src/domain/chunks.rs`).
#[test]
fn compaction_artifacts() {
    replay_artifacts("compaction", compaction::check);
}

/// A JSON case and the same case derived from bytes agree (the JSON form round-trips), so a
/// byte-derived failure can be written out as readable JSON.
#[test]
fn compaction_cases_round_trip_through_json() {
    for (_, data) in seeds::compaction_seeds(&fixtures()) {
        if data.first() == Some(&b'{') {
            continue;
        }
        let case = compaction::Case::from_bytes(&data);
        let text = case.to_json().to_string();
        assert_eq!(compaction::Case::from_json(text.as_bytes()), Some(case));
    }
}

/// Writes the generated seeds to `fuzz/corpus/<target>/seed-*` (dropping other copies of them)
/// and the request dictionary.
#[test]
#[ignore = "writes files: run by hand after changing the seeds"]
fn write_seeds() {
    let sets = [
        ("frame_decode", seeds::frame_seeds()),
        ("request_decode", seeds::request_seeds()),
        ("image_decode", seeds::image_seeds()),
        ("compaction", seeds::compaction_seeds(&fixtures())),
    ];
    for (target, set) in sets {
        let dir = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("seed-") {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            // `cargo fuzz cmin` keeps copies of seeds under hashed names: one copy is enough
            let copy = std::fs::read(e.path()).unwrap();
            if set.iter().any(|(_, bytes)| *bytes == copy) {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        for (name, bytes) in set {
            std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
        }
    }
    std::fs::write(fuzz_dir().join("request_decode.dict"), seeds::request_dictionary()).unwrap();
}
