//! What a pool has and what it runs besides closures: devices, ledgers, kernels, plugins,
//! commands, graph documents' metadata and indices, the dashboard.
use gpuflow::{Command, DocumentFormat, Graph, Pool, PoolConfig, Status, TaskState};
use std::io::Read;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("gpuflow-rust-parts-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn devices_are_described_and_bad_ordinals_refused() {
    let pool = Pool::new(&PoolConfig::host(1, 2, 32 << 20)).unwrap();
    let a = pool.device_info(0).unwrap();
    let b = pool.device_info(1).unwrap();
    assert!(a.emulated && b.emulated);
    assert_eq!((a.ordinal, b.ordinal), (0, 1));
    assert_eq!(a.pool_memory, 32 << 20);
    assert_ne!(a.uuid, b.uuid);
    assert!(a.uuid.starts_with("GPU-"), "{}", a.uuid);
    assert_eq!(a.pci_bus_id, "");
    assert!(!pool.devices_source().unwrap().is_empty());
    let _ = pool.peer_access(0, 1).unwrap();
    assert_eq!(
        pool.device_info(2).unwrap_err().status,
        Status::INVALID_ARGUMENT
    );
    assert!(pool.peer_access(0, 9).is_err());
}

#[test]
fn the_whole_ledger_of_a_worker_matches_its_lookups() {
    let pool = Pool::new(&PoolConfig {
        cpu_worker_labels: vec![("bigmem".into(), 2.0)],
        ..PoolConfig::host(1, 1, 1 << 20)
    })
    .unwrap();
    for w in 0..pool.worker_count().unwrap() {
        let entries = pool.ledger_entries(w).unwrap();
        assert!(!entries.is_empty());
        for (name, entry) in &entries {
            assert_eq!(
                pool.ledger(w, name).unwrap(),
                *entry,
                "{name} on worker {w}"
            );
        }
        let names: Vec<_> = entries.iter().map(|(n, _)| n.as_str()).collect();
        if pool.worker_info(w).unwrap().gpu {
            assert!(
                names.contains(&"GPU") && names.contains(&"gpu_memory"),
                "{names:?}"
            );
        } else {
            assert!(names.contains(&"bigmem"), "{names:?}");
        }
    }
    assert!(pool.ledger_entries(99).is_err());
}

#[test]
fn kernels_registered_from_closures_run_by_name() {
    let pool = Pool::new(&PoolConfig::host(2, 0, 0)).unwrap();
    pool.register_kernel("add", |ctx| {
        let (a, b) = (ctx.input_as::<i64>(0)?[0], ctx.input_as::<i64>(1)?[0]);
        ctx.output_sized(0, 8)?
            .copy_from_slice(&(a + b).to_ne_bytes());
        Ok(())
    })
    .unwrap();
    pool.register_kernel("sizeless", |ctx| {
        ctx.output(0)?;
        Ok(())
    })
    .unwrap();
    let again = pool.register_kernel("add", |_| Ok(())).unwrap_err();
    assert!(again.message.contains("add"), "{again}");
    assert_eq!(pool.kernel_names().unwrap(), vec!["add", "sizeless"]);

    let mut g = Graph::new().unwrap();
    let a = g.host_buffer("a", &[40i64]).unwrap();
    let b = g.host_buffer("b", &[2i64]).unwrap();
    let sum = g.buffer_of::<i64>("sum", 1, true).unwrap();
    g.task("sum")
        .kernel("add")
        .input(a)
        .input(b)
        .output(sum)
        .add()
        .unwrap();
    let other = g.buffer_of::<i64>("other", 1, true).unwrap();
    let sizeless = g.task("s").kernel("sizeless").output(other).add().unwrap();
    let run = g.submit(&pool).unwrap();
    assert!(run.wait().is_err());
    assert_eq!(run.fetch_as::<i64>(sum).unwrap(), vec![42]);
    let message = run.task_error(sizeless).unwrap();
    assert!(message.contains("output_sized"), "{message}");
}

#[test]
fn a_plugin_that_is_not_a_library_is_refused_naming_it() {
    let pool = Pool::new(&PoolConfig::host(1, 0, 0)).unwrap();
    let dir = scratch("plugin");
    let path = dir.join("not-a-library.so");
    std::fs::write(&path, b"text").unwrap();
    let err = pool.load_plugin(&path).unwrap_err();
    assert!(err.message.contains("not-a-library.so"), "{err}");
    let missing = pool.load_plugin(&dir.join("missing.so")).unwrap_err();
    assert_eq!(missing.status, Status::NOT_FOUND, "{missing}");
    assert!(pool.kernel_names().unwrap().is_empty());
}

#[test]
fn commands_run_with_their_environment_and_fail_naming_their_log() {
    let pool = Pool::new(&PoolConfig::host(1, 0, 0)).unwrap();
    let dir = scratch("commands");
    let logs = dir.join("logs");
    let mut g = Graph::new().unwrap();
    let write = g
        .task("write")
        .command(
            Command::new(["sh", "-c", "printf %s \"$GREETING\" > out.txt"])
                .env("GREETING", "hello")
                .working_dir(&dir)
                .log_dir(&logs),
        )
        .add()
        .unwrap();
    let failing = g
        .task("exit3")
        .after(write)
        .command(Command::new(["sh", "-c", "echo oops >&2; exit 3"]).log_dir(&logs))
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    assert_eq!(run.wait().unwrap_err().status, Status::TASK_FAILED);
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        "hello"
    );
    let message = run.task_error(failing).unwrap();
    assert!(
        message.contains('3') && message.contains("exit3"),
        "{message}"
    );
    let bad = Command::new(["true"]).env("A=B", "c");
    let err = g.task("bad-env").command(bad).add().unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
}

#[test]
fn a_command_past_its_timeout_fails() {
    let pool = Pool::new(&PoolConfig::host(1, 0, 0)).unwrap();
    let mut g = Graph::new().unwrap();
    let t = g
        .task("sleeps")
        .command(Command::new(["sleep", "300"]).timeout(Duration::from_millis(200)))
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    assert_eq!(run.wait().unwrap_err().status, Status::TASK_FAILED);
    assert!(run.task_error(t).unwrap().contains("sleeps"));
}

#[test]
fn a_document_keeps_metadata_and_is_reached_by_index() {
    let pool = Pool::new(&PoolConfig::host(1, 0, 0)).unwrap();
    let mut g = Graph::new().unwrap();
    g.set_metadata("workflow", "rust").unwrap();
    g.set_metadata("step", "1").unwrap();
    g.set_metadata("workflow", "rust-test").unwrap();
    assert!(g.set_metadata("", "x").is_err());
    let x = g.host_buffer("x", &[7u8; 4]).unwrap();
    let y = g.host_buffer("y", &[9u8; 2]).unwrap();
    g.task("copy")
        .input(x)
        .command(Command::new(["true"]))
        .add()
        .unwrap();
    let doc = g.to_document(DocumentFormat::Binary).unwrap();
    let back = Graph::from_document(&doc, DocumentFormat::Auto, false).unwrap();
    assert_eq!(
        back.metadata().unwrap(),
        vec![
            ("workflow".to_string(), "rust-test".to_string()),
            ("step".to_string(), "1".to_string())
        ]
    );
    // Handles are the read-back graph's own; the document's order reaches them.
    let copy = back.task_at(0).unwrap();
    assert!(back.task_at(1).is_err());
    assert_eq!(back.data_count().unwrap(), 2);
    let (x_back, y_back) = (back.data_at(0).unwrap(), back.data_at(1).unwrap());
    back.check(&pool).unwrap();
    let run = back.submit(&pool).unwrap();
    run.wait().unwrap();
    assert_eq!(run.task_state(copy).unwrap(), TaskState::Succeeded);
    assert_eq!(run.fetch(x_back).unwrap(), vec![7u8; 4]);
    assert_eq!(run.fetch(y_back).unwrap(), vec![9u8; 2]);
    assert_ne!(y, y_back);
}

#[test]
fn the_dashboard_serves_its_page_where_it_says() {
    let pool = Pool::new(&PoolConfig {
        dashboard: Some("127.0.0.1:0".into()),
        ..PoolConfig::host(1, 0, 0)
    })
    .unwrap();
    let url = pool.dashboard_url().unwrap().expect("a dashboard");
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(
        &mut stream,
        b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n",
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1."), "{reply}");
    assert!(reply.contains("gpuflow_"), "{reply}");
    let none = Pool::new(&PoolConfig::host(1, 0, 0)).unwrap();
    assert_eq!(none.dashboard_url().unwrap(), None);
}
