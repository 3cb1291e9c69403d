//! Graph documents (gf_graph_serialize / gf_graph_deserialize): a graph whose bodies are
//! kernel names or commands written to bytes and read back, in another process or language.
//! Tasks with closure bodies cannot be written (the error names the first one).
//!
//! (`no_run`, as the crate's own example: a doc test's binary gets no RUNPATH to libgpuflow;
//! tests/ runs the same steps.)
//!
//! ```no_run
//! use gpuflow::{DocumentFormat, Graph};
//! let mut graph = Graph::new()?;
//! graph.host_buffer("x", &[1.0f64, 2.0])?;
//! let json = graph.to_document(DocumentFormat::Json)?;
//! assert_eq!(json[0], b'{');
//! let back = Graph::from_document(&json, DocumentFormat::Auto, false)?;
//! assert_eq!(back.task_count()?, 0);
//! assert!(Graph::from_document(b"not a graph", DocumentFormat::Auto, false).is_err());
//! # Ok::<(), gpuflow::Error>(())
//! ```
use crate::error::{check, Error, Result};
use crate::graph::Graph;
use crate::pool::take_bytes;
use gpuflow_sys as sys;
use std::os::raw::c_void;
use std::ptr;

/// A document's encoding (gf_graph_format).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DocumentFormat {
    /// Reading only: JSON when the text starts with '{', else binary.
    Auto,
    /// FlatBuffers, file identifier "GFLW".
    Binary,
    /// The same schema as JSON text.
    Json,
}

impl DocumentFormat {
    fn raw(self) -> sys::gf_graph_format {
        match self {
            DocumentFormat::Auto => sys::GF_GRAPH_FORMAT_AUTO,
            DocumentFormat::Binary => sys::GF_GRAPH_FORMAT_BINARY,
            DocumentFormat::Json => sys::GF_GRAPH_FORMAT_JSON,
        }
    }
}

impl Graph {
    /// Writes the graph as a self-contained document (not frozen by it). `Auto` is refused:
    /// a writer must choose.
    pub fn to_document(&self, format: DocumentFormat) -> Result<Vec<u8>> {
        if format == DocumentFormat::Auto {
            return Err(Error::invalid(
                "to_document needs DocumentFormat::Binary or ::Json, not Auto",
            ));
        }
        let mut out = sys::gf_bytes {
            data: ptr::null_mut(),
            size: 0,
        };
        // SAFETY: &self: no other call uses the graph meanwhile; out is freed by take_bytes.
        check(unsafe { sys::gf_graph_serialize(&mut out, self.raw(), format.raw()) })?;
        Ok(take_bytes(out))
    }

    /// Reads a graph from a document (untrusted input is fine: the library verifies it and
    /// says what is wrong and where). `mutable`: leave it open for additions, the graph-wide
    /// checks then happen at submit; else it is checked now and frozen, ready to submit.
    pub fn from_document(bytes: &[u8], format: DocumentFormat, mutable: bool) -> Result<Graph> {
        // The cast is for bindgen versions that type the enum constant otherwise.
        #[allow(clippy::unnecessary_cast)]
        let flags = if mutable {
            sys::GF_DESERIALIZE_MUTABLE as u32
        } else {
            0
        };
        let mut raw = ptr::null_mut();
        // SAFETY: bytes is readable for its length during the call and not retained.
        check(unsafe {
            sys::gf_graph_deserialize(
                &mut raw,
                bytes.as_ptr() as *const c_void,
                bytes.len() as u64,
                format.raw(),
                flags,
            )
        })?;
        Ok(Graph::from_raw(raw))
    }

    /// Reads a document and checks it whole (cycles, dangling inputs) without keeping it.
    pub fn validate_document(bytes: &[u8], format: DocumentFormat) -> Result<()> {
        Graph::from_document(bytes, format, false).map(drop)
    }
}
