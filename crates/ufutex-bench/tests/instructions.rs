//! `instructions`: under valgrind, ufutex's wake with no waiters and its failing waitvs (one
//! entry; 128, the last failing) count a positive, sane number of instructions per call, the same in every repetition (a
//! count, not a time), and a competitor without waitv has no waitv row; without
//! valgrind the run still succeeds and lists every competitor as skipped, saying why.

use assert_cmd::Command;
use std::path::PathBuf;

fn valgrind_present() -> bool {
    std::process::Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Run `instructions` with `args` (and `env`), return its JSON document.
fn instructions(args: &[&str], env: Option<(&str, &str)>) -> serde_json::Value {
    let dir: PathBuf = std::env::temp_dir().join(format!("ufutex-bench-instr-{}-{}", std::process::id(), args.len()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.json");
    let mut cmd = Command::cargo_bin("ufutex-bench").unwrap();
    cmd.arg("instructions").args(args).args(["--quiet", "--json"]).arg(&file);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let v = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    v
}

#[test]
fn ufutex_wake_counts_a_sane_number_of_instructions_every_time() {
    if !valgrind_present() {
        eprintln!("valgrind is not installed: nothing to count with, test skipped");
        return;
    }
    let v = instructions(&["--impl", "ufutex,parking_lot_core", "--reps", "2", "--calls", "1024"], None);
    let b = &v["benches"][0];
    assert_eq!(b["workload"], "instructions");
    let column = |name: &str| b["metrics"].as_array().unwrap().iter().find(|m| m["metric"]["name"] == name).unwrap();
    let wake = column("wake, no waiters");
    assert_eq!(wake["metric"]["unit"], "instr");
    let competitors = |m: &serde_json::Value| -> Vec<String> {
        m["rows"].as_array().unwrap().iter().map(|r| r["competitor"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(competitors(wake), ["ufutex", "parking_lot_core"], "{b}");
    // The failing waitvs: counted for ufutex; parking_lot_core has no waitv, no row.
    let waitv = column("waitv of one entry, value mismatch");
    let waitv128 = column("waitv of 128 entries failing on the last");
    assert_eq!((competitors(waitv), competitors(waitv128)), (vec!["ufutex".into()], vec!["ufutex".into()]), "{b}");
    // An optimized build's wake and one-entry waitv are tens of instructions, its 128 entries'
    // some thousands; unoptimized (`cargo test`'s default profile, which built this binary too)
    // several times more.
    let debug = if cfg!(debug_assertions) { 20.0 } else { 1.0 };
    for (m, bound) in [(wake, 200.0), (waitv, 200.0), (waitv128, 5_000.0)] {
        let bound = bound * debug;
        let row = &m["rows"][0];
        let samples: Vec<f64> = row["samples"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(samples.len(), 2);
        assert!(samples.iter().all(|&x| x > 0.0 && x < bound), "{}: {samples:?}", m["metric"]["name"]);
        assert!((samples[0] - samples[1]).abs() <= 1.0, "a count moved between repetitions: {samples:?}");
    }
    // The 128 entries are all read: far more than one entry's count.
    let first = |m: &serde_json::Value| m["rows"][0]["samples"][0].as_f64().unwrap();
    assert!(first(waitv128) > 8.0 * first(waitv), "{} vs {}", first(waitv128), first(waitv));
}

#[test]
fn without_valgrind_every_competitor_is_skipped_with_the_reason() {
    let env = ("UFUTEX_BENCH_VALGRIND", "/nonexistent/valgrind");
    let v = instructions(&["--impl", "ufutex,parking_lot_core"], Some(env));
    let b = &v["benches"][0];
    let skipped = b["skipped"].as_array().unwrap();
    let names: Vec<&str> = skipped.iter().map(|s| s["competitor"].as_str().unwrap()).collect();
    assert_eq!(names, ["ufutex", "parking_lot_core"]);
    assert!(skipped.iter().all(|s| s["reason"].as_str().unwrap().contains("valgrind not found")), "{b}");
    assert!(b["notes"][0].as_str().unwrap().starts_with("not counted: valgrind not found"), "{b}");
}
