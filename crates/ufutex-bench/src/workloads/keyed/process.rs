//! `keyed`'s per-process phase: the seed's "in a new process per key". For each sampled key of a
//! population the parent created, this binary is executed again (`keyed-child`, a fresh
//! process: no mapping or table state inherited, unlike a forked child) and does what a new
//! program does to reach the object: set up (ufutex: open the namespace by name and map it;
//! SysV: nothing) and look the key up once, without creating. The child times that itself,
//! checks the handle and prints the ns; the parent times the whole process, spawn to reaped.

use super::{Population, Range};
use crate::keyed_competitor::{Get, KernelSemget, Keyed, UfutexKeyed};
use crate::result::Metric;
use crate::stats;
use crate::sysv::errno_name;
use crate::workloads::checked_output;
use std::io;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The bench's case for `n` keys.
pub fn case(n: usize) -> String {
    format!("keys={n}, a new process per key (lookup)")
}

pub fn metrics() -> Vec<Metric> {
    vec![Metric::lower("in child", "µs"), Metric::lower("slowest in child", "µs"), Metric::lower("per process", "µs")]
}

/// What a reader needs to judge the numbers: who times what, and how many processes.
pub fn notes(n: usize, sampled: usize) -> Vec<String> {
    let which = if sampled < n {
        format!("{sampled} of the {n} keys, sampled evenly (at most --processes)")
    } else {
        format!("all {n} keys")
    };
    vec![
        format!(
            "one new process per key for {which}: this binary executed again (`keyed-child`), never forked, so it \
             inherits no mapping"
        ),
        "in child: the child's clock from before its setup (ufutex-keyed: Namespace::open of the run's namespace \
         by name, with its mapping; kernel-semget: none) to after one lookup without IPC_CREAT, whose handle it \
         checks; the median over the keys, and the slowest key"
            .into(),
        "per process: the parent's wall time from spawn to reaped (exec, loader, runtime start, argument \
         parsing, exit), the median over the keys"
            .into(),
    ]
}

/// At most `at_most` indexes of `0..n`, spread evenly (all of them when `n ≤ at_most`), in
/// ascending order.
pub fn sample(n: usize, at_most: usize) -> Vec<usize> {
    if n <= at_most {
        return (0..n).collect();
    }
    (0..at_most).map(|j| j * n / at_most).collect()
}

/// One repetition: a population of `r.n`, then one new process per sampled key. In-child
/// median and slowest, µs, and the per-process median, µs.
pub fn once<K: Keyed>(k: &K, exe: &Path, r: Range, sample: &[usize]) -> io::Result<Vec<f64>> {
    let mut pop = Population::new(k, r.first, r.n)?;
    pop.create(None)?;
    let (mut inside, mut wall) = (Vec::with_capacity(sample.len()), Vec::with_capacity(sample.len()));
    for &i in sample {
        let h = pop.handles[i].ok_or_else(|| io::Error::other("a created key without its handle"))?;
        let mut cmd = Command::new(exe);
        cmd.args(["keyed-child", "--impl", k.name(), "--key"]).arg(pop.key(i).to_string());
        cmd.arg("--expect").arg(format!("{h:?}"));
        if let Some(ns) = k.reach() {
            cmd.arg("--namespace").arg(ns);
        }
        let start = Instant::now();
        let out = checked_output(&mut cmd, || format!("{}: the new process for key {:#x}", k.name(), pop.key(i)))?;
        let took = start.elapsed();
        let ns = parse_reply(&String::from_utf8_lossy(&out.stdout)).map_err(io::Error::other)?;
        inside.push(ns as f64 / 1e3);
        wall.push(took.as_nanos() as f64 / 1e3);
    }
    Ok(vec![stats::median(&inside), stats::max(&inside), stats::median(&wall)])
}

/// The child's one line: the ns it took.
pub fn parse_reply(stdout: &str) -> Result<u64, String> {
    stdout.trim().parse().map_err(|_| format!("keyed-child replied {stdout:?}, not a count of ns"))
}

/// The `keyed-child` process: reach `key` in `competitor`'s namespace as a new program does,
/// check that the handle is `expect` (its `{:?}`), print the ns from before the setup to after
/// the lookup.
pub fn child(competitor: &str, namespace: Option<&str>, key: u64, expect: &str) -> io::Result<()> {
    let ns = match competitor {
        KernelSemget::NAME => reach::<KernelSemget>(namespace, key, expect),
        UfutexKeyed::NAME => reach::<UfutexKeyed>(namespace, key, expect),
        other => Err(format!("keyed-child: unknown competitor {other:?}")),
    };
    println!("{}", ns.map_err(io::Error::other)?);
    Ok(())
}

fn reach<K: Keyed>(namespace: Option<&str>, key: u64, expect: &str) -> Result<u64, String> {
    let start = Instant::now();
    let k = K::attach(namespace)?;
    let got = k.get(key, Get::Open);
    let ns = start.elapsed().as_nanos() as u64;
    match got {
        Ok(h) if format!("{h:?}") == expect => Ok(ns),
        other => {
            k.detach_failed();
            let got = other.map_or_else(errno_name, |h| format!("handle {h:?}"));
            Err(format!("{}: key {key:#x}: expected handle {expect}, got {got}", k.name()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_even_and_bounded() {
        assert_eq!(sample(3, 200), [0, 1, 2]);
        assert_eq!(sample(10, 4), [0, 2, 5, 7]);
        let s = sample(31_900, 200);
        assert_eq!(s.len(), 200);
        assert_eq!((s[0], s[1], s[199]), (0, 159, 31_740));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert!(sample(5, 0).is_empty());
    }

    #[test]
    fn replies_are_one_count() {
        assert_eq!(parse_reply("1234\n"), Ok(1234));
        assert!(parse_reply("").unwrap_err().contains("keyed-child replied"));
        assert!(parse_reply("12 µs").is_err());
        assert!(parse_reply("-5").is_err());
    }

    #[test]
    fn a_wrong_answer_is_an_error_that_says_so() {
        let k = UfutexKeyed::new();
        assert_eq!(k.get(77, Get::Create), Ok(77));
        let ns = k.reach().map(str::to_string);
        assert!(reach::<UfutexKeyed>(ns.as_deref(), 77, "77").is_ok_and(|ns| ns > 0));
        let e = reach::<UfutexKeyed>(ns.as_deref(), 77, "78").unwrap_err();
        assert!(e.contains("expected handle 78, got handle 77"), "{e}");
        let e = reach::<UfutexKeyed>(ns.as_deref(), 76, "76").unwrap_err();
        assert!(e.contains("ENOENT"), "{e}");
        assert_eq!(k.remove(77), Ok(()));
    }
}
