//! Connected pools, the embedded service and leases, against a service run in this process.
use gpuflow::{Lease, LeaseRequest, Pool, PoolConfig, Service, ServiceConfig, Status};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A socket path of this test's own (tests run in parallel, each with its service).
fn socket(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpuflow-rust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}.sock"))
}

fn service(name: &str, devices: i32) -> Service {
    Service::start(&ServiceConfig {
        pool: Some(PoolConfig::host(2, devices, 1 << 20)),
        socket_path: Some(socket(name)),
        ..ServiceConfig::default()
    })
    .expect("service")
}

#[test]
fn thread_safety_is_as_documented() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Service>();
    assert_send_sync::<Lease<'static>>();
    assert_send_sync::<gpuflow::Pool>();
    assert_send_sync::<gpuflow::Run>();
    assert_send_sync::<gpuflow::Error>();
    assert_send::<gpuflow::Graph>();
    assert_send::<gpuflow::SubmitOptions>();
    assert_send::<gpuflow::Finished<'static>>();
    // Not Sync (Graph) and not Send (TaskContext): the compile_fail examples of lib.rs.
}

#[test]
fn connecting_to_a_missing_socket_names_it() {
    let path = socket("nobody-listens");
    let endpoint = format!("unix://{}", path.display());
    let err = Pool::connect(&endpoint)
        .err()
        .expect("nothing listens there");
    assert!(
        err.message.contains(path.to_str().unwrap()),
        "{}",
        err.message
    );
}

#[test]
fn a_connected_pool_leases_whole_and_shared_devices() {
    let svc = service("leases", 2);
    assert!(svc.endpoint().starts_with("unix://"), "{}", svc.endpoint());
    assert_eq!(svc.remote_endpoint(), None);
    let pool = Pool::connect(&svc.endpoint()).unwrap();
    let whole = pool
        .lease(&LeaseRequest::gpus(1.0).name("whole"), None)
        .unwrap()
        .unwrap();
    let devices = whole.devices().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].share, 1.0);
    assert!(devices[0].uuid.starts_with("GPU-"), "{}", devices[0].uuid);
    let half = LeaseRequest::gpus(0.5).memory(1 << 18).cpus(1.0);
    let shared = pool
        .lease(&half, Some(Duration::from_secs(5)))
        .unwrap()
        .unwrap();
    let d = &shared.devices().unwrap()[0];
    assert_eq!((d.share, d.memory), (0.5, 1 << 18));
    assert_eq!(shared.cpus().unwrap(), 1.0);
    assert_ne!(shared.id().unwrap(), whole.id().unwrap());
    let env = shared.environment().unwrap();
    let id = shared.id().unwrap().to_string();
    assert!(
        env.contains(&("GPUFLOW_LEASE_ID".to_string(), id)),
        "{env:?}"
    );
    let status = pool.service_status(true).unwrap();
    assert!(
        status.starts_with('{') && status.contains("whole"),
        "{status}"
    );
    assert!(!pool.service_status(false).unwrap().is_empty());
    assert!(!whole.revoked().unwrap());
    whole.release().unwrap();
    drop(shared); // released by drop
}

#[test]
fn a_busy_node_times_out_as_none() {
    let svc = service("busy", 1);
    let pool = Pool::connect(&svc.endpoint()).unwrap();
    let held = pool.lease(&LeaseRequest::gpus(1.0), None).unwrap().unwrap();
    let other = Pool::connect(&svc.endpoint()).unwrap();
    let waited = other
        .lease(&LeaseRequest::gpus(1.0), Some(Duration::from_millis(200)))
        .unwrap();
    assert!(waited.is_none());
    drop(held);
    let granted = other
        .lease(&LeaseRequest::gpus(1.0), Some(Duration::from_secs(10)))
        .unwrap();
    assert!(granted.is_some());
}

#[test]
fn requests_beyond_the_node_or_malformed_are_refused() {
    let svc = service("refused", 1);
    let pool = Pool::connect(&svc.endpoint()).unwrap();
    let err = pool
        .lease(&LeaseRequest::gpus(4.0), Some(Duration::from_secs(5)))
        .err()
        .expect("more than the node has");
    assert_eq!(err.status, Status::INFEASIBLE, "{err}");
    let err = pool
        .lease(&LeaseRequest::gpus(1.5), None)
        .err()
        .expect("1.5 is neither a share nor whole");
    assert_eq!(err.status, Status::INVALID_ARGUMENT, "{err}");
    let err = pool
        .lease(&LeaseRequest::gpus(1.0).name("a\0b"), None)
        .err()
        .unwrap();
    assert!(err.message.contains("NUL"), "{err}");
    // The pool is unharmed by refusals.
    assert!(pool
        .lease(&LeaseRequest::gpus(1.0), None)
        .unwrap()
        .is_some());
}

#[test]
fn an_embedded_pool_has_no_service() {
    let pool = Pool::new(&PoolConfig {
        endpoint: Some("embedded".into()),
        ..PoolConfig::host(1, 1, 1 << 20)
    })
    .unwrap();
    let err = pool.lease(&LeaseRequest::gpus(1.0), None).err().unwrap();
    assert_eq!(err.status, Status::STATE);
    assert_eq!(pool.service_status(true).unwrap_err().status, Status::STATE);
}

#[test]
fn a_lease_outliving_its_service_stays_held_while_the_pool_reconnects() {
    let svc = service("stopped", 1);
    let pool = Pool::connect(&svc.endpoint()).unwrap();
    let lease = pool.lease(&LeaseRequest::gpus(1.0), None).unwrap().unwrap();
    svc.stop();
    // The service's goodbye arrives on the pool's connection asynchronously.
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool.service_status(true).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the pool never saw the service go"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A restarted service would keep the lease for this process: it is not asked back, and a
    // release now is carried out once a service answers again.
    assert!(!lease.revoked().unwrap());
    lease.release().unwrap();
    drop(pool);
}

#[test]
fn a_second_service_on_a_live_socket_is_refused() {
    let first = service("twice", 1);
    let err = Service::start(&ServiceConfig {
        socket_path: Some(socket("twice")),
        pool: Some(PoolConfig::host(1, 1, 1 << 20)),
        ..ServiceConfig::default()
    })
    .err()
    .expect("one service per socket");
    assert_eq!(err.status, Status::STATE, "{err}");
    drop(first);
}

#[test]
fn a_connected_pool_runs_graphs() {
    use gpuflow::Graph;
    let svc = service("runs", 1);
    let pool = Pool::connect(&svc.endpoint()).unwrap();
    let mut g = Graph::new().unwrap();
    let out = g.buffer_of::<i64>("out", 1, true).unwrap();
    g.task("eleven")
        .output(out)
        .cpu(|ctx| {
            ctx.output_as::<i64>(0).map_err(|e| e.to_string())?[0] = 11;
            Ok(())
        })
        .add()
        .unwrap();
    let run = g.submit(&pool).unwrap();
    run.wait().unwrap();
    assert_eq!(run.fetch_as::<i64>(out).unwrap(), vec![11]);
}

/// The `gpuflow` command of the build under test: GPUFLOW_TOOL (scripts/test-rust.sh sets it),
/// else beside the library the crate linked (GPUFLOW_LIB_DIR of a build tree).
fn gpuflow_tool() -> PathBuf {
    if let Some(p) = std::env::var_os("GPUFLOW_TOOL") {
        return PathBuf::from(p);
    }
    let lib = std::env::var_os("GPUFLOW_LIB_DIR")
        .expect("set GPUFLOW_TOOL to the gpuflow command (or GPUFLOW_LIB_DIR to a build's src/)");
    PathBuf::from(lib).join("../tools/gpuflow/gpuflow")
}

#[test]
fn a_lease_held_across_a_killed_service_is_taken_back_after_the_restart() {
    use std::process::{Command, Stdio};
    let sock = socket("killed");
    let serve = || {
        Command::new(gpuflow_tool())
            .args([
                "serve",
                "--backend",
                "host",
                "--emulated-devices",
                "2",
                "--socket",
            ])
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gpuflow serve")
    };
    let connect = || {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match Pool::connect(sock.to_str().unwrap()) {
                Ok(p) => return p,
                Err(e) => assert!(Instant::now() < deadline, "never listened: {e}"),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut first = serve();
    let pool = connect();
    let lease = pool.lease(&LeaseRequest::gpus(1.0), None).unwrap().unwrap();
    assert!(!lease.revoked().unwrap());
    first.kill().unwrap(); // SIGKILL: no goodbye, the connection just ends
    first.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while pool.service_status(true).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the pool never saw the service go"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // During the outage the lease is still this process's, and new requests fail at once
    // naming the lost service instead of hanging.
    assert!(!lease.revoked().unwrap());
    let err = pool
        .lease(&LeaseRequest::gpus(1.0), Some(Duration::from_secs(5)))
        .err()
        .expect("the service is gone");
    assert_eq!(err.status, Status::SYSTEM, "{err}");
    assert!(err.message.contains("is gone"), "{err}");
    // A service restarted on the same socket kept the grant for its holder, which still runs
    // (this process); the pool reconnects and takes it back, and its release frees the device.
    let mut second = serve();
    let deadline = Instant::now() + Duration::from_secs(60);
    while pool.service_status(true).is_err() {
        assert!(Instant::now() < deadline, "the pool never reconnected");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!lease.revoked().unwrap(), "the lease was not taken back");
    let other = connect();
    let both = other
        .lease(&LeaseRequest::gpus(2.0), Some(Duration::from_millis(300)))
        .unwrap();
    assert!(both.is_none(), "the taken-back lease still holds a device");
    drop(both);
    lease.release().unwrap();
    let both = other
        .lease(&LeaseRequest::gpus(2.0), Some(Duration::from_secs(30)))
        .unwrap();
    assert!(
        both.is_some(),
        "the released lease's device never came back"
    );
    drop(both);
    drop(other);
    drop(pool);
    second.kill().unwrap();
    second.wait().unwrap();
}

#[test]
fn the_log_callback_sees_policy_changes_and_bad_ones_change_nothing() {
    use std::sync::{Arc, Mutex};
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = lines.clone();
    let svc = Service::start_with_log(
        &ServiceConfig {
            pool: Some(PoolConfig::host(2, 2, 1 << 20)),
            socket_path: Some(socket("policy")),
            dashboard: Some("127.0.0.1:0".into()),
            ..ServiceConfig::default()
        },
        move |line| log.lock().unwrap().push(line.to_string()),
    )
    .unwrap();
    assert!(svc
        .dashboard_url()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
    svc.update_policy(&ServiceConfig {
        user_gpu_cap: Some(1.0),
        user_weights: Some("root=3".into()),
        ..ServiceConfig::default()
    })
    .unwrap();
    let changed = |what: &str| lines.lock().unwrap().iter().any(|l| l.contains(what));
    assert!(
        changed("user_gpu_cap 0 -> 1"),
        "{:?}",
        lines.lock().unwrap()
    );
    // The new cap holds: a second GPU for this user waits (and times out) while one is held.
    let pool = Pool::connect(&svc.endpoint()).unwrap();
    let one = pool.lease(&LeaseRequest::gpus(1.0), None).unwrap().unwrap();
    let other = Pool::connect(&svc.endpoint()).unwrap();
    assert!(other
        .lease(&LeaseRequest::gpus(1.0), Some(Duration::from_millis(200)))
        .unwrap()
        .is_none());
    one.release().unwrap();
    let err = svc
        .update_policy(&ServiceConfig {
            user_weights: Some("root=-1".into()),
            ..ServiceConfig::default()
        })
        .unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT, "{err}");
    assert!(err.message.contains("weight"), "{err}");
}
