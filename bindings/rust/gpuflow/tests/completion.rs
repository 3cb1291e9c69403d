//! Completion callbacks and the run as a Future, driven here by a minimal executor (the crate
//! depends on none): the callback wakes the task that awaits the run.
use gpuflow::{Graph, Pool, PoolConfig, Run, RunState, Status, SubmitOptions, Where};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

fn pool() -> Pool {
    Pool::new(&PoolConfig::host(2, 0, 0)).expect("pool")
}

/// Counts wake-ups and unparks the thread that blocks on the future.
struct ThreadWaker {
    thread: thread::Thread,
    wakes: AtomicUsize,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Arc::new(ThreadWaker {
        thread: thread::current(),
        wakes: AtomicUsize::new(0),
    });
    let w = Waker::from(waker);
    let mut cx = Context::from_waker(&w);
    let mut future = Box::pin(future);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// Submits `g` with a completion callback that sends the final state to the receiver.
fn submit_reporting(g: &Graph, pool: &Pool) -> (Run, mpsc::Receiver<RunState>) {
    let (tx, rx) = mpsc::channel();
    let run = g
        .submit_with(
            pool,
            SubmitOptions::new().on_complete(move |s| tx.send(s).unwrap()),
        )
        .unwrap();
    (run, rx)
}

/// A graph whose one task runs until `gate` opens.
fn gated(gate: Arc<AtomicBool>) -> Graph {
    let mut g = Graph::new().unwrap();
    g.task("gated")
        .cpu(move |_| {
            while !gate.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })
        .add()
        .unwrap();
    g
}

#[test]
fn the_callback_gets_the_final_state_once() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    g.task("fails").cpu(|_| Err("no".into())).add().unwrap();
    let (run, rx) = submit_reporting(&g, &pool);
    assert_eq!(rx.recv().unwrap(), RunState::Failed);
    assert_eq!(run.wait().unwrap_err().status, Status::TASK_FAILED);
    drop(run);
    // The sender went with the callback: exactly one call.
    assert!(rx.recv().is_err());
}

#[test]
fn a_run_dropped_early_still_completes_its_callback_as_cancelled() {
    let pool = pool();
    let gate = Arc::new(AtomicBool::new(false));
    let g = gated(gate.clone());
    let (run, rx) = submit_reporting(&g, &pool);
    drop(run);
    gate.store(true, Ordering::SeqCst);
    assert_eq!(rx.recv().unwrap(), RunState::Cancelled);
}

#[test]
fn the_future_resolves_when_the_run_ends_and_is_woken_by_it() {
    let pool = pool();
    let gate = Arc::new(AtomicBool::new(false));
    let run = gated(gate.clone()).submit(&pool).unwrap();
    let waker = Arc::new(ThreadWaker {
        thread: thread::current(),
        wakes: AtomicUsize::new(0),
    });
    let w = Waker::from(waker.clone());
    let mut cx = Context::from_waker(&w);
    let mut finished = run.finished();
    // Still gated: pending, and nothing woke it yet.
    assert!(Pin::new(&mut finished).poll(&mut cx).is_pending());
    assert_eq!(waker.wakes.load(Ordering::SeqCst), 0);
    gate.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(60);
    while waker.wakes.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "never woken");
        thread::park_timeout(Duration::from_millis(100));
    }
    match Pin::new(&mut finished).poll(&mut cx) {
        Poll::Ready(r) => r.unwrap(),
        Poll::Pending => panic!("woken but not ready"),
    }
    // A finished run's future is ready at once, with the run's error when it failed.
    assert!(block_on(run.finished()).is_ok());
    let mut g = Graph::new().unwrap();
    g.task("bad").cpu(|_| Err("broken".into())).add().unwrap();
    let failed = g.submit(&pool).unwrap();
    let err = block_on(failed.finished()).unwrap_err();
    assert_eq!(err.status, Status::TASK_FAILED);
    assert!(err.message.contains("broken"), "{err}");
}

#[test]
fn many_runs_awaited_from_many_threads() {
    let pool = Arc::new(pool());
    let start = Arc::new(Barrier::new(8));
    // Collected first: every thread must be started before any is joined (the barrier).
    #[allow(clippy::needless_collect)]
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (pool, start) = (pool.clone(), start.clone());
            thread::spawn(move || {
                let mut g = Graph::new().unwrap();
                let out = g.buffer_of::<u64>("out", 1, true).unwrap();
                g.task("square")
                    .output(out)
                    .cpu(move |ctx| {
                        ctx.output_as::<u64>(0)?[0] = i * i;
                        Ok(())
                    })
                    .add()
                    .unwrap();
                start.wait();
                let run = g.submit(&pool).unwrap();
                block_on(run.finished()).unwrap();
                run.fetch_as::<u64>(out).unwrap()[0]
            })
        })
        .collect();
    let got: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, (0..8).map(|i| i * i).collect::<Vec<_>>());
}

#[test]
fn a_panicking_callback_stops_at_the_boundary() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    g.task("ok").cpu(|_| Ok(())).add().unwrap();
    let run = g
        .submit_with(
            &pool,
            SubmitOptions::new().on_complete(|_| panic!("callback panics")),
        )
        .unwrap();
    // The run and the pool are unharmed: the wait, the future and the next run all work.
    run.wait().unwrap();
    block_on(run.finished()).unwrap();
    let (again, rx) = submit_reporting(&g, &pool);
    assert_eq!(rx.recv().unwrap(), RunState::Succeeded);
    again.wait().unwrap();
}

#[test]
fn where_a_run_goes_is_asked_and_reported() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let t = g.task("here").cpu(|_| Ok(())).add().unwrap();
    let run = g
        .submit_with(&pool, SubmitOptions::new().run_where(Where::InProcess))
        .unwrap();
    run.wait().unwrap();
    assert_eq!(run.run_where().unwrap(), Where::InProcess);
    assert!(run.task_worker(t).unwrap() < pool.worker_count().unwrap());
    // An embedded pool has no service to run in: refused, naming why, nothing submitted.
    let err = g
        .submit_with(&pool, SubmitOptions::new().run_where(Where::InService))
        .err()
        .expect("no service");
    assert_eq!(err.status, Status::INFEASIBLE, "{err}");
}
