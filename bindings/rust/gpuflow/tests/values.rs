//! Opaque values: Rust objects moved into graphs, set by bodies, read back from runs, each
//! dropped exactly once, after the last run that could read it.
use gpuflow::{Graph, Pool, PoolConfig, Status};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn pool() -> Pool {
    Pool::new(&PoolConfig::host(2, 1, 1 << 20)).expect("pool")
}

/// Counts its drops.
struct Tracked {
    payload: Vec<u32>,
    drops: Arc<AtomicUsize>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn values_flow_between_tasks_and_back_to_the_caller() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let words = g
        .host_value("words", vec!["gpu".to_string(), "flow".to_string()], 0)
        .unwrap();
    let joined = g.value_slot("joined", 16, false).unwrap();
    let length = g.value_slot("length", 8, true).unwrap();
    g.task("join")
        .input(words)
        .output(joined)
        .cpu(|ctx| {
            let w = ctx.input_value::<Vec<String>>(0)?;
            ctx.set_value(0, w.join("-"), 16)?;
            Ok(())
        })
        .add()
        .unwrap();
    g.task("measure")
        .input(joined)
        .output(length)
        .cpu(|ctx| {
            let n = ctx.input_value::<String>(0)?.len();
            ctx.set_value(0, n, 8)?;
            Ok(())
        })
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    run.wait().unwrap();
    assert_eq!(*run.value::<usize>(length).unwrap(), "gpu-flow".len());
    // A host input stays readable through the run, as it is.
    assert_eq!(run.value::<Vec<String>>(words).unwrap()[1], "flow");
}

#[test]
fn a_value_is_dropped_once_after_the_graph_and_its_last_run() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let input = g
        .host_value(
            "input",
            Tracked {
                payload: vec![1, 2, 3],
                drops: drops.clone(),
            },
            12,
        )
        .unwrap();
    let made_drops = drops.clone();
    let out = g.value_slot("out", 12, true).unwrap();
    g.task("copy")
        .input(input)
        .output(out)
        .cpu(move |ctx| {
            let t = ctx.input_value::<Tracked>(0)?;
            let copy = Tracked {
                payload: t.payload.iter().map(|x| x * 10).collect(),
                drops: made_drops.clone(),
            };
            ctx.set_value(0, copy, 12)?;
            Ok(())
        })
        .add()
        .unwrap();
    let first = g.submit(&pool).unwrap();
    let second = g.submit(&pool).unwrap();
    first.wait().unwrap();
    second.wait().unwrap();
    assert_eq!(
        first.value::<Tracked>(out).unwrap().payload,
        vec![10, 20, 30]
    );
    drop(g);
    drop(first);
    // The second run's output and the input it can still read are alive.
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "only the first run's output went"
    );
    assert_eq!(
        second.value::<Tracked>(input).unwrap().payload,
        vec![1, 2, 3]
    );
    drop(second);
    drop(pool);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        3,
        "input once, each run's output once"
    );
}

#[test]
fn a_value_read_as_another_type_or_as_bytes_is_an_error_not_a_crash() {
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let v = g.host_value("number", 7u64, 8).unwrap();
    let bytes = g.host_buffer("bytes", &[1u8, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let wrong = g
        .task("wrong")
        .input(v)
        .cpu(|ctx| {
            ctx.input_value::<String>(0)
                .map(|_| ())
                .map_err(String::from)
        })
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    assert_eq!(run.wait().unwrap_err().status, Status::TASK_FAILED);
    let message = run.task_error(wrong).unwrap();
    assert!(
        message.contains("is not a alloc::string::String"),
        "{message}"
    );
    assert!(run.value::<String>(v).is_err());
    assert_eq!(*run.value::<u64>(v).unwrap(), 7);
    // A buffer is not an opaque value.
    assert_eq!(
        run.value::<u64>(bytes).unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
    assert_eq!(run.fetch(v).unwrap_err().status, Status::INVALID_ARGUMENT);
}

#[test]
fn a_value_refused_by_the_library_is_dropped_not_leaked() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = pool();
    let mut g = Graph::new().unwrap();
    let out = g.value_slot("out", 8, true).unwrap();
    let in_body = drops.clone();
    let task = g
        .task("twice")
        .output(out)
        .cpu(move |ctx| {
            let make = || Tracked {
                payload: vec![],
                drops: in_body.clone(),
            };
            ctx.set_value(0, make(), 0)?;
            // Output #1 does not exist: the library refuses, and the value comes back to drop.
            let err = ctx.set_value(1, make(), 0).unwrap_err();
            Err(err.into())
        })
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    assert!(run.wait().is_err());
    let message = run.task_error(task).unwrap();
    assert!(message.contains('1'), "{message}");
    // The refused value came back and was dropped at once; the accepted one went with the
    // attempt that failed. Each exactly once: nothing more when the run and graph go.
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    drop(run);
    drop(g);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn a_device_value_is_charged_to_the_device_it_was_made_on() {
    let pool = pool();
    let gpu_worker = (0..pool.worker_count().unwrap())
        .find(|&w| pool.worker_info(w).unwrap().gpu)
        .unwrap();
    let mut g = Graph::new().unwrap();
    let handle = g.value_slot("handle", 4096, true).unwrap();
    g.task("allocate")
        .resource("GPU", 1.0)
        .output(handle)
        .gpu(|ctx| {
            ctx.set_device_value(0, "device allocation".to_string(), 4096)?;
            Ok(())
        })
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    run.wait().unwrap();
    assert_eq!(
        run.value::<String>(handle).unwrap().as_str(),
        "device allocation"
    );
    let memory = pool.ledger(gpu_worker, "gpu_memory").unwrap();
    assert!(memory.in_use >= 4096.0, "{memory:?}");
    drop(run);
    drop(g);
}
