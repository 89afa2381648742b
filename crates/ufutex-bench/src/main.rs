//! `ufutex-bench`: every futex benchmark, ufutex side by side with the kernel's futex2 syscalls
//! and userspace peers, in one process run, repetitions interleaved.
//!
//! Shape: clap options ([`cli`]) → validated options ([`options`]) → the scheduler ([`sched`])
//! → workloads generic over a competitor trait ([`competitor`], [`workloads`]) → one result
//! type ([`result`]) → exporters ([`export`]).
#![deny(unsafe_op_in_unsafe_fn)]

mod child;
mod cli;
mod competitor;
mod export;
mod goals;
mod instructions;
mod keyed_competitor;
mod line_trip;
mod lock_competitor;
#[cfg(test)]
mod mock;
mod options;
mod pause_exits;
mod progress;
mod report;
mod result;
mod sched;
mod sem_competitor;
mod shm;
mod stats;
mod sys;
mod sysv;
mod workloads;

use clap::{CommandFactory, Parser};
use export::{json::Json, markdown::Markdown, Exporter};
use options::{Job, Options};
use result::{Bench, Document};
use std::io::Write;
use std::process::ExitCode;
use workloads::{
    fastpath, firstcall, hash, keyed, lock, perfbench, pingpong, recovery, schbench, sempingpong, waitv, wake,
};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ufutex-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let cli = cli::Cli::parse();
    let opts = match options::validate(cli) {
        Ok(o) => o,
        Err(msg) => cli::Cli::command().error(clap::error::ErrorKind::ValueValidation, msg).exit(),
    };
    if let Job::Report { out, quick, scale } = &opts.job {
        let doc = report::run(out, *quick, *scale, opts.common.quiet, opts.common.warmup, opts.json.as_deref())?;
        println!("{}", report::headline(&doc));
        println!("report written to {}", out.display());
        return Ok(());
    }
    if let Job::CountCalls { counts } = &opts.job {
        return Ok(instructions::child(&opts.common, counts)?);
    }
    if let Job::FirstCallChild { via } = &opts.job {
        return Ok(firstcall::child(*via)?);
    }
    if let Job::KeyedChild { key, expect, namespace } = &opts.job {
        return Ok(keyed::child(&opts.common.impls[0], namespace.as_deref(), *key, expect)?);
    }
    let doc = Document::new(execute(&opts)?);
    let md = Markdown { name: String::new(), title: None }.export(&doc)?;
    let mut stdout = std::io::stdout().lock();
    for o in md {
        stdout.write_all(o.contents.as_bytes())?;
    }
    if let Some(path) = &opts.json {
        Json::write(&doc, path)?;
    }
    Ok(())
}

/// Run one workload job.
fn execute(opts: &Options) -> std::io::Result<Vec<Bench>> {
    let c = &opts.common;
    match &opts.job {
        Job::Fastpath => fastpath::run(c, &fastpath::Path::ALL),
        Job::Instructions { calls } => instructions::run(c, *calls),
        Job::PerfBench => perfbench::run(c),
        Job::Hash { params, slots: None } => Ok(vec![hash::run(c, *params)?]),
        Job::Hash { params, slots: Some(points) } => hash::sweep(c, *params, points),
        Job::Wake(p) => Ok(vec![wake::run(c, *p)?]),
        Job::Waitv { entries, modes } => waitv::run(c, entries, modes),
        Job::PingPong(p) => Ok(vec![pingpong::run(c, *p)?]),
        Job::Schbench(p) => Ok(vec![schbench::run(c, *p)?]),
        Job::Lock { threads, sections, baseline, after_contention } => {
            lock::run(c, threads, sections, baseline, *after_contention)
        }
        Job::Recovery => Ok(vec![recovery::run(c)?]),
        Job::FirstCall => firstcall::run(c),
        Job::Keyed(p) => keyed::run(c, p),
        Job::SemPingPong(p) => Ok(vec![sempingpong::run(c, *p)?]),
        Job::Report { .. } | Job::CountCalls { .. } | Job::KeyedChild { .. } | Job::FirstCallChild { .. } => {
            unreachable!("handled in run()")
        }
    }
}
