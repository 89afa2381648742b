//! Switching the process default domain to `Slots::Large` is final, as `prctl(PR_FUTEX_HASH,
//! SET_SLOTS, 0)` is for the kernel's global hash: every later `set_slots` fails `EBUSY`, except
//! that a size that is not a power of two still fails `EINVAL` first. Its own test binary:
//! the default domain is process-global and this cannot be undone.
#![cfg(not(ufutex_loom))]

use std::sync::atomic::{AtomicU16, Ordering};
use std::thread;
use ufutex::{Domain, Slots};

#[test]
fn large_is_final_on_the_default_domain() {
    let d = Domain::default_domain();
    d.set_slots(Slots::Fixed(32)).unwrap();
    d.set_slots(Slots::Large).unwrap();
    assert_eq!(d.policy(), Slots::Large);
    let large = d.slots();
    assert!(large.is_power_of_two() && large >= 256, "256 × CPUs, rounded up: {large}");
    let err = |s: Slots| d.set_slots(s).unwrap_err().raw_os_error();
    assert_eq!(err(Slots::Large), Some(libc::EBUSY), "0 again");
    assert_eq!(err(Slots::Fixed(16)), Some(libc::EBUSY));
    assert_eq!(err(Slots::Auto), Some(libc::EBUSY));
    assert_eq!(err(Slots::Fixed(1 << 40)), Some(libc::EBUSY), "EBUSY before ENOMEM, as the kernel");
    for bad in [0, 1, 3, 1000] {
        assert_eq!(err(Slots::Fixed(bad)), Some(libc::EINVAL), "EINVAL before EBUSY: {bad}");
    }
    assert_eq!((d.slots(), d.policy()), (large, Slots::Large));
    // A private domain may still switch away from Large: only the default domain's is final.
    let private = Domain::new(ufutex::DomainConfig::new().slots(Slots::Large)).unwrap();
    private.set_slots(Slots::Fixed(2)).unwrap();
    assert_eq!(private.slots(), 2);
    // The large table works.
    let w = AtomicU16::new(0);
    thread::scope(|s| {
        let t = s.spawn(|| {
            while w.load(Ordering::Acquire) == 0 {
                let _ = ufutex::wait(&w, 0, None);
            }
        });
        w.store(1, Ordering::Release);
        ufutex::wake(&w, 1);
        t.join().unwrap();
    });
    assert_eq!(d.queued_waiters(), 0);
}
