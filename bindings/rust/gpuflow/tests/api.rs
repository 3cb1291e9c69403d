//! The safe API against the real library, on a small host-backend pool.
use gpuflow::{Graph, Pool, PoolConfig, RunState, Status, TaskState};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn pool() -> Pool {
    Pool::new(&PoolConfig::host(2, 1, 1 << 20)).expect("pool")
}

#[test]
fn chain_of_typed_buffers() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let input = g.host_buffer("in", &[1.0f64, 2.0, 3.0]).unwrap();
    let doubled = g.buffer_of::<f64>("doubled", 3, false).unwrap();
    let sum = g.buffer_of::<f64>("sum", 1, true).unwrap();
    g.task("double")
        .input(input)
        .output(doubled)
        .resource("GPU", 1.0)
        .gpu(|ctx| {
            let x = ctx.input_as::<f64>(0).map_err(|e| e.to_string())?.to_vec();
            let out = ctx.output_as::<f64>(0).map_err(|e| e.to_string())?;
            for (o, v) in out.iter_mut().zip(&x) {
                *o = 2.0 * v;
            }
            Ok(())
        })
        .add()
        .unwrap();
    let t = g
        .task("sum")
        .input(doubled)
        .output(sum)
        .priority(3)
        .cpu(|ctx| {
            let s: f64 = ctx
                .input_as::<f64>(0)
                .map_err(|e| e.to_string())?
                .iter()
                .sum();
            ctx.output_as::<f64>(0).map_err(|e| e.to_string())?[0] = s;
            Ok(())
        })
        .add()
        .unwrap();
    assert_eq!(g.task_count().unwrap(), 2);
    let run = g.submit(&pool).unwrap();
    drop(g); // runs keep what they need
    run.wait().unwrap();
    assert_eq!(run.state().unwrap(), RunState::Succeeded);
    assert_eq!(run.task_state(t).unwrap(), TaskState::Succeeded);
    assert_eq!(run.fetch_as::<f64>(sum).unwrap(), vec![12.0]);
    assert_eq!(run.fetch(sum).unwrap(), 12.0f64.to_ne_bytes().to_vec());
    let stats = run.stats().unwrap();
    assert_eq!((stats.tasks, stats.succeeded), (2, 2));
}

#[test]
fn panics_become_task_failures_and_retries_count() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let t = g
        .task("boom")
        .retries(2)
        .cpu(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            panic!("kaboom {}", 42)
        })
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    let err = run.wait().unwrap_err();
    assert_eq!(err.status, Status::TASK_FAILED);
    assert!(err.message.contains("boom"), "{}", err.message);
    assert!(run.task_error(t).unwrap().contains("panicked: kaboom 42"));
    assert_eq!(run.task_attempts(t).unwrap(), 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(run.state().unwrap(), RunState::Failed);
}

#[test]
fn err_results_fail_the_task_with_their_message() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let t = g
        .task("nope")
        .cpu(|_| Err("not today".to_string()))
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    assert_eq!(run.wait().unwrap_err().status, Status::TASK_FAILED);
    assert!(run.task_error(t).unwrap().contains("not today"));
}

#[test]
fn errors_carry_status_and_message() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    g.task("greedy")
        .resource("GPU", 5.0)
        .cpu(|_| Ok(()))
        .add()
        .unwrap();
    let err = g.submit(&pool).err().expect("infeasible");
    assert_eq!(err.status, Status::INFEASIBLE);
    assert!(err.message.contains("greedy"), "{}", err.message);
    assert_eq!(err.status.name(), "GF_ERR_INFEASIBLE");

    let err = g.task("late").cpu(|_| Ok(())).add().expect_err("frozen");
    assert_eq!(err.status, Status::STATE, "the submit froze the graph");
    let mut g = Graph::new().unwrap();
    let err = g.task("bodiless").add().expect_err("no body");
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("bodiless"), "{}", err.message);
    let err = pool.ledger(0, "no-such-resource").err().unwrap();
    assert_eq!(err.status, Status::NOT_FOUND);
}

#[test]
fn poll_cancel_and_fd() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let first = g
        .task("slow")
        .cpu(|ctx| {
            while !ctx.cancelled() {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })
        .add()
        .unwrap();
    let second = g.task("later").after(first).cpu(|_| Ok(())).add().unwrap();
    let run = g.submit(&pool).unwrap();
    assert!(run.fd().unwrap() >= 0);
    assert!(!run.poll().unwrap());
    assert!(!run.wait_for(Duration::from_millis(20)).unwrap());
    run.cancel().unwrap();
    let err = run.wait().unwrap_err();
    assert_eq!(err.status, Status::CANCELLED);
    assert_eq!(run.state().unwrap(), RunState::Cancelled);
    assert_eq!(run.task_state(second).unwrap(), TaskState::Cancelled);
}

#[test]
fn pool_and_run_are_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Pool>();
    assert_send_sync::<gpuflow::Run>();
    assert_send::<Graph>();
    let pool = Arc::new(pool());
    // Collected so that all four run at once before the first is joined.
    #[allow(clippy::needless_collect)]
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mut g = Graph::new().unwrap();
                let out = g.buffer_of::<u32>("out", 1, true).unwrap();
                g.task("id")
                    .output(out)
                    .cpu(move |ctx| {
                        ctx.output_as::<u32>(0).map_err(|e| e.to_string())?[0] = i;
                        Ok(())
                    })
                    .add()
                    .unwrap();
                let run = g.submit(&pool).unwrap();
                run.wait().unwrap();
                run.fetch_as::<u32>(out).unwrap()[0]
            })
        })
        .collect();
    let got: Vec<u32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(got, vec![0, 1, 2, 3]);
    assert_eq!(pool.worker_count().unwrap(), 3);
    assert!(pool.worker_info(2).unwrap().gpu);
    assert_eq!(pool.device_memory(0).unwrap(), 1 << 20);
}

#[test]
fn closures_are_dropped_with_the_graph_and_its_runs() {
    let token = Arc::new(());
    {
        let pool = pool();
        let mut g = Graph::new().unwrap();
        let held = token.clone();
        g.task("t")
            .cpu(move |_| {
                let _ = &held;
                Ok(())
            })
            .add()
            .unwrap();
        let run = g.submit(&pool).unwrap();
        run.wait().unwrap();
        assert_eq!(Arc::strong_count(&token), 2);
    }
    assert_eq!(Arc::strong_count(&token), 1);
}

#[test]
fn typed_access_checks_sizes() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let odd = g.host_buffer("odd", &[1u8, 2, 3]).unwrap();
    let t = g
        .task("cast")
        .input(odd)
        .cpu(|ctx| {
            ctx.input_as::<u16>(0)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    assert!(run.wait().is_err());
    assert!(run
        .task_error(t)
        .unwrap()
        .contains("not a whole, aligned array of u16"));
}
