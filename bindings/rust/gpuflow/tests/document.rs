//! Graph documents: round trips, refusals and malformed input.
use gpuflow::{DocumentFormat, Graph, Status};

#[test]
fn documents_round_trip_in_both_formats() {
    let mut g = Graph::new().unwrap();
    g.host_buffer("x", &[1i64, 2, 3]).unwrap();
    for format in [DocumentFormat::Binary, DocumentFormat::Json] {
        let doc = g.to_document(format).unwrap();
        let back = Graph::from_document(&doc, DocumentFormat::Auto, false).unwrap();
        assert_eq!(back.task_count().unwrap(), 0);
        Graph::validate_document(&doc, format).unwrap();
        // The same document again, byte for byte.
        assert_eq!(back.to_document(format).unwrap(), doc);
    }
    let mut open = Graph::from_document(
        &g.to_document(DocumentFormat::Json).unwrap(),
        DocumentFormat::Json,
        true,
    )
    .unwrap();
    open.host_buffer("y", &[4i64]).unwrap(); // mutable: open for additions
}

#[test]
fn closure_bodies_and_garbage_are_refused() {
    let mut g = Graph::new().unwrap();
    g.task("rusty").cpu(|_| Ok(())).add().unwrap();
    let err = g.to_document(DocumentFormat::Binary).unwrap_err();
    assert_eq!(err.status, Status::INVALID_ARGUMENT);
    assert!(err.message.contains("rusty"), "{err}");
    let err = g.to_document(DocumentFormat::Auto).unwrap_err();
    assert!(err.message.contains("Auto"), "{err}");
    let err = Graph::from_document(b"{ not json", DocumentFormat::Auto, false)
        .err()
        .unwrap();
    assert_eq!(err.status, Status::INVALID_GRAPH, "{err}");
    assert!(Graph::validate_document(&[0u8; 3], DocumentFormat::Binary).is_err());
}

#[test]
fn kernel_tasks_and_their_edges_survive_the_round_trip() {
    let mut g = Graph::new().unwrap();
    let x = g.host_buffer("x", &[1.0f32, 2.0]).unwrap();
    let y = g.buffer_of::<f32>("y", 2, true).unwrap();
    let a = g
        .task("scale")
        .kernel("scale")
        .input(x)
        .output(y)
        .priority(4)
        .add()
        .unwrap();
    g.task("after")
        .kernel("noop")
        .after(a)
        .retries(1)
        .add()
        .unwrap();
    let doc = g.to_document(DocumentFormat::Binary).unwrap();
    assert_eq!(&doc[4..8], b"GFLW"); // FlatBuffers' file identifier
    let back = Graph::from_document(&doc, DocumentFormat::Binary, false).unwrap();
    assert_eq!(back.task_count().unwrap(), 2);
    assert_eq!(back.to_document(DocumentFormat::Binary).unwrap(), doc);
    let json = String::from_utf8(back.to_document(DocumentFormat::Json).unwrap()).unwrap();
    assert!(json.contains("scale") && json.contains("noop"), "{json}");
}
