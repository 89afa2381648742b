//! The command line: bad arguments fail with a clear message and exit code 2, and `--json`
//! writes a document that parses, for every workload subcommand.

use assert_cmd::Command;

fn bench() -> Command {
    Command::cargo_bin("ufutex-bench").expect("binary built")
}

fn stderr_of(args: &[&str]) -> String {
    let out = bench().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?} should be a usage error");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn bad_arguments_get_clear_errors() {
    assert!(stderr_of(&["hash", "--size", "12"]).contains("--size 12: must be 8, 16, 32 or 64"));
    assert!(stderr_of(&["wake", "--impl", "kernal"]).contains("unknown competitor \"kernal\""));
    assert!(stderr_of(&["hash", "--slots", "3"]).contains("power of two"));
    assert!(stderr_of(&["waitv", "--entries", "2000"]).contains("--entries 2000"));
    assert!(stderr_of(&["lock", "--cs", "abc"]).contains("--cs"));
    assert!(stderr_of(&["lock", "--impl", "ufutex-spin-2x3-7y"]).contains("power of two"));
    assert!(stderr_of(&["lock", "--impl", "ufutex-handoff-soon"]).contains("threshold"));
    assert!(stderr_of(&["lock", "--impl", "ufutex", "--baseline", "std"]).contains("--baseline \"std\""));
    assert!(stderr_of(&["ping-pong", "--pairs", "x"]).contains("invalid value"));
    assert!(stderr_of(&["no-such-workload"]).contains("unrecognized subcommand"));
    assert!(stderr_of(&["report", "--scale", "0"]).contains("--scale"));
    assert!(stderr_of(&["wake", "--impl", "kernel-shared"]).contains("needs --shared"));
    assert!(stderr_of(&["hash", "--shared", "--slots", "2"]).contains("--slots"));
    assert!(stderr_of(&["recovery", "--impl", "kernel"]).contains("ufutex-shared only"));
    assert!(stderr_of(&["lock", "--shared"]).contains("unexpected argument '--shared'"));
    assert!(stderr_of(&["keyed", "--keys", "1,0"]).contains("--keys 0"));
    assert!(stderr_of(&["keyed", "--base", "0x7ffffff0", "--keys", "100"]).contains("--base"));
    assert!(stderr_of(&["keyed", "--impl", "kernel"]).contains("kernel-semget"));
    assert!(stderr_of(&["sem-pingpong", "--iters", "0"]).contains("--iters 0"));
    assert!(stderr_of(&["sem-pingpong", "--impl", "semop"]).contains("sysv-semop"));
    assert!(stderr_of(&["instructions", "--calls", "0"]).contains("--calls 0"));
    assert!(stderr_of(&["count-calls", "--impl", "ufutex,kernel", "--calls", "wake=1"]).contains("exactly one"));
    assert!(stderr_of(&["count-calls", "--impl", "ufutex", "--calls", "nap=1"]).contains("--calls"));
    assert!(
        stderr_of(&["first-call", "--impl", "kernel"]).contains("first-call runs kernel, ufutex and ufutex-preload")
    );
    assert!(stderr_of(&["first-call-child", "--via", "pthread"]).contains("--via pthread: must be kernel or ufutex"));
}

fn json_of(args: &[&str]) -> serde_json::Value {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ufutex-bench-cli-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("out.json");
    let out = bench().args(args).args(["--reps", "1", "--no-warmup", "--quiet", "--json"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("| competitor |"), "markdown table on stdout");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    v
}

#[test]
fn every_workload_writes_valid_json() {
    let cases: &[&[&str]] = &[
        &["fastpath", "--runtime", "0.005"],
        &["hash", "--runtime", "0.01", "--futexes", "8"],
        &["hash", "--contend", "--sleepers", "4", "--runtime", "0.01", "--impl", "ufutex,atomic-wait"],
        &["wake", "-n", "4"],
        &["wake-parallel", "-n", "4", "-w", "2"],
        &["requeue", "-n", "4"],
        &["waitv", "--entries", "1,4", "--runtime", "0.005"],
        &["ping-pong", "--iters", "50", "--pairs", "2", "--no-pin"],
        &["schbench", "--runtime", "0.02", "-m", "1", "-w", "2"],
        &["lock", "--threads", "2", "--cs", "5", "--runtime", "0.01"],
        &["fastpath", "--shared", "--runtime", "0.005"],
        &["hash", "--shared", "--runtime", "0.01", "--futexes", "8"],
        &["hash", "--shared", "--contend", "--sleepers", "4", "--runtime", "0.01"],
        &["wake", "--shared", "-n", "1"],
        &["wake-parallel", "--shared", "-n", "4", "-w", "2"],
        &["requeue", "--shared", "-n", "4"],
        &["waitv", "--shared", "--entries", "1,4", "--runtime", "0.005"],
        &["ping-pong", "--shared", "--iters", "50", "--pairs", "2"],
        &["ping-pong", "--shared", "--iters", "50", "--no-pin"],
        &["recovery"],
        &["first-call"],
        &["sem-pingpong", "--iters", "20"],
        &["sem-pingpong", "--iters", "20", "--no-pin", "--impl", "ufutex-named,posix-sem"],
    ];
    for args in cases {
        let v = json_of(args);
        let benches = v["benches"].as_array().expect("benches");
        assert!(!benches.is_empty(), "{args:?}");
        for b in benches {
            assert!(b["metrics"].as_array().is_some_and(|m| !m.is_empty()), "{args:?}: {b}");
        }
        assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn unsupported_competitors_are_skipped_with_a_reason() {
    let v = json_of(&["hash", "--contend", "--sleepers", "2", "--runtime", "0.01", "--impl", "ufutex,atomic-wait"]);
    let skipped = &v["benches"][0]["skipped"][0];
    assert_eq!(skipped["competitor"], "atomic-wait");
    assert!(skipped["reason"].as_str().unwrap().contains("mask"));
}

#[test]
fn lock_runs_ufutex_policy_variants_side_by_side() {
    let names = ["ufutex", "ufutex-nohandoff", "ufutex-handoff-50us", "ufutex-handoff-1wakeup", "ufutex-spin-6x1-0y"];
    let list = names.join(",");
    let v = json_of(&["lock", "--threads", "2", "--cs", "5", "--runtime", "0.01", "--impl", &list]);
    let bench = &v["benches"][0];
    let rows: Vec<&str> =
        bench["metrics"][0]["rows"].as_array().unwrap().iter().map(|r| r["competitor"].as_str().unwrap()).collect();
    assert_eq!(rows, names);
    let notes = bench["notes"].as_array().unwrap();
    for n in &names[1..] {
        assert!(notes.iter().any(|x| x.as_str().unwrap().starts_with(&format!("{n}: "))), "{n}: {notes:?}");
    }
}

#[test]
fn lock_at_one_thread_times_the_uncontended_pair_against_a_chosen_baseline() {
    let v = json_of(&[
        "lock",
        "--threads",
        "1",
        "--cs",
        "0",
        "--runtime",
        "0.01",
        "--impl",
        "ufutex,parking_lot",
        "--baseline",
        "parking_lot",
    ]);
    let bench = &v["benches"][0];
    assert_eq!(bench["case"], "threads=1 cs=0");
    let metrics = bench["metrics"].as_array().unwrap();
    let per_op = metrics.iter().find(|m| m["metric"]["name"] == "time per op").expect("time per op at 1 thread");
    assert_eq!(per_op["metric"]["unit"], "ns");
    assert!(metrics.iter().all(|m| m["baseline"] == "parking_lot"));
    let rows = per_op["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["median"].as_f64().is_some_and(|ns| ns > 0.0)), "{rows:?}");
}

/// `--shared`: the shared competitors against kernel-shared, ", shared" cases, the competitors
/// without a shared mode listed as left out; ping-pong's pongers in child processes.
#[test]
fn shared_runs_say_what_they_ran_against_what() {
    let v = json_of(&["ping-pong", "--shared", "--iters", "50", "--impl", "ufutex,kernel,atomic-wait"]);
    let b = &v["benches"][0];
    assert!(b["case"].as_str().unwrap().ends_with("child processes (memfd mapped again), shared"), "{b}");
    let m = &b["metrics"][0];
    assert_eq!(m["baseline"], "kernel-shared");
    let rows: Vec<&str> = m["rows"].as_array().unwrap().iter().map(|r| r["competitor"].as_str().unwrap()).collect();
    assert_eq!(rows, ["ufutex-shared", "kernel-shared"]);
    assert_eq!(b["skipped"][0]["competitor"], "atomic-wait");
    assert!(b["skipped"][0]["reason"].as_str().unwrap().contains("no process-shared mode"));
}

/// `recovery` measures one takeover per repetition (the child checks that the grandchild died
/// by SIGKILL and that the wake woke nobody; any surprise fails the run).
#[test]
fn recovery_reports_one_takeover_per_repetition() {
    let v = json_of(&["recovery"]);
    let b = &v["benches"][0];
    assert_eq!(b["workload"], "recovery");
    let row = &b["metrics"][0]["rows"][0];
    assert_eq!(row["competitor"], "ufutex-shared");
    assert!(row["median"].as_f64().is_some_and(|ms| ms > 0.0), "{row}");
}

/// `first-call` times two calls in a new process per sample, for the kernel and ufutex, and
/// for ufutex-preload where the library sits beside the binary (otherwise it says why not).
#[test]
fn first_call_reports_every_competitor_or_why_not() {
    let v = json_of(&["first-call"]);
    let b = &v["benches"][0];
    assert_eq!(b["workload"], "first-call");
    let names = |m: &serde_json::Value| -> Vec<String> {
        m["rows"].as_array().unwrap().iter().map(|r| r["competitor"].as_str().unwrap().to_string()).collect()
    };
    let skipped = b["skipped"].as_array().unwrap().iter().any(|s| s["competitor"] == "ufutex-preload");
    for m in b["metrics"].as_array().unwrap() {
        let rows = names(m);
        assert!(rows.contains(&"ufutex".into()) && rows.contains(&"kernel".into()), "{rows:?}");
        assert!(rows.contains(&"ufutex-preload".into()) != skipped, "ufutex-preload: a row or a reason, not both: {b}");
        for r in m["rows"].as_array().unwrap() {
            assert!(r["median"].as_f64().is_some_and(|us| us > 0.0), "{r}");
        }
    }
}

/// A key range of this test process's own for `keyed` (apart from the default 0x424242 and
/// from other tests), as `--base`.
fn keyed_base(slot: u32) -> u32 {
    0x5000_0000 + (std::process::id() & 0xfff) * 0x1000 + slot * 0x200
}

/// The SysV semaphore sets whose key is in `[first, first + len)` (/proc/sysvipc/sem).
fn sets_in(first: u32, len: u32) -> usize {
    let text = std::fs::read_to_string("/proc/sysvipc/sem").unwrap_or_default();
    let keys = text.lines().skip(1).filter_map(|l| l.split_whitespace().next()?.parse::<i64>().ok());
    keys.filter(|k| (i64::from(first)..i64::from(first + len)).contains(k)).count()
}

fn sysv_usable() -> bool {
    std::path::Path::new("/proc/sysvipc/sem").exists()
}

/// The ufutex namespaces of the process `pid` (`ufutex-keyed`'s are `bench-keyed-<pid>-<n>`).
fn keyed_namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("bench-keyed-{pid}-");
    ufutex::named::Namespace::list().unwrap().into_iter().filter(|n| n.starts_with(&prefix)).collect()
}

/// `keyed`: per KEYS value six phase benches and one of new processes, one bench per thread
/// count, both columns, and no set or namespace left behind.
#[test]
fn keyed_reports_every_phase_and_cleans_up() {
    if !sysv_usable() {
        return;
    }
    let base = keyed_base(0);
    let b = format!("{base:#x}");
    let v = json_of(&["keyed", "--keys", "1,3", "--threads", "1,2", "--runtime", "0.01", "--base", &b]);
    assert_eq!(sets_in(base, 6), 0);
    let benches = v["benches"].as_array().unwrap();
    assert_eq!(benches.len(), 2 * 7 + 2);
    assert_eq!(benches[0]["case"], "keys=1, create (keys absent, IPC_CREAT)");
    assert_eq!(benches[6]["case"], "keys=1, a new process per key (lookup)");
    assert_eq!(benches[13]["case"], "keys=3, a new process per key (lookup)");
    assert!(benches[15]["case"].as_str().unwrap().starts_with("concurrent lookups: keys=3 present, threads=2"));
    let per_process = &benches[13];
    let names: Vec<_> =
        per_process["metrics"].as_array().unwrap().iter().map(|m| m["metric"]["name"].clone()).collect();
    assert_eq!(names, ["in child", "slowest in child", "per process"]);
    assert!(per_process["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("all 3 keys")));
    for b in benches {
        let rows = b["metrics"][0]["rows"].as_array().unwrap();
        let names: Vec<_> = rows.iter().map(|r| r["competitor"].as_str().unwrap()).collect();
        assert_eq!(names, ["kernel-semget", "ufutex-keyed"], "{b}");
        assert!(rows.iter().all(|r| r["median"].as_f64().is_some_and(|x| x > 0.0)), "{b}");
    }
    // Every metric of the per-process benches, both rows.
    for b in [&benches[6], &benches[13]] {
        for m in b["metrics"].as_array().unwrap() {
            let rows = m["rows"].as_array().unwrap();
            assert_eq!(rows.len(), 2, "{m}");
            assert!(rows.iter().all(|r| r["median"].as_f64().is_some_and(|x| x > 0.0)), "{m}");
        }
    }
}

/// `--processes` bounds the new processes (keys sampled evenly; 0 leaves the phase out), and
/// the run leaves no namespace behind.
#[test]
fn keyed_bounds_its_new_processes() {
    if !sysv_usable() {
        return;
    }
    let base = keyed_base(3);
    let b = format!("{base:#x}");
    let v =
        json_of(&["keyed", "--keys", "10", "--threads", "1", "--runtime", "0.01", "--processes", "4", "--base", &b]);
    let benches = v["benches"].as_array().unwrap();
    assert_eq!(benches[6]["case"], "keys=10, a new process per key (lookup)");
    let notes = benches[6]["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().contains("4 of the 10 keys, sampled evenly")), "{notes:?}");
    let v = json_of(&["keyed", "--keys", "2", "--threads", "1", "--runtime", "0.01", "--processes", "0", "--base", &b]);
    let cases: Vec<&str> = v["benches"].as_array().unwrap().iter().map(|b| b["case"].as_str().unwrap()).collect();
    assert_eq!(cases.len(), 6 + 1, "{cases:?}");
    assert!(!cases.iter().any(|c| c.contains("new process")), "{cases:?}");
    assert_eq!(sets_in(base, 20), 0);
}

/// A new process that gets a wrong answer says so and fails, and creates nothing.
#[test]
fn keyed_child_checks_its_answer() {
    let name = format!("bench-keyed-{}-test", std::process::id());
    let out = bench()
        .args(["keyed-child", "--impl", "ufutex-keyed", "--key", "5", "--expect", "5", "--namespace", &name])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ENOENT"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!ufutex::named::Namespace::list().unwrap().contains(&name), "the child left a namespace behind");
    if sysv_usable() {
        let key = (keyed_base(4) + 1).to_string();
        let out =
            bench().args(["keyed-child", "--impl", "kernel-semget", "--key", &key, "--expect", "0"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(sets_in(keyed_base(4), 2), 0);
    }
}

/// A set already in the run's range (maybe another program's): the run refuses, names the key,
/// and leaves the set alone.
#[test]
fn keyed_refuses_a_taken_range() {
    if !sysv_usable() {
        return;
    }
    let base = keyed_base(1);
    // SAFETY: semget and semctl take integers only.
    let id = unsafe { libc::semget((base + 5) as libc::key_t, 1, libc::IPC_CREAT | libc::IPC_EXCL | 0o600) };
    assert!(id >= 0, "test key {:#x} taken", base + 5);
    // --keys 4: the run's range is [base, base + 8), the taken key one of its misses.
    let mut run = bench();
    let out = run.args(["keyed", "--keys", "4", "--runtime", "0.01", "--base"]).arg(base.to_string()).output().unwrap();
    let left = sets_in(base, 8);
    // SAFETY: as above; IPC_RMID takes no fourth argument.
    let removed = unsafe { libc::semctl(id, 0, libc::IPC_RMID) };
    assert_eq!(removed, 0, "the run removed the set it did not create");
    assert_eq!(left, 1);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to run") && err.contains(&format!("{:#x}: exists", base + 5)), "{err}");
}

/// SIGINT in the middle of a run: the signal cleanup removes every set, and the process dies
/// of the signal.
#[test]
fn keyed_cleans_up_on_sigint() {
    if !sysv_usable() {
        return;
    }
    let base = keyed_base(2);
    let exe = assert_cmd::cargo::cargo_bin("ufutex-bench");
    let args = ["keyed", "--keys", "200", "--reps", "1000", "--threads", "1", "--no-warmup", "-q", "--base"];
    let mut run = std::process::Command::new(exe);
    run.args(args).arg(base.to_string()).stdout(std::process::Stdio::null());
    // The run keeps a signal its caller ignores ignored, and a shell's background job (CI
    // started with `&`) inherits SIGINT ignored: the child gets the default action back.
    // SAFETY: `signal` is async-signal-safe, and the closure touches nothing else between the
    // fork and the exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut run, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = run.spawn().unwrap();
    // What the loop saw, not a second look: the run removes its sets between repetitions, so a
    // second look can fall in that gap (it did, in CI).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = 0;
    while seen == 0 && std::time::Instant::now() < deadline {
        seen = sets_in(base, 400);
        std::thread::yield_now();
    }
    let pid = child.id();
    let namespaces = keyed_namespaces_of(pid);
    // SAFETY: kill with our own child's pid (not reaped yet, so not reused).
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(seen > 0, "the run created no set within 20 s");
    assert_eq!(namespaces.len(), 1, "ufutex-keyed's namespace linked during the run: {namespaces:?}");
    assert_eq!(sets_in(base, 400), 0, "sets left behind");
    // A new process the run had started may still be finishing: it leaves nothing either (if
    // it came too late, it made an empty namespace and unlinks it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !keyed_namespaces_of(pid).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(keyed_namespaces_of(pid), Vec::<String>::new(), "namespaces left behind");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
}

/// `sem-pingpong` leaves no name behind: the POSIX semaphores' and the ufutex namespace's
/// (each carries the run's pid), and the SysV set is removed (the run fails otherwise: its
/// `IPC_RMID` is checked by the unit tests; here, the names).
#[test]
fn sem_pingpong_leaves_no_names_behind() {
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ufutex-bench"))
        .args(["sem-pingpong", "--iters", "20", "--reps", "2", "--quiet", "--no-pin"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    for c in ["ufutex-named", "sysv-semop", "posix-sem"] {
        assert!(table.contains(&format!("| {c} |")), "{c}: {table}");
    }
    for side in ["ping", "pong"] {
        let f = format!("/dev/shm/sem.ufutex-bench-{pid}-{side}");
        assert!(!std::path::Path::new(&f).exists(), "{f} left behind");
    }
    let prefix = format!("bench-sem-{pid}-");
    let left: Vec<String> =
        ufutex::named::Namespace::list().unwrap().into_iter().filter(|n| n.starts_with(&prefix)).collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

/// Without `--quiet`, the progress bar still stays off when stderr is not a terminal: a
/// piped or logged run (CI) gets no bar, no carriage returns and no escape codes.
#[test]
fn no_progress_bar_off_a_terminal() {
    let out = bench().args(["wake", "-n", "2", "--reps", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "stderr: {:?}", String::from_utf8_lossy(&out.stderr));
}
