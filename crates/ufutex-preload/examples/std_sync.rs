//! An ordinary multi-threaded Rust program — std's Mutex, Condvar, RwLock, channels, Once,
//! park/unpark and scoped threads, all of which sleep and wake through `syscall(SYS_futex)` —
//! that checks its own result. CI runs it under `LD_PRELOAD=libufutex_preload.so` (it uses
//! nothing of ufutex itself).

use std::sync::{mpsc, Arc, Condvar, Mutex, Once, RwLock};
use std::thread;

fn main() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 20_000;

    // A counter under a Mutex, with a Condvar announcing each thread's end.
    let state = Arc::new((Mutex::new((0usize, 0usize)), Condvar::new()));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let state = state.clone();
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    state.0.lock().unwrap().0 += 1;
                }
                state.0.lock().unwrap().1 += 1;
                state.1.notify_all();
            })
        })
        .collect();
    let mut g = state.0.lock().unwrap();
    while g.1 < THREADS {
        g = state.1.wait(g).unwrap();
    }
    assert_eq!(g.0, THREADS * ROUNDS, "mutex counter");
    drop(g);
    handles.into_iter().for_each(|h| h.join().unwrap());

    // Channels: a pipeline of two stages.
    let (tx, rx) = mpsc::sync_channel::<u64>(4);
    let (tx2, rx2) = mpsc::channel::<u64>();
    let stage = thread::spawn(move || rx.iter().for_each(|v| tx2.send(v * 2).unwrap()));
    let producer = thread::spawn(move || (1..=10_000u64).for_each(|v| tx.send(v).unwrap()));
    let sum: u64 = rx2.iter().sum();
    producer.join().unwrap();
    stage.join().unwrap();
    assert_eq!(sum, 10_000 * 10_001, "channel pipeline");

    // RwLock readers and a writer, Once, scoped threads, park/unpark.
    let rw = RwLock::new(0u64);
    let once = Once::new();
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                once.call_once(|| *rw.write().unwrap() += 1);
                for _ in 0..1_000 {
                    let _ = *rw.read().unwrap();
                    *rw.write().unwrap() += 1;
                }
            });
        }
    });
    assert_eq!(*rw.read().unwrap(), 1 + THREADS as u64 * 1_000, "rwlock and once");

    let parked = thread::spawn(|| {
        for _ in 0..1_000 {
            thread::park();
        }
    });
    while !parked.is_finished() {
        parked.thread().unpark();
        thread::yield_now();
    }
    parked.join().unwrap();
    println!("std_sync: ok");
}
