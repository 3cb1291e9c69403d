//! The pool's event stream: task attempts and data movements, with panics stopped at the
//! boundary and callbacks kept alive while the library may still call them.
use gpuflow::{EventKind, Graph, Pool, PoolConfig};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[test]
fn task_and_transfer_events_name_what_happened() {
    let pool = Pool::new(&PoolConfig::host(1, 1, 1 << 20)).unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    pool.set_event_callback(move |e| log.lock().unwrap().push(e.clone()))
        .unwrap();
    let mut g = Graph::new().unwrap();
    let x = g.host_buffer("x", &[1u32, 2, 3, 4]).unwrap();
    let sum = g
        .task("on-device")
        .resource("GPU", 1.0)
        .input(x)
        .gpu(|_| Ok(()))
        .add()
        .unwrap();
    let fails = g
        .task("fails")
        .after(sum)
        .cpu(|_| Err("bad".into()))
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    assert!(run.wait().is_err());
    pool.clear_event_callback().unwrap();
    let events = events.lock().unwrap();
    let of = |kind, task| {
        events
            .iter()
            .filter(|e| e.kind == kind && e.task == task)
            .collect::<Vec<_>>()
    };
    assert_eq!(of(EventKind::TaskStarted, sum).len(), 1);
    let finished = of(EventKind::TaskFinished, sum);
    assert!(finished.len() == 1 && finished[0].ok && finished[0].task_name == "on-device");
    let failed = of(EventKind::TaskFinished, fails);
    assert!(failed.len() == 1 && !failed[0].ok);
    let copy = events
        .iter()
        .find(|e| e.kind == EventKind::TransferFinished && e.data == x)
        .expect("the input was copied to the device");
    assert_eq!(copy.bytes, 16);
    assert_eq!(copy.source_worker, None, "from host memory");
}

#[test]
fn a_panicking_event_callback_loses_only_its_events() {
    let pool = Pool::new(&PoolConfig::host(2, 0, 0)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    pool.set_event_callback(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        panic!("event callback panics");
    })
    .unwrap();
    let mut g = Graph::new().unwrap();
    for i in 0..4 {
        g.task(&format!("t{i}")).cpu(|_| Ok(())).add().unwrap();
    }
    g.submit(&pool).unwrap().wait().unwrap();
    assert!(
        calls.load(Ordering::SeqCst) >= 8,
        "called for every start and finish"
    );
    // Replaced while the pool runs: the old closure stays alive until the pool goes.
    let second = Arc::new(AtomicUsize::new(0));
    let s = second.clone();
    pool.set_event_callback(move |_| {
        s.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    g.submit(&pool).unwrap().wait().unwrap();
    assert!(second.load(Ordering::SeqCst) >= 8);
}
