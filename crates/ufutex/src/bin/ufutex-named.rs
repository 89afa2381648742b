//! `ufutex-named`: list, inspect and remove the named objects of the user's namespaces — the
//! `ipcs`/`ipcrm` of ufutex, for the people who debug a stuck program.
//!
//! Its forms and exit status are in [`HELP`], which `-h` or `--help` prints. Keys are
//! decimal or 0x hex.

#![cfg_attr(ufutex_loom, allow(dead_code, unused_imports))]

use std::process::ExitCode;
#[cfg(not(ufutex_loom))]
use ufutex::named::{Kind, NamedError, Namespace};

fn key(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Open the namespace `name` if it exists: looking at one must not create it (as
/// `Namespace::open` would).
#[cfg(not(ufutex_loom))]
fn existing(name: &str) -> Result<Namespace, String> {
    if !Namespace::list().map_err(|e| e.to_string())?.iter().any(|n| n == name) {
        return Err(format!("no namespace {name:?} (`ufutex-named` lists them)"));
    }
    Namespace::open(name).map_err(|e| format!("namespace {name:?}: {e}"))
}

#[cfg(not(ufutex_loom))]
fn run(args: &[String]) -> Result<(), String> {
    match args {
        [] => {
            for name in Namespace::list().map_err(|e| e.to_string())? {
                match Namespace::open(&name) {
                    Ok(ns) => println!("{name}\t{} objects\t{} slots", ns.len(), ns.capacity()),
                    Err(e) => println!("{name}\t({e})"),
                }
            }
            Ok(())
        }
        [cmd, ns] if cmd == "list" => {
            let ns = existing(ns)?;
            println!("key\tkind\tgeneration\tlifetime\tstate");
            for o in ns.objects() {
                let state = match o.kind {
                    Kind::Semaphore => format!("count {}", o.word),
                    Kind::Word | Kind::Word8 | Kind::Word16 | Kind::Word64 => format!("value {:#x}", o.word),
                    Kind::Event => format!(
                        "{}, {}, {} pulses",
                        if o.aux == 1 { "manual" } else { "auto" },
                        if o.word & 1 != 0 { "signaled" } else { "unsignaled" },
                        o.word >> 1
                    ),
                    Kind::Mutex if o.abandoned => "abandoned (its owner thread ended holding it)".into(),
                    Kind::Mutex => match o.owner {
                        Some((slot, gen)) => format!("held by process slot {slot} (generation {gen}), depth {}", o.aux),
                        None => "free".into(),
                    },
                    _ => format!("word {:#x}, aux {}", o.word, o.aux),
                };
                let key = match &o.name {
                    Some(n) => format!("{:?}", String::from_utf8_lossy(n)),
                    None => format!("{:#x}", o.key),
                };
                let lifetime = match o.holders {
                    Some(n) => format!("{n} holders"),
                    None => "until removed".into(),
                };
                println!("{key}\t{:?}\t{}\t{lifetime}\t{state}", o.kind, o.generation);
            }
            Ok(())
        }
        [cmd, name, k] if cmd == "remove" => {
            let ns = existing(name)?;
            // A number is a key; anything else (or "quoted") a name.
            let r = match key(k) {
                Some(id) => ns.remove(id),
                None => ns.remove(k.trim_matches('"')),
            };
            r.map_err(|e| match e {
                NamedError::NotFound => format!("no object {k} in namespace {name:?}"),
                e => e.to_string(),
            })
        }
        [cmd, name] if cmd == "unlink" => Namespace::unlink(name).map_err(|e| match e {
            NamedError::NotFound => format!("no namespace {name:?}"),
            e => e.to_string(),
        }),
        [cmd, ns] if cmd == "reap" => {
            // (Opening reaps; a second look reports what is left to reap: normally nothing.)
            let ns = existing(ns)?;
            let n = ns.reap().map_err(|e| e.to_string())?;
            println!("{n} ledgers of dead processes reaped; {} objects live", ns.len());
            Ok(())
        }
        _ => Err(String::new()),
    }
}

/// Under loom (model checking) there are no named objects to look at.
#[cfg(ufutex_loom)]
fn run(_args: &[String]) -> Result<(), String> {
    Err("not built under loom".into())
}

const USAGE: &str = "usage: ufutex-named [list NAMESPACE | remove NAMESPACE KEY | unlink NAMESPACE | reap NAMESPACE]";

/// What each form does (`-h`, `--help`).
const HELP: &str = concat!(
    "  ufutex-named                        the user's namespaces and their object counts\n",
    "  ufutex-named list NAMESPACE         every object: key, kind, generation, lifetime, state\n",
    "  ufutex-named remove NAMESPACE KEY   remove one now (its waiters see EIDRM); KEY a number\n",
    "                                      (decimal or 0x hex) or a name\n",
    "  ufutex-named unlink NAMESPACE       remove the namespace's file (users keep their mapping)\n",
    "  ufutex-named reap NAMESPACE         give back the references of processes that died\n",
    "                                      holding counted objects (opening it does this too)\n",
    "Exit status: 0 done, 1 failed (the reason on stderr), 2 usage.",
);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.as_slice(), [h] if h == "-h" || h == "--help") {
        println!("{USAGE}\n{HELP}");
        return ExitCode::SUCCESS;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_empty() => {
            eprintln!("{USAGE} (--help says more)");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("ufutex-named: {e}");
            ExitCode::from(1)
        }
    }
}
