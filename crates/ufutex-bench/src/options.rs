//! Typed, validated options: every value the CLI accepts is checked here once, with an error
//! that names the option, before anything runs.

use crate::cli::{Cli, Command, CommonArgs, PinArg, SharedArg};
use crate::competitor::{shared_variant, EXPLICIT_NAMES, NAMES, SHARED_NAMES};
use crate::keyed_competitor;
use crate::lock_competitor::{self, LockEntry};
use crate::sem_competitor;
use crate::workloads::fastpath::Body;
use crate::workloads::firstcall;
use crate::workloads::hash::{Params as HashParams, SlotPoint};
use crate::workloads::keyed;
use crate::workloads::lock::Section;
use crate::workloads::waitv::{Mode, Width};
use crate::workloads::wake::{Kind as WakeKind, Params as WakeParams};
use crate::workloads::{parse_list, pingpong, schbench, sempingpong, Common};
use std::path::PathBuf;
use std::time::Duration;
use ufutex::Slots;

/// What to run, fully validated.
#[derive(Debug, Clone)]
pub enum Job {
    Fastpath,
    PerfBench,
    Hash {
        params: HashParams,
        slots: Option<Vec<SlotPoint>>,
    },
    Wake(WakeParams),
    Waitv {
        entries: Vec<usize>,
        modes: Vec<Mode>,
    },
    PingPong(pingpong::Params),
    Schbench(schbench::Params),
    Lock {
        threads: Vec<usize>,
        sections: Vec<Section>,
        baseline: String,
        /// A contended episode before each timed repetition (`--after-contention`).
        after_contention: bool,
    },
    Recovery,
    FirstCall,
    /// The hidden child of `FirstCall`: one new process's two calls.
    FirstCallChild {
        via: firstcall::Via,
    },
    Keyed(keyed::Params),
    SemPingPong(sempingpong::Params),
    Report {
        out: PathBuf,
        quick: bool,
        scale: f64,
    },
    /// Fast paths counted in instructions under valgrind, N calls in the shorter run.
    Instructions {
        calls: usize,
    },
    /// The hidden child of `Instructions`: these counts, on one competitor.
    CountCalls {
        counts: Vec<(Body, usize)>,
    },
    /// The hidden child of `Keyed`'s per-process phase: one lookup, on one competitor.
    KeyedChild {
        key: u64,
        expect: String,
        namespace: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct Options {
    pub common: Common,
    pub job: Job,
    pub json: Option<PathBuf>,
}

type R<T> = Result<T, String>;

fn range(name: &str, v: usize, lo: usize, hi: usize) -> R<usize> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{name} {v}: must be between {lo} and {hi}"))
    }
}

fn list(name: &str, s: &str, lo: usize, hi: usize) -> R<Vec<usize>> {
    let v = parse_list(s).map_err(|e| format!("{name}: {e}"))?;
    v.into_iter().map(|x| range(name, x, lo, hi)).collect()
}

fn slots(s: &str) -> R<Slots> {
    match SlotPoint::parse(s).map_err(|e| format!("--domain-slots: {e}"))? {
        SlotPoint::Auto => Ok(Slots::Auto),
        SlotPoint::Large => Ok(Slots::Large),
        SlotPoint::Fixed(n) => Ok(Slots::Fixed(n)),
    }
}

/// The competitor names given with `--impl`, or `defaults`.
fn impl_names(c: &CommonArgs, defaults: &[&str]) -> Vec<String> {
    match &c.impls {
        None => defaults.iter().map(|s| s.to_string()).collect(),
        Some(s) => s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect(),
    }
}

/// How a run treats its competitors: private, process-shared, or lock competitors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Private,
    Shared,
    Lock,
    Keyed,
    Sem,
}

fn common(c: &CommonArgs, default_runtime: f64, kind: Kind) -> R<Common> {
    let reps = range("--reps", c.reps.unwrap_or(5), 1, 1000)?;
    let runtime = c.runtime.unwrap_or(default_runtime);
    if !(runtime.is_finite() && runtime > 0.0 && runtime <= 3600.0) {
        return Err(format!("--runtime {runtime}: must be > 0 and ≤ 3600 seconds"));
    }
    let defaults = match kind {
        Kind::Lock => lock_competitor::names(),
        Kind::Keyed => keyed_competitor::NAMES.to_vec(),
        Kind::Sem => sem_competitor::NAMES.to_vec(),
        _ => NAMES.to_vec(),
    };
    let names = impl_names(c, &defaults);
    if names.is_empty() {
        return Err("--impl: no competitor given".into());
    }
    let mut impls = Vec::new();
    let mut left_out = Vec::new();
    for i in names {
        let known = match kind {
            Kind::Lock => LockEntry::by_name(&i).map(drop),
            Kind::Keyed if keyed_competitor::NAMES.contains(&i.as_str()) => Ok(()),
            Kind::Keyed => {
                Err(format!("unknown competitor {i:?}; expected one of: {}", keyed_competitor::NAMES.join(", ")))
            }
            Kind::Sem if sem_competitor::NAMES.contains(&i.as_str()) => Ok(()),
            Kind::Sem => {
                Err(format!("unknown competitor {i:?}; expected one of: {}", sem_competitor::NAMES.join(", ")))
            }
            _ if NAMES.contains(&i.as_str()) || EXPLICIT_NAMES.contains(&i.as_str()) => Ok(()),
            Kind::Shared if SHARED_NAMES.contains(&i.as_str()) => Ok(()),
            Kind::Private if SHARED_NAMES.contains(&i.as_str()) => {
                Err(format!("{i} needs --shared (its words must be in shared memory)"))
            }
            _ => Err(format!(
                "unknown competitor {i:?}; expected one of: {}",
                NAMES.iter().chain(EXPLICIT_NAMES).copied().collect::<Vec<_>>().join(", ")
            )),
        };
        known.map_err(|e| format!("--impl: {e}"))?;
        match kind {
            Kind::Shared => match shared_variant(&i) {
                Ok(s) if !impls.iter().any(|x| x == s) => impls.push(s.to_string()),
                Ok(_) => {}
                Err(reason) => left_out.push((i, reason)),
            },
            _ => impls.push(i),
        }
    }
    if impls.is_empty() {
        return Err("--impl: no competitor with a process-shared mode (ufutex, kernel) given with --shared".into());
    }
    Ok(Common {
        repetitions: reps,
        runtime: Duration::from_secs_f64(runtime),
        impls,
        domain_slots: slots(&c.domain_slots)?,
        quiet: c.quiet,
        warmup: !c.no_warmup,
        shared: kind == Kind::Shared,
        left_out,
    })
}

/// A SysV-style key: decimal or 0x hex.
fn key(s: &str) -> R<u64> {
    let s = s.trim();
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("--base {s:?}: expected a key in decimal or 0x hex"))
}

fn keyed(keys: &str, threads: &str, base: &str, processes: usize) -> R<keyed::Params> {
    let keys = list("--keys", keys, 1, 1 << 24)?;
    let threads = list("--threads", threads, 1, 1024)?;
    let base = key(base)?;
    let span = 2 * keys.iter().copied().max().unwrap_or(1) as u64;
    // The kernel's key_t is an int, and key 0 is IPC_PRIVATE (always a new object).
    if base == 0 || base + span - 1 > i32::MAX as u64 {
        return Err(format!(
            "--base {base:#x}: the run's keys [base, base + 2 × max KEYS = {span}) must lie in 1..=0x7fffffff"
        ));
    }
    let processes = range("--processes", processes, 0, 1_000_000)?;
    Ok(keyed::Params { keys, threads, base, processes })
}

fn hash_slots(s: &str) -> R<Vec<SlotPoint>> {
    let s = if s.trim() == "sweep" { "auto,2,4,8,16,32,64,128,256,512,1024,2048,large" } else { s };
    s.split(',').map(|x| SlotPoint::parse(x).map_err(|e| format!("--slots: {e}"))).collect()
}

/// Check everything; the error names the offending option.
pub fn validate(cli: Cli) -> R<Options> {
    let (c, job, default_runtime, shared) = match cli.command {
        Command::Fastpath { common, shared: SharedArg { shared } } => (common, Job::Fastpath, 0.1, shared),
        Command::PerfBench { common, shared: SharedArg { shared } } => (common, Job::PerfBench, 1.0, shared),
        Command::Hash { common, shared: SharedArg { shared }, threads, futexes, contend, sleepers, size, slots } => {
            if ![8, 16, 32, 64].contains(&size) {
                return Err(format!("--size {size}: must be 8, 16, 32 or 64"));
            }
            let params = HashParams {
                threads: range("--threads", threads, 1, 1024)?,
                futexes: range("--futexes", futexes, 1, 1 << 20)?,
                contend: if contend { Some(range("--sleepers", sleepers, 1, 4096)?) } else { None },
                size,
            };
            let slots = slots.as_deref().map(hash_slots).transpose()?;
            if shared && slots.is_some() {
                return Err("--slots sweeps private tables (ufutex domains, PR_FUTEX_HASH): not with --shared".into());
            }
            (common, Job::Hash { params, slots }, 0.5, shared)
        }
        Command::Wake { common, shared: SharedArg { shared }, waiters, nwake, register, pin: PinArg { pin } } => {
            let waiters = range("--waiters", waiters, 1, 4096)?;
            let nwake = range("--nwake", nwake.unwrap_or(waiters), 1, usize::MAX)?;
            (common, Job::Wake(WakeParams { waiters, kind: WakeKind::Wake { nwake }, register, pin }), 0.1, shared)
        }
        Command::WakeParallel { common, shared: SharedArg { shared }, waiters, wakers, pin: PinArg { pin } } => {
            let waiters = range("--waiters", waiters, 1, 4096)?;
            let wakers = range("--wakers", wakers, 1, waiters)?;
            (
                common,
                Job::Wake(WakeParams { waiters, kind: WakeKind::Parallel { wakers }, register: false, pin }),
                0.1,
                shared,
            )
        }
        Command::Requeue { common, shared: SharedArg { shared }, waiters, nr_wake, pin: PinArg { pin } } => {
            let waiters = range("--waiters", waiters, 1, 4096)?;
            let nr_wake = range("--nr-wake", nr_wake, 0, waiters)?;
            (
                common,
                Job::Wake(WakeParams { waiters, kind: WakeKind::Requeue { nr_wake }, register: false, pin }),
                0.1,
                shared,
            )
        }
        Command::Waitv { common, shared: SharedArg { shared }, entries, modes } => {
            let entries = list("--entries", &entries, 1, ufutex::WAITV_MAX)?;
            let modes = modes
                .split(',')
                .map(|m| match m.trim() {
                    "first" => Ok(Mode::MismatchFirst),
                    "last" => Ok(Mode::MismatchLast),
                    "last8" => Ok(Mode::MismatchLastOf(Width::U8)),
                    "last16" => Ok(Mode::MismatchLastOf(Width::U16)),
                    "last64" => Ok(Mode::MismatchLastOf(Width::U64)),
                    "latency" => Ok(Mode::Latency),
                    o => Err(format!("--modes: {o:?} is not first, last, last8, last16, last64 or latency")),
                })
                .collect::<R<Vec<_>>>()?;
            (common, Job::Waitv { entries, modes }, 0.05, shared)
        }
        Command::PingPong { common, shared: SharedArg { shared }, pairs, iters, no_pin } => {
            let p = pingpong::Params {
                pairs: range("--pairs", pairs, 1, 512)?,
                iters: range("--iters", iters, 1, 100_000_000)?,
                pin: !no_pin,
            };
            (common, Job::PingPong(p), 0.1, shared)
        }
        Command::Schbench { common, messages, workers, work_us, no_resize } => {
            let p = schbench::Params {
                messages: range("--messages", messages, 1, 256)?,
                workers: range("--workers", workers, 1, 256)?,
                work_us: range("--work-us", work_us as usize, 0, 100_000)? as u64,
                resize: !no_resize,
            };
            (common, Job::Schbench(p), 0.5, false)
        }
        Command::Lock { common, threads, cs, baseline, after_contention } => {
            let threads = list("--threads", &threads, 1, 1024)?;
            let sections =
                cs.split(',').map(|s| Section::parse(s).map_err(|e| format!("--cs: {e}"))).collect::<R<Vec<_>>>()?;
            let baseline = match baseline.map(|b| b.trim().to_string()) {
                None => "pthread".to_string(),
                Some(b) if impl_names(&common, &lock_competitor::names()).contains(&b) => b,
                Some(b) => return Err(format!("--baseline {b:?}: not one of the competitors run (--impl)")),
            };
            let json = common.json.clone();
            return Ok(Options {
                common: self::common(&common, 0.3, Kind::Lock)?,
                job: Job::Lock { threads, sections, baseline, after_contention },
                json,
            });
        }
        Command::Recovery { common } => {
            if let Some(list) = &common.impls {
                if list.split(',').map(str::trim).any(|n| !n.is_empty() && n != "ufutex-shared" && n != "ufutex") {
                    return Err("--impl: recovery runs ufutex-shared only".into());
                }
            }
            let mut c = common.clone();
            c.impls = Some("ufutex-shared".into());
            (c, Job::Recovery, 1.0, true)
        }
        Command::FirstCall { common } => {
            if common.impls.is_some() {
                return Err("--impl: first-call runs kernel, ufutex and ufutex-preload, always".into());
            }
            (common, Job::FirstCall, 1.0, false)
        }
        Command::FirstCallChild { common, via } => {
            let via = firstcall::Via::parse(&via).ok_or_else(|| format!("--via {via}: must be kernel or ufutex"))?;
            (common, Job::FirstCallChild { via }, 1.0, false)
        }
        Command::Keyed { common, keys, threads, base, processes } => {
            let params = keyed(&keys, &threads, &base, processes)?;
            let json = common.json.clone();
            return Ok(Options { common: self::common(&common, 0.25, Kind::Keyed)?, job: Job::Keyed(params), json });
        }
        Command::KeyedChild { common, key, expect, namespace } => {
            if common.impls.as_deref().is_none_or(|l| l.contains(',')) {
                return Err("--impl: keyed-child runs exactly one competitor".into());
            }
            let json = common.json.clone();
            let job = Job::KeyedChild { key, expect, namespace };
            return Ok(Options { common: self::common(&common, 0.25, Kind::Keyed)?, job, json });
        }
        Command::SemPingpong { common, iters, no_pin, gap_us } => {
            let gap = Duration::from_micros(range("--gap-us", gap_us as usize, 0, 1_000_000)? as u64);
            let p = sempingpong::Params { iters: range("--iters", iters, 1, 100_000_000)?, pin: !no_pin, gap };
            let json = common.json.clone();
            return Ok(Options { common: self::common(&common, 0.1, Kind::Sem)?, job: Job::SemPingPong(p), json });
        }
        Command::Instructions { mut common, shared: SharedArg { shared }, calls } => {
            common.reps.get_or_insert(1);
            (common, Job::Instructions { calls: range("--calls", calls, 1, 10_000_000)? }, 0.1, shared)
        }
        Command::CountCalls { common, shared: SharedArg { shared }, calls } => {
            if common.impls.as_deref().is_none_or(|l| l.contains(',')) {
                return Err("--impl: count-calls runs exactly one competitor".into());
            }
            let counts = crate::instructions::parse_counts(&calls).map_err(|e| format!("--calls: {e}"))?;
            (common, Job::CountCalls { counts }, 0.1, shared)
        }
        Command::Report { common, out, quick, scale } => {
            if !(scale.is_finite() && scale > 0.0 && scale <= 100.0) {
                return Err(format!("--scale {scale}: must be > 0 and ≤ 100"));
            }
            if common.impls.is_some() {
                return Err("--impl: report runs every competitor; use a single workload to choose".into());
            }
            (common, Job::Report { out, quick, scale }, 1.0, false)
        }
    };
    let json = c.json.clone();
    let kind = if shared { Kind::Shared } else { Kind::Private };
    Ok(Options { common: common(&c, default_runtime, kind)?, job, json })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> R<Options> {
        let mut v = vec!["ufutex-bench"];
        v.extend_from_slice(args);
        validate(Cli::try_parse_from(v).map_err(|e| e.to_string())?)
    }

    #[test]
    fn defaults_are_valid() {
        let o = parse(&["hash"]).unwrap();
        assert_eq!(o.common.repetitions, 5);
        assert_eq!(o.common.impls.len(), NAMES.len());
        assert!(matches!(o.job, Job::Hash { slots: None, .. }));
    }

    #[test]
    fn bad_values_name_their_option() {
        assert!(parse(&["hash", "--size", "12"]).unwrap_err().contains("--size"));
        assert!(parse(&["hash", "--slots", "3"]).unwrap_err().contains("--slots"));
        assert!(parse(&["wake", "--impl", "nope"]).unwrap_err().contains("unknown competitor"));
        assert!(parse(&["lock", "--impl", "kernel"]).unwrap_err().contains("--impl"));
        assert!(parse(&["waitv", "--entries", "0"]).unwrap_err().contains("--entries"));
        assert!(parse(&["waitv", "--entries", "2000"]).unwrap_err().contains("--entries"));
        assert!(parse(&["fastpath", "--runtime=0"]).unwrap_err().contains("--runtime"));
        assert!(parse(&["wake-parallel", "--waiters", "4", "--wakers", "8"]).unwrap_err().contains("--wakers"));
    }

    #[test]
    fn lock_variants_are_accepted_by_name_only() {
        let o = parse(&["lock"]).unwrap();
        assert_eq!(o.common.impls, ["ufutex", "pthread", "std", "parking_lot"]);
        let o = parse(&["lock", "--impl", "ufutex-nohandoff,ufutex-handoff-50us,ufutex-spin-2x16-7y,std"]).unwrap();
        assert_eq!(o.common.impls, ["ufutex-nohandoff", "ufutex-handoff-50us", "ufutex-spin-2x16-7y", "std"]);
        let e = parse(&["lock", "--impl", "ufutex-spin-2x3-7y"]).unwrap_err();
        assert!(e.starts_with("--impl: ") && e.contains("power of two"), "{e}");
        assert!(parse(&["hash", "--impl", "ufutex-nohandoff"]).unwrap_err().contains("unknown competitor"));
    }

    #[test]
    fn the_c_abi_runs_only_when_named() {
        assert!(!parse(&["fastpath"]).unwrap().common.impls.iter().any(|c| c == "ufutex-c"));
        let o = parse(&["fastpath", "--impl", "ufutex,ufutex-c,kernel"]).unwrap();
        assert_eq!(o.common.impls, ["ufutex", "ufutex-c", "kernel"]);
        let o = parse(&["fastpath", "--shared", "--impl", "ufutex,ufutex-c"]).unwrap();
        assert_eq!(o.common.impls, ["ufutex-shared"]);
        assert!(o.common.left_out[0].1.contains("no process-shared mode"));
        assert!(parse(&["lock", "--impl", "ufutex-c"]).unwrap_err().contains("--impl"));
    }

    #[test]
    fn shared_runs_map_competitors_and_leave_the_rest_out() {
        let o = parse(&["hash", "--shared"]).unwrap();
        assert!(o.common.shared);
        assert_eq!(o.common.impls, ["ufutex-shared", "kernel-shared"]);
        let left: Vec<&str> = o.common.left_out.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(left, ["ufutex-domain", "atomic-wait", "parking_lot_core"]);
        assert!(o.common.left_out[0].1.contains("no process-shared mode"));
        let o = parse(&["ping-pong", "--shared", "--impl", "kernel,ufutex-shared,ufutex"]).unwrap();
        assert_eq!(o.common.impls, ["kernel-shared", "ufutex-shared"]);
        assert!(o.common.left_out.is_empty());
        assert!(!parse(&["hash"]).unwrap().common.shared);
        assert!(parse(&["wake", "--impl", "ufutex-shared"]).unwrap_err().contains("needs --shared"));
        assert!(parse(&["wake", "--shared", "--impl", "atomic-wait"]).unwrap_err().contains("process-shared"));
        assert!(parse(&["hash", "--shared", "--slots", "2"]).unwrap_err().contains("--slots"));
        assert!(parse(&["lock", "--shared"]).is_err());
        assert!(parse(&["schbench", "--shared"]).is_err());
        // perf's -S through the preload library's table mode (its competitors are its own).
        let o = parse(&["perf-bench", "--shared"]).unwrap();
        assert!(o.common.shared && matches!(o.job, Job::PerfBench));
    }

    #[test]
    fn recovery_runs_ufutex_shared_only() {
        let o = parse(&["recovery"]).unwrap();
        assert!(matches!(o.job, Job::Recovery));
        assert!(o.common.shared);
        assert_eq!(o.common.impls, ["ufutex-shared"]);
        assert!(o.common.left_out.is_empty());
        assert!(parse(&["recovery", "--impl", "kernel"]).unwrap_err().contains("ufutex-shared only"));
    }

    #[test]
    fn the_lock_baseline_must_be_run() {
        let baseline = |args: &[&str]| match parse(args).map(|o| o.job) {
            Ok(Job::Lock { baseline, .. }) => Ok(baseline),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(baseline(&["lock"]).unwrap(), "pthread");
        assert_eq!(baseline(&["lock", "--baseline", "parking_lot"]).unwrap(), "parking_lot");
        let two = ["lock", "--impl", "ufutex,ufutex-nohandoff", "--baseline", "ufutex-nohandoff"];
        assert_eq!(baseline(&two).unwrap(), "ufutex-nohandoff");
        assert!(baseline(&["lock", "--impl", "ufutex", "--baseline", "std"]).unwrap_err().contains("--baseline"));
    }

    #[test]
    fn keyed_defaults_and_limits() {
        let o = parse(&["keyed"]).unwrap();
        assert_eq!(o.common.impls, ["kernel-semget", "ufutex-keyed"]);
        match o.job {
            Job::Keyed(p) => {
                assert_eq!(p.keys, [1, 10, 32, 100, 1000, 10000, 31900]);
                assert_eq!(p.threads, [1, 2, 4]);
                assert_eq!(p.base, 0x42_4242);
                assert_eq!(p.processes, 200);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["keyed", "--base", "4096", "--keys", "3"]).unwrap().job {
            Job::Keyed(p) => assert_eq!((p.base, p.keys), (4096, vec![3])),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["keyed", "--keys", "0"]).unwrap_err().contains("--keys"));
        assert!(parse(&["keyed", "--threads", "1,x"]).unwrap_err().contains("--threads"));
        assert!(parse(&["keyed", "--base", "0"]).unwrap_err().contains("--base"));
        assert!(parse(&["keyed", "--base", "0x7fffff00", "--keys", "200"]).unwrap_err().contains("0x7fffffff"));
        assert!(parse(&["keyed", "--base", "zz"]).unwrap_err().contains("--base"));
        assert!(parse(&["keyed", "--impl", "kernel"]).unwrap_err().contains("kernel-semget"));
        assert!(parse(&["keyed", "--shared"]).is_err());
        match parse(&["keyed", "--processes", "0"]).unwrap().job {
            Job::Keyed(p) => assert_eq!(p.processes, 0),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["keyed", "--processes", "-1"]).is_err());
    }

    #[test]
    fn keyed_child_takes_one_competitor_a_key_and_a_handle() {
        let args = ["keyed-child", "--impl", "ufutex-keyed", "--key", "4342338", "--expect", "4342338"];
        let o = parse(&[&args[..], &["--namespace", "bench-keyed-7-0"]].concat()).unwrap();
        assert_eq!(o.common.impls, ["ufutex-keyed"]);
        match o.job {
            Job::KeyedChild { key, expect, namespace } => {
                assert_eq!((key, expect.as_str(), namespace.as_deref()), (4342338, "4342338", Some("bench-keyed-7-0")));
            }
            other => panic!("{other:?}"),
        }
        let o = parse(&["keyed-child", "--impl", "kernel-semget", "--key", "0x10", "--expect", "3"]);
        assert!(o.is_err(), "keys are decimal");
        assert!(parse(&["keyed-child", "--impl", "kernel-semget", "--key", "16"]).is_err(), "--expect is required");
        let two = ["keyed-child", "--impl", "kernel-semget,ufutex-keyed", "--key", "1", "--expect", "3"];
        assert!(parse(&two).unwrap_err().contains("exactly one"));
        let unknown = ["keyed-child", "--impl", "kernel", "--key", "1", "--expect", "3"];
        assert!(parse(&unknown).unwrap_err().contains("kernel-semget"));
    }

    #[test]
    fn sem_pingpong_defaults_and_limits() {
        let o = parse(&["sem-pingpong"]).unwrap();
        assert_eq!(o.common.impls, ["ufutex-named", "sysv-semop", "posix-sem"]);
        assert!(
            matches!(o.job, Job::SemPingPong(sempingpong::Params { iters: 20_000, pin: true, gap }) if gap.is_zero())
        );
        let o =
            parse(&["sem-pingpong", "--no-pin", "--iters", "7", "--impl", "posix-sem", "--gap-us", "2000"]).unwrap();
        let want = Duration::from_millis(2);
        assert!(matches!(o.job, Job::SemPingPong(sempingpong::Params { iters: 7, pin: false, gap }) if gap == want));
        assert!(parse(&["sem-pingpong", "--gap-us", "1000001"]).unwrap_err().contains("--gap-us"));
        assert!(parse(&["sem-pingpong", "--iters", "0"]).unwrap_err().contains("--iters"));
        assert!(parse(&["sem-pingpong", "--impl", "kernel"]).unwrap_err().contains("sysv-semop"));
        assert!(parse(&["sem-pingpong", "--shared"]).is_err());
    }

    #[test]
    fn instructions_count_once_by_default_and_its_child_takes_one_competitor() {
        let o = parse(&["instructions"]).unwrap();
        assert_eq!(o.common.repetitions, 1);
        assert!(matches!(o.job, Job::Instructions { calls: 4096 }));
        assert_eq!(
            parse(&["instructions", "--reps", "3", "--shared"]).unwrap().common.impls,
            ["ufutex-shared", "kernel-shared"]
        );
        let o =
            parse(&["count-calls", "--impl", "ufutex-shared", "--shared", "--calls", "wake=2,store-load=3"]).unwrap();
        assert!(matches!(&o.job, Job::CountCalls { counts } if counts.len() == 2));
        assert!(parse(&["count-calls", "--calls", "wake=2"]).unwrap_err().contains("exactly one"));
    }

    #[test]
    fn sweep_expands() {
        match parse(&["hash", "--slots", "sweep"]).unwrap().job {
            Job::Hash { slots: Some(s), .. } => assert_eq!(s.len(), 13),
            other => panic!("{other:?}"),
        }
    }
}
